package gen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "transwarp.io/tos/warpdrive-operator"

// The manager's binary, the sidecar included (it is the subcommand manager sidecar), links no
// generator and no test helper. Go's internal/ rule lets every package of the module import
// them, so nothing but this test keeps build-time and test-only code out of the image.
func TestManagerImportsNoGeneratorOrTestHelper(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/manager")
	cmd.Dir = filepath.Join("..", "..")
	// The image's build (make manager, the Dockerfile): build constraints can change the
	// dependencies.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/manager: %v\n%s", err, stderr.String())
	}
	deps := strings.Fields(string(out))
	// A list without the manager itself would pass whatever the manager imports.
	if !slices.Contains(deps, module+"/cmd/manager") {
		t.Fatalf("go list -deps ./cmd/manager does not list the manager:\n%s", out)
	}
	for _, dep := range deps {
		for _, apart := range []string{module + "/internal/gen", module + "/internal/testutil"} {
			if dep == apart || strings.HasPrefix(dep, apart+"/") {
				t.Errorf("./cmd/manager depends on %s, which is under %s: only make targets and tests may import it", dep, apart)
			}
		}
	}
}
