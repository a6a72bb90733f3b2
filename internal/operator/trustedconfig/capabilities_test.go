package trustedconfig

import (
	"context"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubetesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingDiscovery is a cached discovery client that counts the server versions it reads.
type countingDiscovery struct {
	discovery.CachedDiscoveryInterface
	versions int
}

func (d *countingDiscovery) ServerVersion() (*version.Info, error) {
	d.versions++
	return d.CachedDiscoveryInterface.ServerVersion()
}

// discoveryGetter is a release's RESTClientGetter as far as capabilities go.
type discoveryGetter struct {
	restGetter
	dc *countingDiscovery
}

func (g discoveryGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.dc, nil
}

func newDiscoveryGetter(groupVersions ...string) discoveryGetter {
	fake := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{},
		FakedServerVersion: &version.Info{GitVersion: "v1.34.1", Major: "1", Minor: "34"}}
	for _, gv := range groupVersions {
		fake.Resources = append(fake.Resources, &metav1.APIResourceList{GroupVersion: gv,
			APIResources: []metav1.APIResource{{Name: "things", Kind: "Thing", Namespaced: true}}})
	}
	return discoveryGetter{dc: &countingDiscovery{CachedDiscoveryInterface: memory.NewMemCacheClient(fake)}}
}

// The capabilities are read once per capabilitiesTTL, whatever the number of releases asking,
// and read again after it, when a new API shows.
func TestCapabilitiesSharedForTheirTTL(t *testing.T) {
	now := time.Unix(0, 0)
	s := &sharedCapabilities{now: func() time.Time { return now }}
	g := newDiscoveryGetter("apps/v1")
	first := s.get(g)
	if first == nil || first.KubeVersion.Version != "v1.34.1" || !first.APIVersions.Has("apps/v1") {
		t.Fatalf("capabilities %+v, want the server's version and apps/v1", first)
	}
	now = now.Add(capabilitiesTTL - time.Second)
	if got := s.get(g); got != first || g.dc.versions != 1 {
		t.Errorf("within the TTL: read the server %d times, want once, and the same capabilities", g.dc.versions)
	}
	later := newDiscoveryGetter("apps/v1", "monitoring.example.com/v1")
	now = now.Add(2 * time.Second)
	if got := s.get(later); got == nil || !got.APIVersions.Has("monitoring.example.com/v1") || later.dc.versions != 1 {
		t.Errorf("past the TTL: %+v, want the new API read afresh", got)
	}
}

// A release of a chart that installs CRDs reads its capabilities itself, as Helm does; any
// other release gets the shared ones.
func TestCapabilitiesNotSharedWithChartsThatInstallCRDs(t *testing.T) {
	g := newDiscoveryGetter("apps/v1")
	crdGVK := schema.GroupVersionKind{Group: "test.warpdrive.transwarp.io", Version: "v1", Kind: "Operator"}
	configs := &Configs{inner: fixedGetter{g}, policies: map[schema.GroupVersionKind]KindPolicy{
		appGVK: {GVK: appGVK}, crdGVK: {GVK: crdGVK, InstallsCRDs: true}}}
	for gvk, shared := range map[schema.GroupVersionKind]bool{appGVK: true, crdGVK: false} {
		if got := configFor(t, configs, gvk, "x").Capabilities != nil; got != shared {
			t.Errorf("%s: shared capabilities set %v, want %v", gvk.Kind, got, shared)
		}
	}
}

// fixedGetter hands out configurations with one RESTClientGetter.
type fixedGetter struct{ getter action.RESTClientGetter }

func (g fixedGetter) ActionConfigFor(context.Context, client.Object) (*action.Configuration, error) {
	return &action.Configuration{RESTClientGetter: g.getter, KubeClient: kube.New(nil)}, nil
}
