// Package actiontest holds the action clients and objects the tests of a CR's pipeline
// (pipeline.go) are made with, in place of the Helm engine, so that the tests of every layer,
// wherever it is kept, share them. Only _test.go files import it.
package actiontest

import (
	"context"
	"errors"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
)

// FakeActions is the configurable innermost action client of the tests, in place of the Helm
// engine. It holds at most one release, Rel: Get returns it, or "not found" when there is
// none. Each call fails with the error Errs holds for it, by the names FakeActions.call
// gives (get, install, upgrade, dry-run upgrade, uninstall, reconcile). The calls that would
// change the release (all but Get) are recorded in Calls, failed or not. Config returns Cfg.
type FakeActions struct {
	helmclient.ActionInterface // nil: History is not faked

	Rel   *release.Release
	Errs  map[string]error
	Cfg   *action.Configuration
	Calls []string
}

// Failing is a FakeActions with no release whose every call fails with err, and Get with
// getErr ("not found" if nil).
func Failing(err, getErr error) *FakeActions {
	f := &FakeActions{Errs: map[string]error{"get": getErr}}
	for _, call := range []string{"install", "upgrade", "dry-run upgrade", "uninstall", "reconcile"} {
		f.Errs[call] = err
	}
	return f
}

// call records a call that would change the release and returns the error set for it.
func (f *FakeActions) call(name string) error {
	f.Calls = append(f.Calls, name)
	return f.Errs[name]
}

// Config returns Cfg.
func (f *FakeActions) Config() *action.Configuration { return f.Cfg }

// Get returns Rel, "not found" if nil, or the error set for "get".
func (f *FakeActions) Get(string, ...helmclient.GetOption) (*release.Release, error) {
	if err := f.Errs["get"]; err != nil {
		return nil, err
	}
	if f.Rel == nil {
		return nil, driver.ErrReleaseNotFound
	}
	return f.Rel, nil
}

// Install is recorded as "install" and returns Rel.
func (f *FakeActions) Install(string, string, *chart.Chart, map[string]any, ...helmclient.InstallOption) (*release.Release, error) {
	if err := f.call("install"); err != nil {
		return nil, err
	}
	return f.Rel, nil
}

// Upgrade is recorded as "upgrade", or "dry-run upgrade", and returns Rel.
func (f *FakeActions) Upgrade(_, _ string, _ *chart.Chart, _ map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	name := "upgrade"
	if actionclient.IsDryRun(opts) {
		name = "dry-run upgrade"
	}
	if err := f.call(name); err != nil {
		return nil, err
	}
	return f.Rel, nil
}

// Uninstall is recorded as "uninstall" and returns Rel as uninstalled.
func (f *FakeActions) Uninstall(string, ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	if err := f.call("uninstall"); err != nil {
		return nil, err
	}
	return &release.UninstallReleaseResponse{Release: f.Rel}, nil
}

// Reconcile is recorded as "reconcile".
func (f *FakeActions) Reconcile(*release.Release) error { return f.call("reconcile") }

// StoreActions is an action client over Helm's in-memory release storage. During, if set,
// runs in the middle of each Install, as the client's own calls would run while Helm works.
type StoreActions struct {
	helmclient.ActionInterface
	Cfg    *action.Configuration
	During func()
}

// NewStoreActions is a StoreActions whose storage holds revisions.
func NewStoreActions(revisions ...*release.Release) *StoreActions {
	s := storage.Init(driver.NewMemory())
	for _, r := range revisions {
		if err := s.Create(r); err != nil {
			panic(err)
		}
	}
	return &StoreActions{Cfg: &action.Configuration{Releases: s}}
}

// Config returns Cfg.
func (f *StoreActions) Config() *action.Configuration { return f.Cfg }

// Get returns the release's revision the options ask for, else its last, from the storage.
func (f *StoreActions) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	get := action.NewGet(f.Cfg)
	for _, o := range opts {
		if err := o(get); err != nil {
			return nil, err
		}
	}
	if get.Version > 0 {
		return f.Cfg.Releases.Get(name, get.Version)
	}
	return f.Cfg.Releases.Last(name)
}

// Install runs During, and installs nothing.
func (f *StoreActions) Install(string, string, *chart.Chart, map[string]any, ...helmclient.InstallOption) (*release.Release, error) {
	if f.During != nil {
		f.During()
	}
	return nil, nil
}

// Upgrade ends as an upgrade does when the apiserver is lost before Helm records
// the outcome: revision 2 left pending-upgrade, then helm-operator-plugins' rollback recorded
// as revision 3, deployed, and the upgrade's error returned.
func (f *StoreActions) Upgrade(name, _ string, _ *chart.Chart, _ map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	if actionclient.IsDryRun(opts) {
		return nil, errors.New("dry run failed")
	}
	for _, r := range []*release.Release{Revision("appservice", 2, release.StatusPendingUpgrade), Revision("appservice", 3, release.StatusDeployed)} {
		if err := f.Cfg.Releases.Create(r); err != nil {
			return nil, err
		}
	}
	return nil, errors.New("update: failed to update: rpc error: code = Unavailable")
}

// EngineOf is a getter that hands out c for every CR, as the engine would its clients.
func EngineOf(c helmclient.ActionInterface) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
		return c, nil
	})
}

// ReleaseOf is release x of team-a, of chart chartName.
func ReleaseOf(chartName string) *release.Release {
	return &release.Release{Name: "x", Namespace: "team-a", Chart: &chart.Chart{Metadata: &chart.Metadata{Name: chartName}}}
}

// Revision is revision version of release x of team-a, of chart chartName, in status.
func Revision(chartName string, version int, status release.Status) *release.Release {
	return &release.Release{
		Name: "x", Namespace: "team-a", Version: version,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: chartName}},
		Info:  &release.Info{Status: status, Description: "Upgrade complete"},
	}
}

// AppServiceCR is AppService x of team-a, whose release is x.
func AppServiceCR() client.Object {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("appcontroller.k8s.io/v1alpha1")
	cr.SetKind("AppService")
	cr.SetNamespace("team-a")
	cr.SetName("x")
	return cr
}

// Events drains the Events recorded so far.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// StorageClass is a StorageClass named name with annotations: an object of a cluster-scoped
// kind a chart declares.
func StorageClass(name string, annotations map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Provisioner: "p"}
}

// StorageClassGVK is a cluster-scoped kind a chart may declare.
var StorageClassGVK = schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}

// The kinds of the tests' CRs and of their releases' workloads.
var (
	MemcachedGVK  = schema.GroupVersionKind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"}
	DeploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
)

// Memcached is Memcached ns/m of size 3, with status if not nil.
func Memcached(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": "m", "namespace": "ns"},
		"spec":       map[string]any{"size": int64(3)},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// ReaderWith is a client that reads objs.
func ReaderWith(objs ...client.Object) client.Reader {
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(objs...).Build()
}

// MemcachedChart is a chart memcached at version, whose default size is defaultSize and
// whose template differs at each version.
func MemcachedChart(version, defaultSize string) *chart.Chart {
	return &chart.Chart{Metadata: &chart.Metadata{Name: "memcached", Version: version},
		Values:    map[string]any{"size": defaultSize},
		Templates: []*chart.File{{Name: "templates/d.yaml", Data: []byte(version)}}}
}

// PoolOwner are the annotations the helm-operator and Helm put on a cluster-scoped object of
// the WarpdrivePool team-a/x's release.
func PoolOwner() map[string]string {
	return map[string]string{
		ownership.OwnerNameAnnotation: "team-a/x", ownership.OwnerTypeAnnotation: "WarpdrivePool.tos.transwarp.io",
		ownership.HelmReleaseNameAnnotation: "x", ownership.HelmReleaseNamespaceAnnotation: "team-a",
	}
}

// MemcachedManifest is the manifest of a Memcached release: a PodDisruptionBudget and a
// Deployment, as the drift tests compare them with the live objects.
const MemcachedManifest = `---
# Source: memcached/templates/pdb.yaml
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: m, namespace: ns}
spec: {maxUnavailable: 1}
---
# Source: memcached/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {name: m, namespace: ns}
spec: {replicas: 3}
`
