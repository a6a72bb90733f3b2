package conversionwebhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// chart makes the chart directory name under root, with a conversions.yaml of content
// unless content is empty.
func chart(t *testing.T, root, name, content string) {
	t.Helper()
	dir := filepath.Join(root, "helm-charts", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if content != "" {
		if err := os.WriteFile(filepath.Join(dir, conversion.FileName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadKindsServesOnlyKindsWithConversions(t *testing.T) {
	root := t.TempDir()
	chart(t, root, "memcached", testConversions)
	chart(t, root, "guestbook", "")
	ws := []watchfile.Watch{
		{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached", Chart: "helm-charts/memcached"},
		{Group: "webapp.example.com", Version: "v1", Kind: "Guestbook", Chart: "helm-charts/guestbook"},
	}
	kinds, err := LoadKinds(ws, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 1 || kinds[testKind] == nil {
		t.Errorf("served kinds %v, want only %s", kinds, testKind)
	}
	if kinds[schema.GroupKind{Group: "webapp.example.com", Kind: "Guestbook"}] != nil {
		t.Error("a kind without conversions.yaml is served")
	}
}

func TestLoadKindsRefusesAFileThatDoesNotFitTheKind(t *testing.T) {
	for _, tc := range []struct{ name, content, version, want string }{
		{"malformed", "- from: v1alpha1\n  to: v1alpha1\n", "v1alpha1", "conversions of cache.example.com/v1alpha1, Kind=Memcached"},
		{"watched version missing", testConversions, "v1", "not the watched version v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			chart(t, root, "memcached", tc.content)
			ws := []watchfile.Watch{{Group: "cache.example.com", Version: tc.version, Kind: "Memcached", Chart: "helm-charts/memcached"}}
			_, err := LoadKinds(ws, root)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
