package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HelmObjects lists the objects that Helm marks as a release's (its release-name
// annotation), of every kind the charts render: in the namespaces, and cluster-scoped.
func (e *Env) HelmObjects(ctx context.Context, namespaces []string) ([]client.Object, error) {
	var out []client.Object
	for _, l := range ChartKinds() {
		items, err := e.List(ctx, l)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			_, helm := o.GetAnnotations()["meta.helm.sh/release-name"]
			if helm && (o.GetNamespace() == "" || slices.Contains(namespaces, o.GetNamespace())) {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// ReleaseObjects lists, in every namespace and cluster-wide, the objects that carry the
// release label of release (the charts put it on everything they render), as "Kind ns/name".
func (e *Env) ReleaseObjects(ctx context.Context, release string) ([]string, error) {
	sel := client.MatchingLabels{"app.kubernetes.io/instance": release}
	var out []string
	for _, l := range ChartKinds() {
		items, err := e.List(ctx, l, sel)
		if err != nil {
			return nil, err
		}
		kind := strings.TrimSuffix(fmt.Sprintf("%T", l), "List")
		for _, o := range items {
			out = append(out, fmt.Sprintf("%s %s/%s", kind[strings.LastIndex(kind, ".")+1:], o.GetNamespace(), o.GetName()))
		}
	}
	return out, nil
}
