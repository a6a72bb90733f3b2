package renderbound

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The bounds' defaults are written once more in docs/security.md's table ("Template bounds"),
// for the platform teams that size the manager's container: it must say what the code does.
func TestDocumentedDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		fmt.Sprintf("| `--render-max-memory` | `%s` |", ByteSize(DefaultMemory)),
		fmt.Sprintf("| `--render-max-output` | `%s` of manifests |", ByteSize(DefaultOutput)),
		fmt.Sprintf("| `--render-timeout` | `%s` |", DefaultTimeout),
		fmt.Sprintf("| `--render-workers` | `%d` renders at once", DefaultWorkers),
	} {
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/security.md has no row starting %q: the table of template bounds says other defaults than the code", row)
		}
	}
}
