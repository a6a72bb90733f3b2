package watchfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseValid(t *testing.T) {
	data := `
# comment
- group: tos.transwarp.io
  version: v1alpha1
  kind: WarpdrivePool
  chart: helm-charts/warpdrivepool
- group: cache.example.com
  version: v1alpha1
  kind: Memcached
  chart: helm-charts/memcached
  watchDependentResources: true
  maxConcurrentReconciles: 2
  reconcilePeriod: 1m
  overrideValues:
    image: $IMAGE
  selector:
    matchLabels:
      shard: a
- Group: ""
  Version: v1
  Kind: Legacy
  chart: helm-charts/legacy
`
	ws, err := Parse([]byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []schema.GroupVersionKind{
		{Group: "tos.transwarp.io", Version: "v1alpha1", Kind: "WarpdrivePool"},
		{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"},
		{Group: "", Version: "v1", Kind: "Legacy"},
	}
	if len(ws) != len(want) {
		t.Fatalf("got %d watches, want %d", len(ws), len(want))
	}
	for i := range want {
		if got := ws[i].GroupVersionKind(); got != want[i] {
			t.Errorf("watch %d: GVK %v, want %v", i, got, want[i])
		}
	}
	if ws[0].Chart != "helm-charts/warpdrivepool" {
		t.Errorf("chart = %q", ws[0].Chart)
	}
	if !ws[0].Selector.Empty() {
		t.Errorf("watch without selector should select everything, got %q", ws[0].Selector)
	}
	if !ws[1].Selector.Matches(labels.Set{"shard": "a"}) || ws[1].Selector.Matches(labels.Set{"shard": "b"}) {
		t.Errorf("selector %q does not behave as shard=a", ws[1].Selector)
	}
}

func TestParseInvalid(t *testing.T) {
	cases := map[string]struct {
		data    string
		wantErr string
	}{
		"empty":          {"", "empty"},
		"whitespace":     {"  \n\n", "empty"},
		"empty list":     {"[]", "no watches"},
		"null document":  {"---\n", "no watches"},
		"not a list":     {"group: a\nversion: v1\nkind: K\nchart: c\n", "malformed"},
		"not yaml":       {"- group: [unclosed", "malformed"},
		"unknown key":    {"- group: a\n  version: v1\n  kind: K\n  chart: c\n  knd: X\n", "malformed"},
		"missing kind":   {"- group: a\n  version: v1\n  chart: c\n", "kind must not be empty"},
		"missing vers":   {"- group: a\n  kind: K\n  chart: c\n", "version must not be empty"},
		"missing chart":  {"- group: a\n  version: v1\n  kind: K\n", "chart must not be empty"},
		"bad selector":   {"- group: a\n  version: v1\n  kind: K\n  chart: c\n  selector:\n    matchLabels:\n      'a b': c\n", "invalid selector"},
		"duplicate GVK":  {"- {group: a, version: v1, kind: K, chart: c}\n- {group: a, version: v1, kind: K, chart: d}\n", "duplicate GVK"},
		"duplicate keys": {"- group: a\n  group: b\n  version: v1\n  kind: K\n  chart: c\n", "malformed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(path, []byte("- {group: g, version: v1, kind: K, chart: c}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := Load(path)
	if err != nil || len(ws) != 1 {
		t.Fatalf("Load = %v, %v", ws, err)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	empty := filepath.Join(dir, "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("Load of an empty file: err = %v, want it to name the file", err)
	}
}
