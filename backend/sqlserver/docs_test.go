package sqlserver

import (
	"os"
	"strings"
	"testing"
)

// TestDocsShowCreateScript keeps the schema in docs/backends/sqlserver.md, the
// one place the docs write it down, equal to what CreateScript writes for
// the default names: its one ```sql block must be CreateScript's output.
func TestDocsShowCreateScript(t *testing.T) {
	const path = "../../docs/backends/sqlserver.md"
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var blocks []string
	rest := string(src)
	for {
		_, after, ok := strings.Cut(rest, "\n```sql\n")
		if !ok {
			break
		}
		block, tail, ok := strings.Cut(after, "\n```\n")
		if !ok {
			t.Fatalf("%s: a ```sql block is not closed", path)
		}
		blocks = append(blocks, block)
		rest = tail
	}
	if len(blocks) != 1 {
		t.Fatalf("%s has %d ```sql blocks, want the one schema", path, len(blocks))
	}
	if want := strings.TrimRight(CreateScript(DefaultSchema, DefaultTable), "\n"); blocks[0] != want {
		t.Errorf("%s: the schema differs from CreateScript(DefaultSchema, DefaultTable); write its output there:\n%s", path, want)
	}
}
