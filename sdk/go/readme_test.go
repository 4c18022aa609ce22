package workhorse_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// The README's quickstart is examples/quickstart/main.go, word for word, and running it
// prints what the README says it prints.
func TestReadmeQuickstartRunsAsShown(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(go|text)\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 2 || blocks[0][1] != "go" || blocks[1][1] != "text" {
		t.Fatal("the README should show the quickstart in a ```go block and its output in the ```text block after it")
	}
	source, err := os.ReadFile(filepath.Join("examples", "quickstart", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if blocks[0][2] != string(source) {
		t.Fatal("the README's quickstart is not examples/quickstart/main.go: copy the file into the README")
	}
	db := testpg.New(t)
	binary := filepath.Join(t.TempDir(), "quickstart")
	if out, err := exec.Command("go", "build", "-o", binary, "./examples/quickstart").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := exec.Command(binary)
	run.Env = append(os.Environ(), "DATABASE_URL="+db.URL)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the quickstart failed: %v\n%s", err, out)
	}
	if strings.TrimSpace(string(out)) != strings.TrimSpace(blocks[1][2]) {
		t.Fatalf("the quickstart printed\n%s\nthe README says\n%s", out, blocks[1][2])
	}
}
