package rollout

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
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

// A new version of a kind's API (add-version writes conversions.yaml and versions/ into the
// chart) is no new chart: the digest leaves out the kind's version history, both when the
// operator has dropped it from the chart it loads and in a release made before it did. A
// dependency's files of those names are the dependency's own, and count.
func TestDigestLeavesOutVersionHistory(t *testing.T) {
	c, err := loader.Load(filepath.Join("..", "..", "helm-charts", "memcached"))
	if err != nil {
		t.Fatal(err)
	}
	var history []string
	for _, f := range c.Files {
		if conversion.IsVersionHistory(f.Name) {
			history = append(history, f.Name)
		}
	}
	if !slices.Contains(history, conversion.FileName) || len(history) < 2 {
		t.Fatalf("memcached's chart has no version history to leave out (files of it: %v)", history)
	}
	loaded := Digest(c)
	c.Files = slices.DeleteFunc(c.Files, func(f *chart.File) bool { return conversion.IsVersionHistory(f.Name) })
	if got := Digest(c); got != loaded {
		t.Errorf("digest %s without the version history %v, %s with it", got, history, loaded)
	}

	dep := &chart.Chart{Metadata: &chart.Metadata{Name: "sub", Version: "1"}}
	c.AddDependency(dep)
	before := Digest(c)
	dep.Files = append(dep.Files, &chart.File{Name: conversion.FileName, Data: []byte("[]")})
	if Digest(c) == before {
		t.Errorf("a dependency's %s left the digest as it was", conversion.FileName)
	}
}
