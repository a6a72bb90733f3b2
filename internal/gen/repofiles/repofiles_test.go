package repofiles

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A generator's failure leaves the paths as they were: files it changed or removed come back
// (an empty one too), files it created go, and files outside the paths are not touched.
func TestRestoreUndoesWhatWasWritten(t *testing.T) {
	root := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("config/crd/a.yaml", "a")
	write("config/crd/empty.yaml", "")
	write("watches.yaml", "w")
	write("README.md", "r")
	paths := []string{"config/crd", "watches.yaml", "helm-charts"}
	before, err := Snapshot(root, paths)
	if err != nil {
		t.Fatal(err)
	}

	write("config/crd/a.yaml", "changed")
	if err := os.Remove(filepath.Join(root, "config/crd/empty.yaml")); err != nil {
		t.Fatal(err)
	}
	write("helm-charts/new/Chart.yaml", "n")
	write("README.md", "outside the paths")
	after, err := Snapshot(root, paths)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"config/crd/a.yaml", "config/crd/empty.yaml (removed)", "helm-charts/new/Chart.yaml (new)"}
	if got := Changed(before, after); !slices.Equal(got, want) {
		t.Errorf("Changed = %q, want %q", got, want)
	}

	if err := Restore(root, paths, before); err != nil {
		t.Fatal(err)
	}
	now, err := Snapshot(root, paths)
	if err != nil {
		t.Fatal(err)
	}
	if got := Changed(before, now); len(got) > 0 {
		t.Errorf("after Restore, changed: %q", got)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "README.md")); string(data) != "outside the paths" {
		t.Errorf("README.md, outside the paths, is %q after Restore", data)
	}
}
