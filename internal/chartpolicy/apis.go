package chartpolicy

import (
	"errors"
	"fmt"
	"reflect"
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// KubernetesMinor is the minor version of the Kubernetes release whose API the operator is
// built against (k8s.io/api 0.35 is Kubernetes 1.35): an API version removed in it or
// before is not served. internal/gen/kindgen's tests keep it equal to go.mod's k8s.io/api.
const KubernetesMinor = 35

// APIs are the kinds a cluster serves, with their resource and scope, known without a
// cluster: the built-in kinds of client-go and apiextensions-apiserver (their typed clients
// are the source: client-gen gives a cluster-scoped kind's client no namespace argument), less
// the versions Kubernetes 1.KubernetesMinor no longer serves; and the kinds of the
// CustomResourceDefinitions added with AddCRD.
type APIs struct {
	mapper *meta.DefaultRESTMapper
	// byKind lists the served versions of each kind name, in every group that has it.
	byKind map[string][]schema.GroupVersionKind
	// removed says, for a built-in version no longer served, since which release.
	removed map[schema.GroupVersionKind]string
	// groups are the API groups of the built-in kinds: an unknown group is a CRD's.
	groups map[string]bool
}

// lifecycle is implemented by the beta API types (k8s.io/api's prerelease-lifecycle-gen).
type lifecycle interface {
	APILifecycleRemoved() (major, minor int)
}

// BuiltinAPIs returns the built-in kinds Kubernetes 1.KubernetesMinor serves.
func BuiltinAPIs() *APIs {
	a := &APIs{mapper: meta.NewDefaultRESTMapper(nil), byKind: map[string][]schema.GroupVersionKind{},
		removed: map[schema.GroupVersionKind]string{}, groups: map[string]bool{}}
	a.addClientset(reflect.TypeFor[kubernetes.Interface](), scheme.Scheme)
	a.addClientset(reflect.TypeFor[apiextclient.Interface](), apiextscheme.Scheme)
	return a
}

// addClientset adds the kind of every typed client of a clientset interface: each group
// version's getters (Deployments(namespace string), StorageClasses()) return a client whose
// Get returns the kind's Go type, which s names.
func (a *APIs) addClientset(clientset reflect.Type, s *runtime.Scheme) {
	for i := range clientset.NumMethod() {
		group := clientset.Method(i).Type
		if group.NumIn() != 0 || group.NumOut() != 1 || group.Out(0).Kind() != reflect.Interface {
			continue
		}
		for j := range group.Out(0).NumMethod() {
			getter := group.Out(0).Method(j).Type
			namespaced := getter.NumIn() == 1 && getter.In(0).Kind() == reflect.String
			if (getter.NumIn() != 0 && !namespaced) || getter.NumOut() != 1 || getter.Out(0).Kind() != reflect.Interface {
				continue
			}
			get, ok := getter.Out(0).MethodByName("Get")
			if !ok || get.Type.NumOut() != 2 || get.Type.Out(0).Kind() != reflect.Pointer {
				continue
			}
			obj, ok := reflect.New(get.Type.Out(0).Elem()).Interface().(runtime.Object)
			if !ok {
				continue
			}
			gvks, _, err := s.ObjectKinds(obj)
			if err != nil {
				continue
			}
			scope := meta.RESTScopeRoot
			if namespaced {
				scope = meta.RESTScopeNamespace
			}
			for _, gvk := range gvks {
				a.groups[gvk.Group] = true
				if l, ok := obj.(lifecycle); ok {
					if major, minor := l.APILifecycleRemoved(); major == 1 && minor <= KubernetesMinor {
						a.removed[gvk] = fmt.Sprintf("%d.%d", major, minor)
						continue
					}
				}
				plural, singular := meta.UnsafeGuessKindToResource(gvk)
				a.add(gvk, plural.Resource, singular.Resource, scope)
			}
		}
	}
}

func (a *APIs) add(gvk schema.GroupVersionKind, plural, singular string, scope meta.RESTScope) {
	if _, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return
	}
	a.mapper.AddSpecific(gvk, gvk.GroupVersion().WithResource(plural), gvk.GroupVersion().WithResource(singular), scope)
	a.byKind[gvk.Kind] = append(a.byKind[gvk.Kind], gvk)
	sort.Slice(a.byKind[gvk.Kind], func(i, j int) bool {
		return a.byKind[gvk.Kind][i].String() < a.byKind[gvk.Kind][j].String()
	})
}

// AddCRD adds the served versions of a CustomResourceDefinition's kind: a cluster known to
// have the CRD serves them.
func (a *APIs) AddCRD(crd *apiextv1.CustomResourceDefinition) {
	scope := meta.RESTScopeNamespace
	if crd.Spec.Scope == apiextv1.ClusterScoped {
		scope = meta.RESTScopeRoot
	}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			a.add(gvk, crd.Spec.Names.Plural, crd.Spec.Names.Singular, scope)
		}
	}
}

// RESTMapper maps the served kinds to their resources and scopes.
func (a *APIs) RESTMapper() meta.RESTMapper { return a.mapper }

// Mapping is the served kind gvk, or an error that says why it is not served.
func (a *APIs) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return m, nil
	}
	if since, ok := a.removed[gvk]; ok {
		return nil, fmt.Errorf("%s %s is not served since Kubernetes %s", gvk.GroupVersion(), gvk.Kind, since)
	}
	if !a.groups[gvk.Group] {
		return nil, fmt.Errorf("no CustomResourceDefinition of %s %s is known", gvk.GroupVersion(), gvk.Kind)
	}
	return nil, fmt.Errorf("%s %s is not served by Kubernetes 1.%d", gvk.GroupVersion(), gvk.Kind, KubernetesMinor)
}

// MappingsOfKind are the served kinds named kind, one per API group (at its first version
// in order), for an object whose apiVersion a template computes.
func (a *APIs) MappingsOfKind(kind string) []*meta.RESTMapping {
	var out []*meta.RESTMapping
	seen := map[string]bool{}
	for _, gvk := range a.byKind[kind] {
		if seen[gvk.Group] {
			continue
		}
		seen[gvk.Group] = true
		if m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// ClusterScoped tells whether a served kind is cluster-scoped; ok is false for a kind not
// served.
func (a *APIs) ClusterScoped(gk schema.GroupKind) (cluster, ok bool) {
	for _, gvk := range a.byKind[gk.Kind] {
		if gvk.Group == gk.Group {
			m, err := a.mapper.RESTMapping(gk, gvk.Version)
			return err == nil && m.Scope.Name() == meta.RESTScopeNameRoot, err == nil
		}
	}
	return false, false
}

// Kinds are every served kind, one per group and kind, sorted.
func (a *APIs) Kinds() []schema.GroupKind {
	var out []schema.GroupKind
	seen := map[schema.GroupKind]bool{}
	for _, gvks := range a.byKind {
		for _, gvk := range gvks {
			if !seen[gvk.GroupKind()] {
				seen[gvk.GroupKind()] = true
				out = append(out, gvk.GroupKind())
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Resolve maps an object a chart can render to the served kinds it is: the kind of its
// apiVersion, or, when a template computes the apiVersion, the kind of that name in every
// group that serves one. The error says why an object is none.
func (a *APIs) Resolve(o Object) ([]*meta.RESTMapping, error) {
	if o.Kind == "" {
		return nil, fmt.Errorf("the kind %s computes from the values", o.Expr)
	}
	if o.APIVersion != "" {
		m, err := a.Mapping(o.GroupVersionKind())
		if err != nil {
			return nil, err
		}
		return []*meta.RESTMapping{m}, nil
	}
	ms := a.MappingsOfKind(o.Kind)
	if len(ms) == 0 {
		return nil, errors.New("no served kind has that name (a template computes its apiVersion)")
	}
	return ms, nil
}
