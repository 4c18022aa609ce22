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

// Every ```go block of the README is one of examples/*/main.go, word for word, and running it
// prints what the ```text block after it says; or it is workhorsetest/example_test.go, whose
// tests then pass (go test -v prints the ```text block's lines).
func TestReadmeExamplesRunAsShown(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(go|text)\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	examples, err := filepath.Glob(filepath.Join("examples", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	const testExample = "workhorsetest/example_test.go"
	examples = append(examples, filepath.FromSlash(testExample))
	shown := 0
	for i, block := range blocks {
		if block[1] != "go" {
			continue
		}
		if i+1 >= len(blocks) || blocks[i+1][1] != "text" {
			t.Fatalf("the README's go block %d should be followed by a ```text block with what it prints", shown+1)
		}
		dir, file := "", ""
		for _, example := range examples {
			if source, err := os.ReadFile(example); err == nil && string(source) == block[2] {
				dir, file = filepath.Dir(example), example
			}
		}
		if dir == "" {
			t.Fatalf("the README's go block %d is none of %v: copy the example file into the README", shown+1, examples)
		}
		shown++
		want := blocks[i+1][2]
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			if file == filepath.FromSlash(testExample) {
				out, err := exec.Command("go", "test", "-count=1", "-v", "./"+dir).CombinedOutput()
				if err != nil {
					t.Fatalf("go test ./%s: %v\n%s", dir, err, out)
				}
				for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
					if !strings.Contains(string(out), line) {
						t.Fatalf("go test ./%s printed\n%s\nnot the README's %q", dir, out, line)
					}
				}
				return
			}
			db := testpg.New(t)
			binary := filepath.Join(t.TempDir(), "example")
			if out, err := exec.Command("go", "build", "-o", binary, "./"+dir).CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			run := exec.Command(binary)
			run.Env = append(os.Environ(), "DATABASE_URL="+db.URL)
			out, err := run.CombinedOutput()
			if err != nil {
				t.Fatalf("%s failed: %v\n%s", dir, err, out)
			}
			if strings.TrimSpace(string(out)) != strings.TrimSpace(want) {
				t.Fatalf("%s printed\n%s\nthe README says\n%s", dir, out, want)
			}
		})
	}
	if shown != len(examples) {
		t.Fatalf("the README shows %d of the %d examples", shown, len(examples))
	}
}
