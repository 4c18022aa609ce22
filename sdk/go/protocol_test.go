package workhorse

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Files besides protocol.go allowed to hold SQL text, each with the reason.
var sqlAllowed = map[string]string{
	"migrate.go": "the migrator installs and upgrades the schema itself",
}

var (
	// A statement keyword that starts the text; the words that also start prose only as a
	// whole statement ("LISTEN x", "BEGIN").
	sqlStart = regexp.MustCompile(`^\s*((SELECT|INSERT|UPDATE|DELETE|WITH|SET|DO|GRANT|REVOKE|CREATE|ALTER|DROP)\s|` +
		`(LISTEN|UNLISTEN|NOTIFY)\s+\w*\s*;?\s*$|(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b[\w ]*;?\s*$)`)
	// A call of a versioned protocol function or a read of a table (Go's own
	// workhorse.InstallSchema in a message is no SQL).
	workhorseCall = regexp.MustCompile(`\bworkhorse\.[a-z_][a-z0-9_]*_v[0-9]+\s*\(|\b(FROM|JOIN)\s+workhorse\.`)
)

// sqlLiterals answers the string literals of a Go source that read as SQL, as "line: text".
func sqlLiterals(t *testing.T, name string, src any) []string {
	t.Helper()
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	ast.Inspect(file, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		text, err := strconv.Unquote(lit.Value)
		if err == nil && (sqlStart.MatchString(text) || workhorseCall.MatchString(text)) {
			found = append(found, strconv.Itoa(fset.Position(lit.Pos()).Line)+": "+text)
		}
		return true
	})
	return found
}

// Every statement the SDK sends is a constant of protocol.go: no other file of the package
// (tests aside) holds SQL text.
func TestSQLOnlyInProtocol(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		name := entry.Name()
		if entry.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || name == "protocol.go" || sqlAllowed[name] != "" {
			continue
		}
		for _, hit := range sqlLiterals(t, name, nil) {
			t.Errorf("%s:%s: SQL outside protocol.go", name, hit)
		}
	}
}

func TestSQLLiteralsAreRecognised(t *testing.T) {
	src := "package p\n// db.Exec(\"BEGIN\")\nvar a = \"SELECT 1\"\nvar b = `x FROM workhorse.get_job_v1($1)`\nvar c = \"Select a queue\"\nvar d = \"LISTEN needs a driver\"\nvar e = \"call workhorse.InstallSchema(ctx)\"\n"
	hits := sqlLiterals(t, "p.go", src)
	if len(hits) != 2 || !strings.HasPrefix(hits[0], "3:") || !strings.HasPrefix(hits[1], "4:") {
		t.Fatalf("hits = %q", hits)
	}
}
