package trustedconfig

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/operator/restconfig"
)

// confinedKube is Helm's Kubernetes client for one release, confined to what the release's
// chart may touch: namespaced objects in the release's namespace, and the cluster-scoped
// kinds the chart declares, and of Roles and RoleBindings only those it declares
// (internal/chartpolicy). Helm turns every manifest into objects
// through Build before it creates, updates, deletes, adopts or waits for them (the rendered
// chart, a release record's manifest and hooks, helm-operator-plugins' drift repair), so a
// manifest naming anything else fails there, whatever record it came from. The other calls
// check their objects again, in case a list was built some other way.
//
// It embeds *kube.Client, not kube.Interface, so that Helm's checks for the optional
// interfaces (deletion propagation, waiting for deletes) still find them.
type confinedKube struct {
	*kube.Client
	namespace string
	cluster   map[schema.GroupKind]bool // cluster-scoped kinds the chart may render
	rbac      map[schema.GroupKind]bool // Roles and RoleBindings, if the chart declares them
	// reads answers the repeated reads of an update, through the client's REST configs; nil:
	// every read goes to the API server.
	reads *restconfig.UpdateReads
}

func newConfinedKube(c *kube.Client, namespace string, clusterKinds, rbacKinds []schema.GroupKind, reads *restconfig.UpdateReads) *confinedKube {
	return &confinedKube{Client: c, namespace: namespace, cluster: kindSet(clusterKinds), rbac: kindSet(rbacKinds), reads: reads}
}

func kindSet(kinds []schema.GroupKind) map[schema.GroupKind]bool {
	set := make(map[schema.GroupKind]bool, len(kinds))
	for _, gk := range kinds {
		set[gk] = true
	}
	return set
}

// outsideReleaseError says that a manifest names an object the release may not touch.
type outsideReleaseError struct {
	kind, namespace, name, releaseNamespace string
	clusterKinds                            []string
	// undeclaredRBAC: a Role or RoleBinding of the release's namespace, of a chart that does
	// not declare them. The manager's rights on them are cluster-wide once any chart declares
	// them, so without this another kind's values (an extraDeploy, an object through tpl)
	// could bind what the operator holds to a subject the tenant names.
	undeclaredRBAC bool
}

func (e *outsideReleaseError) Error() string {
	if e.undeclaredRBAC {
		return fmt.Sprintf("refused: %s %s/%s grants rights to a subject the values may name, and this chart does not declare "+
			"the kind (Chart.yaml annotation %s); a release may only create the RBAC objects its chart declares",
			e.kind, e.namespace, e.name, chartpolicy.RBACKindsAnnotation)
	}
	if e.namespace != "" {
		return fmt.Sprintf("refused: %s %s/%s is outside the release's namespace %q; a release may only touch objects of its own namespace",
			e.kind, e.namespace, e.name, e.releaseNamespace)
	}
	allowed := "none"
	if len(e.clusterKinds) > 0 {
		allowed = strings.Join(e.clusterKinds, ", ")
	}
	return fmt.Sprintf("refused: cluster-scoped %s %q is not a kind this chart renders (its cluster-scoped kinds: %s)",
		e.kind, e.name, allowed)
}

// check returns an error for the first object of resources the release may not touch.
func (c *confinedKube) check(resources kube.ResourceList) error {
	for _, info := range resources {
		if info.Mapping == nil {
			return fmt.Errorf("refused: object %s/%s has no REST mapping, so its scope is unknown", info.Namespace, info.Name)
		}
		gk := info.Mapping.GroupVersionKind.GroupKind()
		if info.Mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if info.Namespace != c.namespace {
				return &outsideReleaseError{kind: gk.String(), namespace: info.Namespace, name: info.Name, releaseNamespace: c.namespace}
			}
			if chartpolicy.IsNamespacedRBAC(gk) && !c.rbac[gk] {
				return &outsideReleaseError{kind: gk.String(), namespace: info.Namespace, name: info.Name, undeclaredRBAC: true}
			}
			continue
		}
		if !c.cluster[gk] {
			return &outsideReleaseError{kind: gk.String(), name: info.Name, clusterKinds: c.clusterKinds()}
		}
	}
	return nil
}

func (c *confinedKube) clusterKinds() []string {
	var out []string
	for gk := range c.cluster {
		out = append(out, gk.String())
	}
	sort.Strings(out)
	return out
}

// Build builds the objects of a manifest and refuses them if any is outside the release.
func (c *confinedKube) Build(reader io.Reader, validate bool) (kube.ResourceList, error) {
	return c.checked(c.Client.Build(reader, validate))
}

// BuildTable is Build for table output (helm status).
func (c *confinedKube) BuildTable(reader io.Reader, validate bool) (kube.ResourceList, error) {
	return c.checked(c.Client.BuildTable(reader, validate))
}

// checked passes on what a build returned, or refuses it.
func (c *confinedKube) checked(resources kube.ResourceList, err error) (kube.ResourceList, error) {
	if err != nil {
		return nil, err
	}
	if err := c.check(resources); err != nil {
		return nil, err
	}
	return resources, nil
}

func (c *confinedKube) Create(resources kube.ResourceList) (*kube.Result, error) {
	if err := c.check(resources); err != nil {
		return nil, err
	}
	return c.Client.Create(resources)
}

func (c *confinedKube) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	if err := c.check(append(append(kube.ResourceList{}, original...), target...)); err != nil {
		return nil, err
	}
	return c.update(func() (*kube.Result, error) { return c.Client.Update(original, target, force) })
}

func (c *confinedKube) UpdateThreeWayMerge(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	if err := c.check(append(append(kube.ResourceList{}, original...), target...)); err != nil {
		return nil, err
	}
	return c.update(func() (*kube.Result, error) { return c.Client.UpdateThreeWayMerge(original, target, force) })
}

// update runs one of Helm's updates with its repeated reads answered (restconfig.UpdateReads).
func (c *confinedKube) update(run func() (*kube.Result, error)) (res *kube.Result, err error) {
	if c.reads == nil {
		return run()
	}
	c.reads.During(func() { res, err = run() })
	return res, err
}

func (c *confinedKube) Delete(resources kube.ResourceList) (*kube.Result, []error) {
	if err := c.check(resources); err != nil {
		return nil, []error{err}
	}
	return c.Client.Delete(resources)
}

func (c *confinedKube) DeleteWithPropagationPolicy(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if err := c.check(resources); err != nil {
		return nil, []error{err}
	}
	return c.Client.DeleteWithPropagationPolicy(resources, policy)
}
