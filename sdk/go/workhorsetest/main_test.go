package workhorsetest_test

import (
	"os"
	"testing"

	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func TestMain(m *testing.M) {
	os.Exit(testpg.Run(m))
}

// testDatabaseURL is a new database with the schema installed, dropped after the test: in your
// project, your test database's URL.
func testDatabaseURL(t *testing.T) string {
	return testpg.New(t).URL
}
