package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releaseguard"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/operator/renderjournal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// statusWrites is a status client that counts its updates.
type statusWrites struct {
	client.SubResourceWriter
	updates int
}

func (s *statusWrites) Status() client.SubResourceWriter { return s }

func (s *statusWrites) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	s.updates++
	return nil
}

// testPipeline is the pipeline of AppServices (chart appservice), as Setup makes it, with a
// recorder and a status client to look at. ops leads, so that the pending repair may act.
func testPipeline() (Pipeline, *record.FakeRecorder, *statusWrites) {
	rec := record.NewFakeRecorder(20)
	status := &statusWrites{}
	c := &chart.Chart{Metadata: &chart.Metadata{Name: "appservice"}}
	gate := fixedGate{carried: rollout.NewCarried(rollout.Digest(c)), admit: true} // a rollout all at once
	return Pipeline{Chart: c, Gate: gate, Locks: releases.NewKeyedMutex(),
		Ops: leaderOperations(), Recorder: rec, Status: status, Outcomes: outcomes.New(), Metrics: metrics.NewFleet(0), Versions: releases.NewVersions()}, rec, status
}

// clientFor is the action client a reconciler of p gets for cr over engine, built as Setup
// builds it.
func clientFor(t *testing.T, p Pipeline, engine helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
	t.Helper()
	c, err := p.Build(actiontest.EngineOf(engine)).ActionClientFor(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// lastFailure is the failure outcomes last counted for the AppService x, "" if none.
func lastFailure(p Pipeline) string {
	o, ok := p.Outcomes.Get(types.NamespacedName{Namespace: "team-a", Name: "x"}, "")
	if !ok || o.Failures == 0 {
		return ""
	}
	return o.Failure.Reason
}

// tracer notes, for each call it passes on, the name of the layer it is about to reach.
type tracer struct {
	helmclient.ActionInterface
	layer string
	trace *[]string
}

func (t tracer) note(call string) { *t.trace = append(*t.trace, call+" "+t.layer) }

func (t tracer) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	t.note("get")
	return t.ActionInterface.Get(name, opts...)
}

func (t tracer) Install(name, ns string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	t.note("install")
	return t.ActionInterface.Install(name, ns, chrt, vals, opts...)
}

func (t tracer) Upgrade(name, ns string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	t.note("upgrade")
	return t.ActionInterface.Upgrade(name, ns, chrt, vals, opts...)
}

func (t tracer) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	t.note("uninstall")
	return t.ActionInterface.Uninstall(name, opts...)
}

func (t tracer) Reconcile(rel *release.Release) error {
	t.note("reconcile")
	return t.ActionInterface.Reconcile(rel)
}

// traced puts a tracer over each of layers.
func traced(layers []layer, trace *[]string) []layer {
	var out []layer
	for _, l := range layers {
		out = append(out, l, layer{"tracer", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return actionclient.Wrap(g, func(c helmclient.ActionInterface, _ client.Object) helmclient.ActionInterface {
				return tracer{ActionInterface: c, layer: l.name, trace: trace}
			})
		}})
	}
	return out
}

// The layers are stacked in the documented order, and every call the reconciler makes goes
// through all of them, from the outermost (release versions) to the one next to the engine (the
// render bounds).
func TestPipelineOrder(t *testing.T) {
	p, _, _ := testPipeline()
	var names []string
	for _, l := range p.layers() {
		names = append(names, l.name)
	}
	want := "render bounds, render journal, redaction, release guard, render loop, rollout gate, pending repair, orphan sweep, hook cleanup, drift, release events, record report, outcomes, release versions"
	if got := strings.Join(names, ", "); got != want {
		t.Fatalf("layers from the engine outwards: %s\nwant (see pipeline): %s", got, want)
	}

	var trace []string
	f := &actiontest.FakeActions{Rel: actiontest.Revision("appservice", 1, release.StatusDeployed)}
	c, err := stack(actiontest.EngineOf(f), traced(p.layers(), &trace)).ActionClientFor(context.Background(), actiontest.AppServiceCR())
	if err != nil {
		t.Fatal(err)
	}
	dryRun := func(u *action.Upgrade) error { u.DryRun = true; return nil }
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"get", func() error { _, err := c.Get("x"); return err }},
		{"upgrade", func() error { _, err := c.Upgrade("x", "team-a", p.Chart, nil, dryRun); return err }},
		{"upgrade", func() error { _, err := c.Upgrade("x", "team-a", p.Chart, nil); return err }},
		{"install", func() error { _, err := c.Install("x", "team-a", p.Chart, nil); return err }},
		{"reconcile", func() error { return c.Reconcile(f.Rel) }},
		{"uninstall", func() error { _, err := c.Uninstall("x"); return err }},
	} {
		trace = nil
		_ = call.do() // the install is refused (the release exists): it still passes every layer
		var want, got []string
		for i := len(names) - 1; i >= 0; i-- {
			want = append(want, call.name+" "+names[i])
		}
		for _, step := range trace { // without a layer's own calls below it (the guard's Get)
			if strings.HasPrefix(step, call.name+" ") {
				got = append(got, step)
			}
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s went through\n  %s\nwant\n  %s", call.name, strings.Join(got, ", "), strings.Join(want, ", "))
		}
	}
	if got := strings.Join(f.Calls, ","); got != "dry-run upgrade,upgrade,install,reconcile,uninstall" {
		t.Errorf("the engine got %q", got)
	}
}

// Another chart's release: the guard refuses it before the layers over it act on it. The
// pending repair does not repair it, the engine is asked for no change, and the layers over
// the repair see only the guard's refusal: a Warning Event and a failure in outcomes.
func TestPipelineGuardActsFirst(t *testing.T) {
	p, rec, _ := testPipeline()
	// A pending revision, which the repair would mark failed if the guard did not stop it.
	f := &actiontest.FakeActions{Rel: actiontest.Revision("warpdrivepool", 1, release.StatusPendingUpgrade),
		Cfg: &action.Configuration{Releases: storage.Init(driver.NewMemory())}}
	c := clientFor(t, p, f, actiontest.AppServiceCR())

	var foreign *releaseguard.ForeignReleaseError
	if _, err := c.Get("x"); !errors.As(err, &foreign) {
		t.Fatalf("Get: %v, want a foreign release error", err)
	}
	if got := actiontest.Events(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning ReleaseLookupFailed reading release x: Helm release \"x\"") {
		t.Errorf("events %q, want one Warning ReleaseLookupFailed with the guard's error (and no repair)", got)
	}
	if got := lastFailure(p); got != statuscontract.ReasonReleaseLookupFailed {
		t.Errorf("outcomes: failure %q, want %s", got, statuscontract.ReasonReleaseLookupFailed)
	}
	dryRun := func(u *action.Upgrade) error { u.DryRun = true; return nil }
	if _, err := c.Upgrade("x", "team-a", p.Chart, nil, dryRun); !errors.As(err, &foreign) {
		t.Errorf("dry-run Upgrade: %v, want a foreign release error", err)
	}
	if got := lastFailure(p); got != "DryRunFailed" {
		t.Errorf("outcomes: failure %q, want DryRunFailed", got)
	}
	if _, err := c.Uninstall("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Uninstall: %v, want release not found", err)
	}
	if len(f.Calls) != 0 {
		t.Errorf("the engine was asked to change another chart's release: %v", f.Calls)
	}
}

// Each layer's contract, seen through the whole chain over an engine that fails.
func TestPipelineLayersAct(t *testing.T) {
	t.Run("pending repair", func(t *testing.T) {
		p, rec, _ := testPipeline()
		pending := actiontest.Revision("appservice", 1, release.StatusPendingUpgrade)
		store := storage.Init(driver.NewMemory())
		if err := store.Create(pending); err != nil {
			t.Fatal(err)
		}
		c := clientFor(t, p, &actiontest.FakeActions{Rel: pending, Cfg: &action.Configuration{Releases: store}}, actiontest.AppServiceCR())
		rel, err := c.Get("x")
		if err != nil || rel.Info.Status != release.StatusFailed {
			t.Fatalf("Get: %v, %v; want the pending revision, repaired to failed", rel, err)
		}
		if got := actiontest.Events(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning PendingReleaseRepaired ") {
			t.Errorf("events %q, want one Warning PendingReleaseRepaired", got)
		}
		if got := lastFailure(p); got != "" {
			t.Errorf("outcomes: failure %q, want none", got)
		}
	})

	t.Run("release events and outcomes", func(t *testing.T) {
		p, rec, _ := testPipeline()
		f := actiontest.Failing(errors.New("boom"), nil)
		f.Cfg = &action.Configuration{Releases: storage.Init(driver.NewMemory())} // the repair reads the history
		c := clientFor(t, p, f, actiontest.AppServiceCR())
		if _, err := c.Install("x", "team-a", p.Chart, nil); err == nil {
			t.Fatal("Install: no error")
		}
		if got := actiontest.Events(rec); len(got) != 1 || got[0] != "Warning InstallFailed installing release x: boom" {
			t.Errorf("events %q, want one Warning InstallFailed", got)
		}
		if got := lastFailure(p); got != statuscontract.ReasonInstallFailed {
			t.Errorf("outcomes: failure %q, want %s", got, statuscontract.ReasonInstallFailed)
		}
		if err := c.Reconcile(actiontest.Revision("appservice", 1, release.StatusDeployed)); err == nil {
			t.Fatal("Reconcile: no error")
		}
		if got := actiontest.Events(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning ReconcileFailed ") {
			t.Errorf("events %q, want one Warning ReconcileFailed", got)
		}
		if got := lastFailure(p); got != statuscontract.ReasonReconcileFailed {
			t.Errorf("outcomes: failure %q, want %s", got, statuscontract.ReasonReconcileFailed)
		}
	})

	t.Run("record report", func(t *testing.T) {
		p, rec, status := testPipeline()
		d := trustedconfig.NewSignedDriver(nil)
		d.Refuse("sh.helm.release.v1.x.v2", errors.New("not signed"))
		signed := storage.Init(d)
		cr := actiontest.AppServiceCR()
		c := clientFor(t, p, &actiontest.FakeActions{Rel: actiontest.Revision("appservice", 1, release.StatusDeployed), Cfg: &action.Configuration{Releases: signed}}, cr)
		if _, err := c.Get("x"); err != nil {
			t.Fatal(err)
		}
		if got := actiontest.Events(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Warning ReleaseRecordRefused ") {
			t.Errorf("events %q, want one Warning ReleaseRecordRefused", got)
		}
		conds, _, _ := unstructured.NestedSlice(cr.(*unstructured.Unstructured).Object, "status", "conditions")
		if conditionIndex(conds, statuscontract.ReleaseRecordRefused) < 0 || status.updates != 1 {
			t.Errorf("conditions %v, %d status updates; want ReleaseRecordRefused, written once", conds, status.updates)
		}
	})

	t.Run("outcomes of getting a client", func(t *testing.T) {
		p, _, _ := testPipeline()
		broken := helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
			return nil, errors.New("no signing key")
		})
		if _, err := p.Build(broken).ActionClientFor(context.Background(), actiontest.AppServiceCR()); err == nil {
			t.Fatal("ActionClientFor: no error")
		}
		if got := lastFailure(p); got != "ErrorGettingClient" {
			t.Errorf("outcomes: failure %q, want ErrorGettingClient", got)
		}
	})
}

// The pipeline refuses a quarantined CR, dry run, install and upgrade alike, before Helm
// renders it: terminal, its failure and its Warning Event name the quarantine.
func TestRenderJournalLayerRefusesQuarantined(t *testing.T) {
	cr := actiontest.AppServiceCR()
	cr.SetUID("uid-x")
	cr.SetGeneration(3)
	// The journal the previous leader left: the CR quarantined at its generation, as two
	// deaths in a row while rendering it leave it (internal/operator/renderjournal's tests).
	key := types.NamespacedName{Namespace: "warpdrive-system", Name: renderjournal.DefaultConfigMap}
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string]string{"journal.json": fmt.Sprintf(
			`{"inFlight":[],"deaths":[{"kind":%q,"namespace":"team-a","name":"x","uid":"uid-x","generation":3,"deaths":2,"quarantined":true}]}`,
			cr.GetObjectKind().GroupVersionKind().GroupKind().String())},
	}).Build()
	journal := renderjournal.New(&renderjournal.ConfigMapStore{Reader: c, Writer: c, Key: key})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = journal.Start(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })

	p, rec, _ := testPipeline()
	p.Journal = journal
	engine := &actiontest.FakeActions{Cfg: &action.Configuration{Releases: storage.Init(driver.NewMemory())}}
	ac := clientFor(t, p, engine, cr)
	dryRun := func(u *action.Upgrade) error { u.DryRun = true; return nil }
	for _, call := range []func() error{
		func() error { _, err := ac.Upgrade("x", "team-a", p.Chart, nil, dryRun); return err },
		func() error { _, err := ac.Install("x", "team-a", p.Chart, nil); return err },
		func() error { _, err := ac.Upgrade("x", "team-a", p.Chart, nil); return err },
	} {
		err := call()
		if f, ok := refusal.Of(err); !ok || f.Reason != statuscontract.ReasonQuarantined || !f.Terminal ||
			!errors.Is(err, reconcile.TerminalError(nil)) {
			t.Errorf("%v, want a terminal Quarantined refusal", err)
		}
	}
	if len(engine.Calls) != 0 {
		t.Errorf("Helm was called: %v", engine.Calls)
	}
	e, _ := p.Outcomes.Get(client.ObjectKeyFromObject(cr), cr.GetUID())
	if e.Failure.Reason != statuscontract.ReasonQuarantined || !e.Failure.Terminal {
		t.Errorf("outcome %+v, want a terminal Quarantined", e.Failure)
	}
	if evs := actiontest.Events(rec); len(evs) == 0 || !strings.HasPrefix(evs[0], "Warning Quarantined") {
		t.Errorf("Events %q, want a Warning Quarantined", evs)
	}
}
