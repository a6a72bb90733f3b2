package operator

import (
	"os"
	"path/filepath"
	"testing"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

// The charts the reconcilers get are without their kind's version history: memcached's
// chart directory has conversions.yaml and versions/, its loaded chart neither.
func TestLoadWatchesDropsVersionHistory(t *testing.T) {
	chartDir, err := filepath.Abs(filepath.Join("..", "..", "helm-charts", "memcached"))
	if err != nil {
		t.Fatal(err)
	}
	for _, history := range []string{conversion.FileName, conversion.VersionsDir} {
		if _, err := os.Stat(filepath.Join(chartDir, history)); err != nil {
			t.Fatalf("memcached's chart has no version history to drop: %v", err)
		}
	}
	watchesFile := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(watchesFile, []byte("- group: cache.example.com\n  version: v1\n  kind: Memcached\n  chart: "+chartDir+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := loadWatches(watchesFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 {
		t.Fatalf("%d watches, want 1", len(ws))
	}
	for _, f := range ws[0].Chart.Files {
		if conversion.IsVersionHistory(f.Name) {
			t.Errorf("the loaded chart has %s", f.Name)
		}
	}
}
