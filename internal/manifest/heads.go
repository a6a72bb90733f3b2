// Package manifest reads what a release manifest names: the kind, namespace and name of each
// object, without decoding the objects. Helm renders a release as one YAML stream; the
// operator's checks on it (confinement, proof of ownership) need only these heads.
package manifest

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Head is what a manifest says of one object: its kind and where it goes. Namespace is empty
// where the template left it out (Helm puts such a namespaced object in the release's).
type Head struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

// Heads returns the head of each object of the manifests, in order; documents with no kind
// (comments, empty documents) are skipped. A document that is not YAML is an error.
func Heads(manifests ...string) ([]Head, error) {
	var heads []Head
	for _, m := range manifests {
		// SplitManifests answers a map, keyed by each document's place in the stream.
		docs := releaseutil.SplitManifests(m)
		keys := slices.Collect(maps.Keys(docs))
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, key := range keys {
			doc := docs[key]
			var h struct {
				APIVersion string            `json:"apiVersion"`
				Kind       string            `json:"kind"`
				Metadata   metav1.ObjectMeta `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &h); err != nil {
				return nil, fmt.Errorf("manifest: %w", err)
			}
			if h.Kind == "" {
				continue
			}
			heads = append(heads, Head{GVK: schema.FromAPIVersionAndKind(h.APIVersion, h.Kind),
				Namespace: h.Metadata.Namespace, Name: h.Metadata.Name})
		}
	}
	return heads, nil
}
