package operator

import (
	"context"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
)

// fakeActions is the configurable innermost action client of the tests, in place of the Helm
// engine. It holds at most one release, rel: Get returns it, or "not found" when there is
// none. Each call fails with the error errs holds for it, by the names fakeActions.call
// gives (get, install, upgrade, dry-run upgrade, uninstall, reconcile). The calls that would
// change the release (all but Get) are recorded in calls, failed or not. Config returns cfg.
type fakeActions struct {
	helmclient.ActionInterface // nil: History is not faked

	rel   *release.Release
	errs  map[string]error
	cfg   *action.Configuration
	calls []string
}

// failing is a fakeActions with no release whose every call fails with err, and Get with
// getErr ("not found" if nil).
func failing(err, getErr error) *fakeActions {
	f := &fakeActions{errs: map[string]error{"get": getErr}}
	for _, call := range []string{"install", "upgrade", "dry-run upgrade", "uninstall", "reconcile"} {
		f.errs[call] = err
	}
	return f
}

// call records a call that would change the release and returns the error set for it.
func (f *fakeActions) call(name string) error {
	f.calls = append(f.calls, name)
	return f.errs[name]
}

func (f *fakeActions) Config() *action.Configuration { return f.cfg }

func (f *fakeActions) Get(string, ...helmclient.GetOption) (*release.Release, error) {
	if err := f.errs["get"]; err != nil {
		return nil, err
	}
	if f.rel == nil {
		return nil, driver.ErrReleaseNotFound
	}
	return f.rel, nil
}

func (f *fakeActions) Install(string, string, *chart.Chart, map[string]any, ...helmclient.InstallOption) (*release.Release, error) {
	if err := f.call("install"); err != nil {
		return nil, err
	}
	return f.rel, nil
}

func (f *fakeActions) Upgrade(_, _ string, _ *chart.Chart, _ map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	name := "upgrade"
	if actionclient.IsDryRun(opts) {
		name = "dry-run upgrade"
	}
	if err := f.call(name); err != nil {
		return nil, err
	}
	return f.rel, nil
}

func (f *fakeActions) Uninstall(string, ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	if err := f.call("uninstall"); err != nil {
		return nil, err
	}
	return &release.UninstallReleaseResponse{Release: f.rel}, nil
}

func (f *fakeActions) Reconcile(*release.Release) error { return f.call("reconcile") }

// engineOf is a getter that hands out c for every CR, as the engine would its clients.
func engineOf(c helmclient.ActionInterface) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
		return c, nil
	})
}

func releaseOf(chartName string) *release.Release {
	return &release.Release{Name: "x", Namespace: "team-a", Chart: &chart.Chart{Metadata: &chart.Metadata{Name: chartName}}}
}

func revision(chartName string, version int, status release.Status) *release.Release {
	return &release.Release{
		Name: "x", Namespace: "team-a", Version: version,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: chartName}},
		Info:  &release.Info{Status: status, Description: "Upgrade complete"},
	}
}

func appServiceCR() client.Object {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("appcontroller.k8s.io/v1alpha1")
	cr.SetKind("AppService")
	cr.SetNamespace("team-a")
	cr.SetName("x")
	return cr
}

// events drains the Events recorded so far.
func events(rec *record.FakeRecorder) []string {
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

var storageClassGVK = schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}
