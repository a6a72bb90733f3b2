package rollout

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// The chart in a release record is the loaded chart through JSON (Helm's storage encoding):
// its digest must be the digest of the chart on disk, or every release would look behind.
func TestDigestSurvivesTheReleaseRecord(t *testing.T) {
	for _, name := range []string{"memcached", "appservice", "warpdrivepool"} {
		c, err := loader.Load(filepath.Join("..", "..", "helm-charts", name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var stored chart.Chart
		if err := json.Unmarshal(b, &stored); err != nil {
			t.Fatal(err)
		}
		if got, want := Digest(&stored), Digest(c); got != want {
			t.Errorf("%s: digest %s after the release record, %s before", name, got, want)
		}
	}
}

func TestDigestSeesEveryPart(t *testing.T) {
	base := func() *chart.Chart {
		return &chart.Chart{
			Metadata:  &chart.Metadata{Name: "x", Version: "1.0.0"},
			Values:    map[string]any{"a": 1},
			Templates: []*chart.File{{Name: "templates/a.yaml", Data: []byte("a")}, {Name: "templates/b.yaml", Data: []byte("b")}},
			Files:     []*chart.File{{Name: "README.md", Data: []byte("r")}},
		}
	}
	d := Digest(base())
	reordered := base()
	reordered.Templates[0], reordered.Templates[1] = reordered.Templates[1], reordered.Templates[0]
	if Digest(reordered) != d {
		t.Error("the order of the templates changed the digest")
	}
	for name, edit := range map[string]func(c *chart.Chart){
		"version":  func(c *chart.Chart) { c.Metadata.Version = "1.0.1" },
		"values":   func(c *chart.Chart) { c.Values["a"] = 2 },
		"schema":   func(c *chart.Chart) { c.Schema = []byte("{}") },
		"template": func(c *chart.Chart) { c.Templates[1].Data = []byte("c") },
		"file":     func(c *chart.Chart) { c.Files[0].Data = []byte("s") },
		"renamed":  func(c *chart.Chart) { c.Templates[0].Name = "templates/c.yaml" },
		"dependency": func(c *chart.Chart) {
			c.AddDependency(&chart.Chart{Metadata: &chart.Metadata{Name: "sub", Version: "1"}})
		},
	} {
		c := base()
		edit(c)
		if Digest(c) == d {
			t.Errorf("a change of the %s left the digest as it was", name)
		}
	}
}
