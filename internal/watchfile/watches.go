// Package watchfile reads the helm-operator's watches.yaml, the file that binds
// each custom resource kind to the Helm chart the operator installs for it.
//
// The sidecar only needs the kinds (and the optional label selector that
// shards CRs between operator instances); it never renders charts, so unlike
// the helm-operator it does not load the chart directories.
package watchfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Watch is one entry of watches.yaml.
type Watch struct {
	Group   string
	Version string
	Kind    string
	Chart   string

	// Selector restricts which CRs of Kind the helm-operator reconciles. CRs
	// it does not select have no Helm release, so the sidecar must skip them
	// too. An empty watches.yaml selector selects everything.
	Selector labels.Selector

	// OverrideValues are set over every CR's spec before the chart renders, as helm --set
	// sets them; make add-kind writes some as a safe default (internal/gen/addkind).
	OverrideValues map[string]string
}

// GroupVersionKind returns the custom resource's GVK.
func (w Watch) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: w.Group, Version: w.Version, Kind: w.Kind}
}

// entry mirrors the schema the pinned helm-operator-plugins (v0.9.1,
// pkg/watches.Watch) accepts. Every field it knows is listed so that strict
// decoding rejects misspelt keys without rejecting a file the helm-operator
// would accept. The GVK fields carry no JSON tags upstream, so encoding/json's
// case-insensitive matching applies there too.
type entry struct {
	Group                   string                `json:"group"`
	Version                 string                `json:"version"`
	Kind                    string                `json:"kind"`
	Chart                   string                `json:"chart"`
	WatchDependentResources *bool                 `json:"watchDependentResources,omitempty"`
	OverrideValues          map[string]string     `json:"overrideValues,omitempty"`
	ReconcilePeriod         *metav1.Duration      `json:"reconcilePeriod,omitempty"`
	MaxConcurrentReconciles *int                  `json:"maxConcurrentReconciles,omitempty"`
	Selector                *metav1.LabelSelector `json:"selector,omitempty"`
}

// Load reads and validates the watches file at path.
func Load(path string) ([]Watch, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading watches file: %w", err)
	}
	ws, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("watches file %s: %w", path, err)
	}
	return ws, nil
}

// Parse decodes and validates the content of a watches file. It rejects an
// empty file, anything that is not a YAML list of watch entries, unknown keys,
// entries without version, kind or chart, invalid selectors and duplicate
// GVKs: the sidecar would otherwise start and silently report nothing.
func Parse(data []byte) ([]Watch, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("file is empty")
	}
	var entries []entry
	if err := yaml.UnmarshalStrict(data, &entries); err != nil {
		return nil, fmt.Errorf("malformed watches file (want a YAML list of {group, version, kind, chart}): %w", err)
	}
	if len(entries) == 0 {
		return nil, errors.New("file contains no watches")
	}

	out := make([]Watch, 0, len(entries))
	seen := make(map[schema.GroupVersionKind]int, len(entries))
	for i, e := range entries {
		w := Watch{Group: e.Group, Version: e.Version, Kind: e.Kind, Chart: e.Chart, OverrideValues: e.OverrideValues}
		gvk := w.GroupVersionKind()
		// An empty group is accepted, as it is by the helm-operator.
		switch {
		case e.Version == "":
			return nil, fmt.Errorf("watch #%d (%s): version must not be empty", i+1, gvk)
		case e.Kind == "":
			return nil, fmt.Errorf("watch #%d (%s): kind must not be empty", i+1, gvk)
		case e.Chart == "":
			return nil, fmt.Errorf("watch #%d (%s): chart must not be empty", i+1, gvk)
		}
		if j, dup := seen[gvk]; dup {
			return nil, fmt.Errorf("watch #%d: duplicate GVK %s (already in watch #%d)", i+1, gvk, j+1)
		}
		seen[gvk] = i

		w.Selector = labels.Everything()
		if e.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(e.Selector)
			if err != nil {
				return nil, fmt.Errorf("watch #%d (%s): invalid selector: %w", i+1, gvk, err)
			}
			w.Selector = sel
		}
		out = append(out, w)
	}
	return out, nil
}
