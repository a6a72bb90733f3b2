package pipeline

import (
	"errors"
	"io"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// deletingKube records what the hook cleanup deletes; Build reads each manifest's name.
type deletingKube struct {
	kube.Interface // nil: nothing else is called
	deleted        []string
	fail           error
}

func (k *deletingKube) Build(r io.Reader, _ bool) (kube.ResourceList, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return nil, err
	}
	return kube.ResourceList{&resource.Info{Name: u.GetKind() + "/" + u.GetName()}}, nil
}

func (k *deletingKube) Delete(objs kube.ResourceList) (*kube.Result, []error) {
	if k.fail != nil {
		return nil, []error{k.fail}
	}
	for _, o := range objs {
		k.deleted = append(k.deleted, o.Name)
	}
	return &kube.Result{Deleted: objs}, nil
}

// Once a release is uninstalled, the objects of its hooks are deleted, but for helm test's; a
// failure is an Event, not an error (the release is gone).
func TestHookCleanupAfterUninstall(t *testing.T) {
	hook := func(name string, events ...release.HookEvent) *release.Hook {
		return &release.Hook{Name: name, Kind: "Job", Events: events,
			Manifest: "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: " + name + "\n"}
	}
	k := &deletingKube{}
	engine := &actiontest.FakeActions{Cfg: &action.Configuration{KubeClient: k}, Rel: &release.Release{Name: "app",
		Hooks: []*release.Hook{hook("migrate", release.HookPreInstall), hook("smoke", release.HookTest),
			hook("notify", release.HookPostUpgrade, release.HookPostInstall)}}}
	rec := record.NewFakeRecorder(10)
	cr := &unstructured.Unstructured{}
	cr.SetNamespace("ns")
	cr.SetName("app")
	c := hookCleanupClient{ActionInterface: engine, cr: cr, recorder: rec}
	if _, err := c.Uninstall("app"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.deleted, " "); got != "Job/migrate Job/notify" {
		t.Errorf("deleted %q, want the Jobs of the install and upgrade hooks, not helm test's", got)
	}

	// A failed uninstall leaves the hooks; a failed cleanup says so.
	k.deleted = nil
	engine.Errs = map[string]error{"uninstall": errors.New("boom")}
	if _, err := c.Uninstall("app"); err == nil || len(k.deleted) > 0 {
		t.Errorf("a failed uninstall: %v, hooks deleted %v", err, k.deleted)
	}
	engine.Errs, k.fail = nil, errors.New("forbidden")
	if _, err := c.Uninstall("app"); err != nil {
		t.Errorf("a failed cleanup is the uninstall's error: %v", err)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, hookCleanupFailed) || !strings.Contains(e, "forbidden") {
			t.Errorf("Event %q", e)
		}
	default:
		t.Error("no Event for a failed cleanup")
	}
}
