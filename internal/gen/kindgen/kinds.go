// Package kindgen writes every file of the repository that lists the operator's kinds, from
// watches.yaml and each kind's chart, so that a kind is declared once: adding a kind is adding
// its chart and its watches.yaml entry, then running make manifests (hack/kindgen).
//
// The generated files are the kustomization lists of config/crd and config/samples, the
// editor and viewer ClusterRole of each kind, a starter sample of a kind that has none, the
// PROJECT file, and the Argo CD health checks of config/argocd; and, in files that are
// otherwise written by hand, a region between a BEGIN and an END comment line: the users'
// roles in config/rbac/kustomization.yaml, the manager role's rules in config/rbac/role.yaml
// on the custom resources and on every kind the charts can render (rendered.go: all their
// templates whatever the values, cluster-scoped kinds, Roles and RoleBindings only where the
// chart declares them), and the owned CRDs of the ClusterServiceVersion base. The CRDs
// themselves come from internal/gen/crdgen.
package kindgen

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// Kind is one kind of watches.yaml with what its chart says about it.
type Kind struct {
	GVK schema.GroupVersionKind
	// ChartDir is the kind's chart, inside the charts directory Load was given.
	ChartDir string
	// Plural is the resource name of the kind (the chart's crd.warpdrive.transwarp.io/plural).
	Plural string
	// ClusterScoped are the cluster-scoped kinds the chart declares it renders
	// (internal/chartpolicy). A kind whose chart renders any is not for namespace editors:
	// its editor role is not aggregated to "edit".
	ClusterScoped []schema.GroupKind
	// RBAC are the namespaced RBAC kinds (Role, RoleBinding) the chart declares it renders
	// (internal/chartpolicy). The apiserver lets the operator grant through them any right
	// it holds in the namespace, to whichever subject the values name: a kind whose chart
	// declares any is not for namespace editors either.
	RBAC []schema.GroupKind
	// CRD is the kind's CustomResourceDefinition, as internal/gen/crdgen generates it.
	CRD *apiextv1.CustomResourceDefinition
	// Objects are the objects the chart can render, whatever the values
	// (chartpolicy.Objects): the manager role's rules on rendered objects come from them.
	Objects []chartpolicy.Object
}

// Load reads the kinds of a watches file, in its order, with their charts, which are looked
// up in chartsDir by the last element of their path (as internal/gen/crdgen does).
func Load(watchesPath, chartsDir string) ([]Kind, error) {
	ws, err := watchfile.Load(watchesPath)
	if err != nil {
		return nil, err
	}
	seen := map[schema.GroupKind]bool{}
	kinds := make([]Kind, 0, len(ws))
	for _, w := range ws {
		gvk := w.GroupVersionKind()
		if seen[gvk.GroupKind()] {
			return nil, fmt.Errorf("%s: more than one version of %s is watched; make manifests supports one", watchesPath, gvk.GroupKind())
		}
		seen[gvk.GroupKind()] = true
		dir := crdgen.ChartDir(chartsDir, w.Chart)
		crd, err := crdgen.Generate(dir, gvk)
		if err != nil {
			return nil, err
		}
		c, err := loader.LoadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("loading chart %s: %w", dir, err)
		}
		cluster, err := chartpolicy.ClusterScopedKinds(c)
		if err != nil {
			return nil, err
		}
		rbac, err := chartpolicy.RBACKinds(c)
		if err != nil {
			return nil, err
		}
		objects, err := chartpolicy.Objects(c)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", dir, err)
		}
		kinds = append(kinds, Kind{GVK: gvk, ChartDir: dir, Plural: crd.Spec.Names.Plural, ClusterScoped: cluster, RBAC: rbac, CRD: crd,
			Objects: objects})
	}
	return kinds, nil
}

// Lower is the kind in lower case, the stem of its file names in config/rbac and config/samples.
func (k Kind) Lower() string { return strings.ToLower(k.GVK.Kind) }

// AggregatesToEdit tells whether the kind's editor role joins the built-in "edit" role: only
// when its chart declares neither cluster-scoped nor RBAC kinds, so that all it can make the
// operator write is namespaced objects "edit" may create itself; a namespace editor could
// otherwise make the operator create what the editor may not. (The kinds a chart does not
// declare get no rule in the manager role.)
func (k Kind) AggregatesToEdit() bool { return len(k.ClusterScoped) == 0 && len(k.RBAC) == 0 }

// Resource is the kind's custom resource.
func (k Kind) Resource() schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Plural}
}

// SampleFile is operator-sdk's name for the kind's sample in config/samples.
func (k Kind) SampleFile() string {
	return fmt.Sprintf("%s_%s_%s.yaml", k.GVK.Group, k.GVK.Version, k.Lower())
}

// pluralKind is the plural of the kind's name in prose ("Memcacheds"): the resource name's
// ending after the lower-case kind, or "Kind objects" when the resource name is not the kind
// plus an ending.
func (k Kind) pluralKind() string {
	if rest, ok := strings.CutPrefix(k.Plural, k.Lower()); ok {
		return k.GVK.Kind + rest
	}
	return k.GVK.Kind + " objects"
}
