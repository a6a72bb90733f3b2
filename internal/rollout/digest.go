// Package rollout decides how a new chart reaches the custom resources of one kind: which
// of them may move to it now, in waves, and when the rollout halts. It is pure: the
// operator's rollout controller (internal/operator/rollout_controller.go) observes the CRs, asks Decide,
// and acts on the answer. docs/rollouts.md explains the behaviour.
package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"sort"

	"helm.sh/helm/v3/pkg/chart"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

// Digest identifies a chart's content: its metadata, default values, schema, templates and
// files, and those of its dependencies. Two charts with one digest render alike.
//
// Why not the version alone: a chart edited without a version bump is still a new chart to
// roll out. Why not a hash of the chart directory: a Helm release record keeps the chart it
// was made with, but only these parts of it (no raw files), so the digest of the chart in a
// release must equal the digest of the chart it was made from.
//
// The files of the kind's version history (conversion.IsVersionHistory: conversions.yaml,
// versions/) are not a part of it: they are the CRD's, add-version writes them with a new
// version of the kind's API, and a new API version is no new chart to roll out to every CR.
// The operator drops them from the chart it loads; a release made before it did keeps them,
// and is current all the same.
func Digest(c *chart.Chart) string {
	h := sha256.New()
	writeChart(h, c, true)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// writeChart writes c's parts to h; top says c is the kind's chart, not a dependency.
func writeChart(h hash.Hash, c *chart.Chart, top bool) {
	meta, _ := json.Marshal(c.Metadata) // plain data: it always marshals
	vals, _ := json.Marshal(c.Values)   // map keys come out sorted
	field(h, "metadata", meta)
	field(h, "values", vals)
	field(h, "schema", c.Schema)
	for _, group := range []struct {
		kind  string
		files []*chart.File
	}{{"template", c.Templates}, {"file", c.Files}} {
		files := append([]*chart.File(nil), group.files...)
		sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
		for _, f := range files {
			if top && conversion.IsVersionHistory(f.Name) {
				continue
			}
			field(h, group.kind+":"+f.Name, f.Data)
		}
	}
	deps := append([]*chart.Chart(nil), c.Dependencies()...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].Name() < deps[j].Name() })
	for _, d := range deps {
		field(h, "dependency", []byte(d.Name()))
		writeChart(h, d, false)
	}
}

// field writes a name and its data with their lengths, so that no two sequences of fields
// hash alike.
func field(h hash.Hash, name string, data []byte) {
	fmt.Fprintf(h, "%d:%s:%d:", len(name), name, len(data))
	h.Write(data)
}
