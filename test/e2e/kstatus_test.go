package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The annotations of docs/status.md ("Pause and force").
const (
	pauseAnnotation   = "warpdrive.transwarp.io/pause-reconcile"
	requestAnnotation = "warpdrive.transwarp.io/reconcile-requested-at"
)

// settleTimeout bounds the wait for a CR to read Current after a step.
const settleTimeout = 2 * time.Minute

// TestStatusContract holds the status of docs/status.md to what kstatus (Flux, kpt) and
// `kubectl wait` conclude from it. A watch records every version of one AppService and of its
// Deployment through eight steps: install, an upgrade that rolls the pods, a scale, a rollout
// held in progress, an edit while the manager is down, a render failure and its fix, a pause
// with an edit, and a forced reconcile. The resourceVersions (etcd revisions on the local
// cluster) order the two streams, so that every version of the CR is paired with the
// Deployment as it was at that moment. Then, for every version:
//
//   - kstatus never says Current while the Deployment does not yet render the CR's spec, or
//     is still rolling out;
//   - during the render failure, once kstatus says Failed it says so until the fix;
//   - Ready never goes True, not True, True again within one generation while the
//     Deployment stayed rolled out (a flap);
//   - each step ends Current, and `kubectl wait --for=condition=Ready` returns only once the
//     Deployment has rolled the new spec out.
//
// Every version is written to .cluster/kstatus-ours.tsv. With WARPDRIVE_E2E_OPERATOR=stock
// the same steps run against the stock helm-operator (those it can follow), nothing is
// asserted, and the table goes to .cluster/kstatus-stock.tsv. With WARPDRIVE_RECORD_FIXTURES=1
// one version of each situation is written to test/argocd/testdata for the Argo CD health
// check's test.
func TestStatusContract(t *testing.T) {
	stock := os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock"
	ns := env.Namespace(t)
	appService := kinds[1]
	if appService.kind != "AppService" {
		t.Fatal("kinds[1] must be AppService")
	}
	chart := loadChartValues(t, "appservice")
	cr := appService.newCR(t, ns, "contract", map[string]any{"replicas": int64(2)})
	deployName, _, _ := unstructured.NestedString(cr.Object, "spec", "deploymentName")

	// If the test stops half-way with the manager down, the namespace's cleanup (which needs
	// the manager to uninstall the release) and the rest of the suite get it back.
	t.Cleanup(func() {
		if manager.Exited() {
			restartManager(t)
		}
	})

	crLog := env.Record(t, env.GVR(cr.GetKind()), cr.GetName(), ns)
	deployLog := env.Record(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, deployName, ns)

	c := &contractRun{t: t, stock: stock, cr: cr, deployName: deployName, chart: chart}
	mode := map[bool]string{true: "stock", false: "ours"}[stock]
	table := filepath.Join(filepath.Dir(env.Kubeconfig), "kstatus-"+mode+".tsv")
	// A test that stops half-way still leaves the table of what it recorded (this runs before
	// the recorders stop).
	analyzed := false
	t.Cleanup(func() {
		if analyzed {
			return
		}
		a := analyze(t, c, crLog.All(), deployLog.All())
		if err := os.WriteFile(table, []byte(a.tsv()), 0o644); err == nil {
			t.Logf("stopped half-way; the versions recorded so far are in %s", table)
		}
		for _, v := range a.violations {
			t.Log("so far: " + v)
		}
	})

	// (1) Install, and `kubectl wait` for it right after the apply.
	c.step("create")
	c.apply(cr)
	c.kubectlWaitReady("create")
	c.settle()

	// (2) An upgrade that changes the pod template: a real rollout.
	c.step("upgrade")
	edited := cr.DeepCopy()
	_ = unstructured.SetNestedField(edited.Object, "nginxinc/nginx-unprivileged:1.27.1-alpine", "spec", "image")
	c.apply(edited)
	c.kubectlWaitReady("upgrade")
	c.settle()

	// (3) A scale.
	c.step("scale")
	c.patch(map[string]any{"spec": map[string]any{"replicas": int64(3)}})
	c.settle()

	// (4) A rollout held in progress: the new pods request an extended resource that no node
	// has yet, so they stay Pending (kwok makes only scheduled pods Ready) until the nodes
	// advertise it.
	c.step("rollout-held")
	hold := corev1.ResourceName("e2e.warpdrive.transwarp.io/hold-" + ns[len(ns)-5:])
	t.Cleanup(func() { advertise(t, hold, false) })
	c.patch(map[string]any{"spec": map[string]any{"resources": map[string]any{
		"requests": map[string]any{string(hold): "1"},
		"limits":   map[string]any{string(hold): "1"},
	}}})
	c.checkHeldRollout()
	advertise(t, hold, true)
	c.settle()

	// (5) An edit while the manager is down: nothing may say it is done.
	c.step("manager-down")
	t.Log("stopping the manager")
	manager.Stop()
	c.patch(map[string]any{"spec": map[string]any{"image": "nginxinc/nginx-unprivileged:1.27.2-alpine"}})
	c.checkManagerDown()
	restartManager(t)
	c.settle()

	// (6) A spec the schema admits but the release refuses: a cpu limit below the chart's cpu
	// request, which the apiserver refuses in the Deployment. Then the fix.
	c.step("render-failure")
	c.patch(map[string]any{"spec": map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "10m"}}}})
	c.waitStalled()
	c.step("render-fixed")
	c.patch(map[string]any{"spec": map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "500m"}}}})
	c.settle()

	// (7) Pause, an edit that must wait, resume.
	if stock {
		t.Log("stock helm-operator: no pause annotation, skipping the pause")
	} else {
		c.step("paused")
		c.patch(map[string]any{"metadata": map[string]any{"annotations": map[string]any{pauseAnnotation: "true"}}})
		c.checkPaused()
		c.step("resumed")
		c.patch(map[string]any{"metadata": map[string]any{"annotations": map[string]any{pauseAnnotation: nil}}})
		c.settle()
	}

	// (8) A forced reconcile.
	if stock {
		t.Log("stock helm-operator: no reconcile-requested-at annotation, skipping the forced reconcile")
	} else {
		c.step("forced")
		requested := time.Now().UTC().Format(time.RFC3339Nano)
		c.patch(map[string]any{"metadata": map[string]any{"annotations": map[string]any{requestAnnotation: requested}}})
		framework.Eventually(t, settleTimeout, func(ctx context.Context) error {
			got, err := getCR(ctx, cr)
			if err != nil {
				return err
			}
			if handled, _, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); handled != requested {
				return fmt.Errorf("status.lastHandledReconcileAt %q, want %q: %s", handled, requested, condensed(got))
			}
			return nil
		})
		c.settle()
	}

	// The recorders have seen everything up to now: then stop them.
	last := mustGetCR(t, cr)
	d := &appsv1.Deployment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: deployName}, d); err != nil {
		t.Fatal(err)
	}
	crVersions := crLog.StopAt(t, mustParseRV(t, last.GetResourceVersion()), converge)
	deployVersions := deployLog.StopAt(t, mustParseRV(t, d.ResourceVersion), converge)

	a := analyze(t, c, crVersions, deployVersions)
	analyzed = true
	if err := os.WriteFile(table, []byte(a.tsv()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d versions of the CR and %d of the Deployment recorded; table in %s", len(a.rows), len(deployVersions), table)
	t.Log(a.summary())

	if stock {
		// The stock helm-operator writes neither observedGeneration nor Ready: its numbers
		// are for the README, not a contract.
		return
	}
	if os.Getenv("WARPDRIVE_RECORD_FIXTURES") == "1" {
		a.writeFixtures(t, filepath.Join(env.Root, "test", "argocd", "testdata"))
	}
	for _, v := range a.violations {
		t.Error(v)
	}
}

// contractRun is the state of TestStatusContract's steps.
type contractRun struct {
	t          *testing.T
	stock      bool
	cr         *unstructured.Unstructured
	deployName string
	chart      map[string]any

	// steps in order; each begins after the version its start was read at.
	steps []stepMark
	// kubectlWaits are the generations `kubectl wait` waited for.
	kubectlWaits []kubectlWaitMark
	// stalledGeneration is the generation of the render failure, 0 before it.
	stalledGeneration int64
}

type stepMark struct {
	name string
	// after: the step's versions have a larger resourceVersion.
	after int64
}

type kubectlWaitMark struct {
	step       string
	generation int64
}

// step begins a step: the versions after the CR's current one are its.
func (c *contractRun) step(name string) {
	c.t.Helper()
	var after int64
	if got, err := getCR(context.Background(), c.cr); err == nil {
		after = mustParseRV(c.t, got.GetResourceVersion())
	}
	c.steps = append(c.steps, stepMark{name: name, after: after})
	c.t.Logf("step %q", name)
}

// apply applies obj as a user would, with kubectl (server-side).
func (c *contractRun) apply(obj *unstructured.Unstructured) {
	c.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
		"metadata": map[string]any{"name": obj.GetName(), "namespace": obj.GetNamespace()},
		"spec":     obj.Object["spec"],
	}}
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		c.t.Fatal(err)
	}
	file := filepath.Join(c.t.TempDir(), "cr.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if _, err := env.Kubectl("apply", "--server-side", "--field-manager=e2e-user", "-f", file); err != nil {
		c.t.Fatal(err)
	}
}

// patch merge-patches the CR (spec values or metadata), as kubectl edit or annotate would.
func (c *contractRun) patch(p map[string]any) {
	c.t.Helper()
	data, _ := (&unstructured.Unstructured{Object: p}).MarshalJSON()
	if err := env.Client.Patch(context.Background(), c.cr.DeepCopy(), client.RawPatch(types.MergePatchType, data)); err != nil {
		c.t.Fatalf("patching %s %s with %s: %v", c.cr.GetKind(), c.cr.GetName(), data, err)
	}
}

func (c *contractRun) deployment(ctx context.Context) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.cr.GetNamespace(), Name: c.deployName}, d)
	return d, err
}

// settle waits until the live CR reads Current. The stock helm-operator's CRs read Current
// from the start: for it, settle waits until the Deployment renders the spec and has rolled
// it out.
func (c *contractRun) settle() *unstructured.Unstructured {
	c.t.Helper()
	var got *unstructured.Unstructured
	framework.Eventually(c.t, settleTimeout, func(ctx context.Context) error {
		var err error
		if got, err = getCR(ctx, c.cr); err != nil {
			return err
		}
		if c.stock {
			d, err := c.deployment(ctx)
			if err != nil {
				return err
			}
			if problem := c.deploymentProblem(got, d); problem != "" {
				return fmt.Errorf("the Deployment %s", problem)
			}
			return nil
		}
		if s, msg := kstatusOf(got); s != kstatus.CurrentStatus {
			return fmt.Errorf("kstatus %s (%s), want Current: %s", s, msg, condensed(got))
		}
		return nil
	})
	c.t.Logf("settled at resourceVersion %s: %s", got.GetResourceVersion(), condensed(got))
	return got
}

// deploymentProblem says how d differs from what cr's spec renders, or is not rolled out;
// "" when it is both.
func (c *contractRun) deploymentProblem(cr *unstructured.Unstructured, d *appsv1.Deployment) string {
	if d == nil {
		return "does not exist"
	}
	if diff := renders(c.chart, cr, d); diff != "" {
		return "does not render generation " + strconv.FormatInt(cr.GetGeneration(), 10) + ": " + diff
	}
	if !rolledOut(d) {
		return "is rolling out: " + rollout(d)
	}
	return ""
}

// kubectlWaitReady runs `kubectl wait --for=condition=Ready` right after an apply; when it
// succeeds, the Deployment must already have rolled out the applied spec.
func (c *contractRun) kubectlWaitReady(step string) {
	c.t.Helper()
	applied := mustGetCR(c.t, c.cr)
	c.kubectlWaits = append(c.kubectlWaits, kubectlWaitMark{step: step, generation: applied.GetGeneration()})
	timeout := "120s"
	if c.stock {
		timeout = "10s" // the stock helm-operator writes no Ready condition
	}
	_, err := env.Kubectl("wait", "--for=condition=Ready", "--timeout="+timeout, "-n", c.cr.GetNamespace(),
		env.GVR(c.cr.GetKind()).Resource+"/"+c.cr.GetName())
	d, derr := c.deployment(context.Background())
	if derr != nil {
		d = nil
	}
	problem := c.deploymentProblem(applied, d)
	switch {
	case c.stock:
		c.t.Logf("%s: kubectl wait --for=condition=Ready: %v; the Deployment then: %s", step, err, orOK(problem))
	case err != nil:
		c.t.Errorf("%s: kubectl wait --for=condition=Ready of generation %d: %v", step, applied.GetGeneration(), err)
	case problem != "":
		c.t.Errorf("%s: kubectl wait --for=condition=Ready returned for generation %d, yet the Deployment %s",
			step, applied.GetGeneration(), problem)
	}
}

// checkHeldRollout waits until the new pods are created and held Pending, and the CR says
// so; then it must not read Current.
func (c *contractRun) checkHeldRollout() {
	c.t.Helper()
	framework.Eventually(c.t, converge, func(ctx context.Context) error {
		got, err := getCR(ctx, c.cr)
		if err != nil {
			return err
		}
		d, err := c.deployment(ctx)
		if err != nil {
			return err
		}
		if diff := renders(c.chart, got, d); diff != "" {
			return fmt.Errorf("the Deployment does not render generation %d yet: %s", got.GetGeneration(), diff)
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas == 0 {
			return fmt.Errorf("no new pods yet: %s", rollout(d))
		}
		if c.stock {
			return nil
		}
		// docs/status.md: "release deployed, workloads rolling out": Ready False RollingOut.
		if status, reason, _ := framework.Condition(got, "Ready"); status != "False" || reason != "RollingOut" {
			return fmt.Errorf("Ready=%s (%s), want False RollingOut: %s", status, reason, condensed(got))
		}
		return nil
	})
	got := mustGetCR(c.t, c.cr)
	d, err := c.deployment(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	s, msg := kstatusOf(got)
	c.t.Logf("rollout held (Deployment %s): kstatus %s (%s), %s", rollout(d), s, msg, condensed(got))
	if rolledOut(d) {
		c.t.Fatalf("the Deployment rolled out although its new pods cannot be scheduled: %s", rollout(d))
	}
	if !c.stock && s != kstatus.InProgressStatus {
		c.t.Errorf("rollout held: kstatus %s (%s), want InProgress: %s", s, msg, condensed(got))
	}
}

// checkManagerDown watches an edit the manager cannot handle for a while: neither kstatus nor
// `kubectl wait` may take it as done.
func (c *contractRun) checkManagerDown() {
	c.t.Helper()
	window := 5 * time.Second
	c.t.Logf("the manager is down; recording for %s", window)
	time.Sleep(window)
	got := mustGetCR(c.t, c.cr)
	s, msg := kstatusOf(got)
	c.t.Logf("manager down: kstatus %s (%s), %s", s, msg, condensed(got))
	_, err := env.Kubectl("wait", "--for=condition=Ready", "--timeout=2s", "-n", c.cr.GetNamespace(),
		env.GVR(c.cr.GetKind()).Resource+"/"+c.cr.GetName())
	if c.stock {
		c.t.Logf("manager down: kubectl wait --for=condition=Ready: %v", err)
		return
	}
	if s == kstatus.CurrentStatus {
		c.t.Errorf("manager down, generation %d not deployed: kstatus Current: %s", got.GetGeneration(), condensed(got))
	}
	if err == nil {
		c.t.Errorf("manager down, generation %d not deployed: kubectl wait --for=condition=Ready succeeded: %s", got.GetGeneration(), condensed(got))
	}
}

// waitStalled waits until kstatus says Failed (Stalled=True). The stock helm-operator has no
// Stalled: for it, the wait is for its own ReleaseFailed or Irreconcilable, and only bounds
// the recording.
func (c *contractRun) waitStalled() {
	c.t.Helper()
	c.stalledGeneration = mustGetCR(c.t, c.cr).GetGeneration()
	err := framework.Poll(context.Background(), converge, func(ctx context.Context) error {
		got, err := getCR(ctx, c.cr)
		if err != nil {
			return err
		}
		if c.stock {
			for _, typ := range []string{"ReleaseFailed", "Irreconcilable"} {
				if status, _, _ := framework.Condition(got, typ); status == "True" {
					return nil
				}
			}
			return fmt.Errorf("neither ReleaseFailed nor Irreconcilable: %s", condensed(got))
		}
		if s, msg := kstatusOf(got); s != kstatus.FailedStatus {
			return fmt.Errorf("kstatus %s (%s), want Failed: %s", s, msg, condensed(got))
		}
		return nil
	})
	switch {
	case err == nil:
		c.t.Logf("render failure reported: %s", condensed(mustGetCR(c.t, c.cr)))
	case c.stock:
		c.t.Logf("stock helm-operator: %v", err)
		return
	default:
		c.t.Fatal(err)
	}
	if c.stock {
		return
	}
	// docs/status.md: attempts go on after Stalled, with back-off. Wait for one, so that the
	// record shows what a retry while stalled does to the status.
	failures, _, _ := unstructured.NestedInt64(mustGetCR(c.t, c.cr).Object, "status", "failures")
	framework.Eventually(c.t, converge, func(ctx context.Context) error {
		got, err := getCR(ctx, c.cr)
		if err != nil {
			return err
		}
		if n, _, _ := unstructured.NestedInt64(got.Object, "status", "failures"); n <= failures {
			return fmt.Errorf("status.failures still %d, want a retry: %s", n, condensed(got))
		}
		return nil
	})
	c.t.Logf("retried while stalled: %s", condensed(mustGetCR(c.t, c.cr)))
}

// checkPaused: with the pause annotation set, an edit waits and Paused=True says so.
func (c *contractRun) checkPaused() {
	c.t.Helper()
	waitCondition(c.t, c.cr, "Paused", "True")
	before, err := c.deployment(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	c.patch(map[string]any{"spec": map[string]any{"replicas": int64(2)}})
	edited := mustGetCR(c.t, c.cr).GetGeneration()
	// The manager has seen the edit when its Ready speaks of it: docs/status.md, "paused by
	// annotation": False Paused "reconciling is paused; generation N waits".
	var got *unstructured.Unstructured
	framework.Eventually(c.t, converge, func(ctx context.Context) error {
		if got, err = getCR(ctx, c.cr); err != nil {
			return err
		}
		if status, reason, _ := framework.Condition(got, "Ready"); status != "False" || reason != "Paused" {
			return fmt.Errorf("Ready=%s (%s), want False Paused for the edit: %s", status, reason, condensed(got))
		}
		return nil
	})
	if status, _, _ := framework.Condition(got, "Paused"); status != "True" {
		c.t.Errorf("paused with generation %d waiting: Paused=%q, want True: %s", edited, status, condensed(got))
	}
	if s, msg := kstatusOf(got); s == kstatus.CurrentStatus {
		c.t.Errorf("paused with generation %d waiting: kstatus Current (%s): %s", edited, msg, condensed(got))
	}
	after, err := c.deployment(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	if after.Generation != before.Generation || ptrValue(after.Spec.Replicas) != ptrValue(before.Spec.Replicas) {
		c.t.Errorf("paused: the Deployment changed (generation %d -> %d, replicas %d -> %d)",
			before.Generation, after.Generation, ptrValue(before.Spec.Replicas), ptrValue(after.Spec.Replicas))
	}
}

// restartManager starts the manager again, as the suite started it.
func restartManager(t testing.TB) {
	t.Helper()
	p, err := startManager()
	if err != nil {
		t.Fatalf("restarting the manager: %v", err)
	}
	manager = p
	t.Log("manager restarted")
}

// advertise makes every kwok node offer (or no longer offer) 100 of the extended resource res,
// as a device plugin would: pods that request it can then be scheduled.
func advertise(t testing.TB, res corev1.ResourceName, on bool) {
	t.Helper()
	var value any // nil: remove
	if on {
		value = "100"
	}
	patch := map[string]any{"status": map[string]any{
		"capacity":    map[string]any{string(res): value},
		"allocatable": map[string]any{string(res): value},
	}}
	data, _ := (&unstructured.Unstructured{Object: patch}).MarshalJSON()
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes, client.MatchingLabels{"type": "kwok"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if _, err := env.Clientset.CoreV1().Nodes().Patch(context.Background(), n.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("node %s: advertising %s=%v: %v", n.Name, res, value, err)
		}
	}
	if on {
		t.Logf("the nodes advertise %s", res)
	}
}

// ---- Recording ----

func mustParseRV(t testing.TB, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not an integer: %v", rv, err)
	}
	return n
}

// ---- What a version says ----

func kstatusOf(u *unstructured.Unstructured) (kstatus.Status, string) {
	res, err := kstatus.Compute(u)
	if err != nil {
		return "Error", err.Error()
	}
	return res.Status, res.Message
}

// condition is one condition of a CR's status.
type condition struct {
	present            bool
	status, reason     string
	observedGeneration int64
	hasObserved        bool
}

func conditionOf(u *unstructured.Unstructured, typ string) condition {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		out := condition{present: true}
		out.status, _ = m["status"].(string)
		out.reason, _ = m["reason"].(string)
		out.observedGeneration, out.hasObserved, _ = unstructured.NestedInt64(m, "observedGeneration")
		return out
	}
	return condition{}
}

func (c condition) String() string {
	if !c.present {
		return "-"
	}
	s := c.status + "/" + c.reason
	if c.hasObserved {
		s += "@" + strconv.FormatInt(c.observedGeneration, 10)
	}
	return s
}

func observedGeneration(u *unstructured.Unstructured) string {
	if g, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); found {
		return strconv.FormatInt(g, 10)
	}
	return "-"
}

// condensed is a one-line account of a CR's status.
func condensed(u *unstructured.Unstructured) string {
	failures := "-"
	if n, found, _ := unstructured.NestedInt64(u.Object, "status", "failures"); found {
		failures = strconv.FormatInt(n, 10)
	}
	return fmt.Sprintf("rv=%s gen=%d obs=%s failures=%s Ready=%s Reconciling=%s Stalled=%s RolledOut=%s Paused=%s",
		u.GetResourceVersion(), u.GetGeneration(), observedGeneration(u), failures, conditionOf(u, "Ready"),
		conditionOf(u, "Reconciling"), conditionOf(u, "Stalled"), conditionOf(u, "RolledOut"), conditionOf(u, "Paused"))
}

// kubectlWaitMet is what `kubectl wait --for=condition=Ready` (k8s.io/kubectl's
// ConditionalWait) concludes from one version: Ready=True, unless the condition's
// observedGeneration, or else status.observedGeneration, is below the generation.
func kubectlWaitMet(u *unstructured.Unstructured) bool {
	c := conditionOf(u, "Ready")
	if !c.present || !strings.EqualFold(c.status, "True") {
		return false
	}
	observed, found := c.observedGeneration, c.hasObserved
	if !found {
		observed, found, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	}
	return !found || observed >= u.GetGeneration()
}

// rolledOut: the Deployment controller has seen the Deployment's spec, and every replica is
// updated and available, with no old one left.
func rolledOut(d *appsv1.Deployment) bool {
	want := ptrValue(d.Spec.Replicas)
	return d.Generation == d.Status.ObservedGeneration && d.Status.UpdatedReplicas == want &&
		d.Status.AvailableReplicas == want && d.Status.Replicas == want
}

func rollout(d *appsv1.Deployment) string {
	return fmt.Sprintf("generation %d observed %d, replicas %d: %d updated, %d available, %d in all",
		d.Generation, d.Status.ObservedGeneration, ptrValue(d.Spec.Replicas), d.Status.UpdatedReplicas,
		d.Status.AvailableReplicas, d.Status.Replicas)
}

// loadChartValues reads the default values of a chart in helm-charts/.
func loadChartValues(t testing.TB, chart string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.Root, "helm-charts", chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	return values
}

// renders says how Deployment d differs from what the AppService chart renders from cr's
// spec (its replicas, image and resources: what the steps change), "" when it does not.
// The values are the spec over the chart's defaults, merged as Helm merges them.
func renders(chartValues map[string]any, cr *unstructured.Unstructured, d *appsv1.Deployment) string {
	spec, _, _ := unstructured.NestedMap(cr.Object, "spec")
	values := coalesce(runtime.DeepCopyJSON(chartValues), spec)
	var diffs []string
	if want, _, _ := unstructured.NestedInt64(values, "replicas"); int64(ptrValue(d.Spec.Replicas)) != want {
		diffs = append(diffs, fmt.Sprintf("replicas %d, want %d", ptrValue(d.Spec.Replicas), want))
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		return strings.Join(append(diffs, fmt.Sprintf("%d containers, want 1", len(d.Spec.Template.Spec.Containers))), "; ")
	}
	container := d.Spec.Template.Spec.Containers[0]
	if want, _, _ := unstructured.NestedString(values, "image"); container.Image != want {
		diffs = append(diffs, fmt.Sprintf("image %q, want %q", container.Image, want))
	}
	for _, part := range []struct {
		name string
		got  corev1.ResourceList
	}{{"requests", container.Resources.Requests}, {"limits", container.Resources.Limits}} {
		want, _, _ := unstructured.NestedMap(values, "resources", part.name)
		if diff := resourcesDiff(part.got, want); diff != "" {
			diffs = append(diffs, part.name+" "+diff)
		}
	}
	return strings.Join(diffs, "; ")
}

// coalesce merges over onto base as Helm merges a release's values onto a chart's: maps
// key by key, anything else replaced.
func coalesce(base, over map[string]any) map[string]any {
	for k, v := range over {
		if vm, ok := v.(map[string]any); ok {
			if bm, ok := base[k].(map[string]any); ok {
				base[k] = coalesce(bm, vm)
				continue
			}
		}
		base[k] = v
	}
	return base
}

func resourcesDiff(got corev1.ResourceList, want map[string]any) string {
	var diffs []string
	for name, v := range want {
		q, err := resource.ParseQuantity(fmt.Sprint(v))
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		if g, ok := got[corev1.ResourceName(name)]; !ok || g.Cmp(q) != 0 {
			diffs = append(diffs, fmt.Sprintf("%s=%s, want %s", name, g.String(), q.String()))
		}
	}
	for name, g := range got {
		if _, ok := want[string(name)]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s=%s, want none", name, g.String()))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, ", ")
}

// ---- Analysis ----

// row is one version of the CR with the Deployment as it was at that moment.
type row struct {
	step     string
	rv       int64
	cr       *unstructured.Unstructured
	kstatus  kstatus.Status
	kmessage string
	// kstatusStockCRD, against the stock helm-operator only: kstatus without
	// status.observedGeneration, which only our CRD's default puts there (the stock
	// helm-operator never writes it): what kstatus reads with the stock operator's own CRD.
	kstatusStockCRD kstatus.Status
	deployRV        int64
	deploy          *appsv1.Deployment // nil: none yet
	// renders: the Deployment renders this version's spec; rolledOut: it has rolled out.
	renders   bool
	diff      string
	rolledOut bool
	violation string
}

type analysis struct {
	stock   bool
	rows    []*row
	deploys []framework.Version
	// violations of the contract, in the order of the versions they are about.
	violations []string
	flagged    []int64 // the resourceVersion of each violation (0: none)
}

func analyze(t testing.TB, c *contractRun, crVersions, deployVersions []framework.Version) *analysis {
	t.Helper()
	a := &analysis{stock: c.stock, deploys: deployVersions}
	di := -1 // the last Deployment version at or before the current CR version
	var deploy *appsv1.Deployment
	for _, v := range crVersions {
		if v.Obj == nil {
			continue // deleted: the test is over
		}
		for di+1 < len(deployVersions) && deployVersions[di+1].RV <= v.RV {
			di++
			deploy = toDeployment(t, deployVersions[di].Obj)
		}
		r := &row{step: stepAt(c.steps, v.RV), rv: v.RV, cr: v.Obj, deploy: deploy}
		r.kstatus, r.kmessage = kstatusOf(v.Obj)
		if c.stock {
			undefaulted := v.Obj.DeepCopy()
			unstructured.RemoveNestedField(undefaulted.Object, "status", "observedGeneration")
			r.kstatusStockCRD, _ = kstatusOf(undefaulted)
		}
		if di >= 0 {
			r.deployRV = deployVersions[di].RV
		}
		if deploy != nil {
			r.diff = renders(c.chart, v.Obj, deploy)
			r.renders = r.diff == ""
			r.rolledOut = rolledOut(deploy)
		} else {
			r.diff = "no Deployment"
		}
		a.rows = append(a.rows, r)
	}

	// kstatus says Current only of a generation the Deployment renders and has rolled out.
	for _, r := range a.rows {
		if r.kstatus != kstatus.CurrentStatus {
			continue
		}
		switch {
		case !r.renders:
			a.flag(r, "kstatus Current, but the Deployment (rv %d) does not render generation %d: %s", r.deployRV, r.cr.GetGeneration(), r.diff)
		case !r.rolledOut:
			a.flag(r, "kstatus Current while the Deployment (rv %d) is rolling out: %s", r.deployRV, rollout(r.deploy))
		}
	}

	// The render failure: once Failed, Failed until the fix.
	if c.stalledGeneration != 0 {
		failed := false
		for _, r := range a.rows {
			if r.cr.GetGeneration() != c.stalledGeneration {
				continue
			}
			if r.kstatus == kstatus.FailedStatus {
				failed = true
			} else if failed {
				a.flag(r, "kstatus %s (%s) after Failed, before the fix of generation %d", r.kstatus, r.kmessage, c.stalledGeneration)
			}
		}
		if !failed {
			a.note(0, "no recorded version of generation %d (the render failure) reads Failed", c.stalledGeneration)
		}
	}

	// Ready does not flap: True, not True, True within one generation while the Deployment
	// stayed rolled out.
	var wasTrue, dropped *row
	for _, r := range a.rows {
		if wasTrue != nil && r.cr.GetGeneration() != wasTrue.cr.GetGeneration() {
			wasTrue, dropped = nil, nil
		}
		ready := conditionOf(r.cr, "Ready")
		isTrue := ready.present && ready.status == "True"
		switch {
		case isTrue && dropped != nil:
			if a.stayedRolledOut(wasTrue.rv, r.rv) {
				a.flag(r, "Ready flapped within generation %d: True at rv %d, %s at rv %d, True again, while the Deployment stayed rolled out",
					r.cr.GetGeneration(), wasTrue.rv, conditionOf(dropped.cr, "Ready"), dropped.rv)
			}
			wasTrue, dropped = r, nil
		case isTrue:
			wasTrue = r
		case wasTrue != nil && dropped == nil:
			dropped = r
		}
	}

	// Each step ends Current: the last version before the next step began, and the last.
	for i, s := range c.steps {
		if s.name == "render-failure" || s.name == "paused" {
			continue // these end Failed and paused, checked above
		}
		var end *row
		for _, r := range a.rows {
			if (i+1 == len(c.steps) || r.rv <= c.steps[i+1].after) && r.rv > s.after {
				end = r
			}
		}
		if end == nil {
			a.note(0, "step %q: no version recorded", s.name)
		} else if end.kstatus != kstatus.CurrentStatus {
			a.flag(end, "step %q ends with kstatus %s (%s)", s.name, end.kstatus, end.kmessage)
		}
	}

	// `kubectl wait` after an apply: the first version that satisfies it has the Deployment
	// rolled out at the applied spec.
	for _, w := range c.kubectlWaits {
		for _, r := range a.rows {
			if r.cr.GetGeneration() != w.generation || !kubectlWaitMet(r.cr) {
				continue
			}
			if !r.renders || !r.rolledOut {
				a.flag(r, "%s: kubectl wait --for=condition=Ready is satisfied by generation %d, yet the Deployment (rv %d) %s",
					w.step, w.generation, r.deployRV, orOK(c.deploymentProblem(r.cr, r.deploy)))
			}
			break
		}
	}
	return a
}

func (a *analysis) flag(r *row, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if r.violation != "" {
		r.violation += "; "
	}
	r.violation += msg
	a.note(r.rv, "step %q, resourceVersion %d: %s [%s]", r.step, r.rv, msg, condensed(r.cr))
}

// note adds a violation about the version at rv (0: none in particular), in order.
func (a *analysis) note(rv int64, format string, args ...any) {
	i := sort.Search(len(a.flagged), func(i int) bool { return a.flagged[i] > rv })
	a.flagged = slices.Insert(a.flagged, i, rv)
	a.violations = slices.Insert(a.violations, i, fmt.Sprintf(format, args...))
}

// stayedRolledOut: every version of the Deployment from the one current at rv from to the
// one current at rv to is rolled out.
func (a *analysis) stayedRolledOut(from, to int64) bool {
	current := -1
	for i, d := range a.deploys {
		if d.RV <= from {
			current = i
		}
	}
	if current < 0 {
		return false
	}
	for i := current; i < len(a.deploys) && a.deploys[i].RV <= to; i++ {
		if a.deploys[i].Obj == nil || !rolledOut(toDeployment(nil, a.deploys[i].Obj)) {
			return false
		}
	}
	return true
}

func stepAt(steps []stepMark, rv int64) string {
	name := ""
	for _, s := range steps {
		if rv > s.after {
			name = s.name
		}
	}
	return name
}

func toDeployment(t testing.TB, u *unstructured.Unstructured) *appsv1.Deployment {
	if u == nil {
		return nil
	}
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil && t != nil {
		t.Fatalf("Deployment at resourceVersion %s: %v", u.GetResourceVersion(), err)
	}
	return d
}

func orOK(problem string) string {
	if problem == "" {
		return "rendered and rolled out"
	}
	return problem
}

// tsv is the table of every version: .cluster/kstatus-<ours|stock>.tsv.
func (a *analysis) tsv() string {
	var b strings.Builder
	b.WriteString("step\trv\tgeneration\tobservedGeneration\tReady\tReconciling\tStalled\tRolledOut\tPaused\tkstatus\t")
	if a.stock {
		b.WriteString("kstatusStockCRD\t")
	}
	b.WriteString("kubectlWait\tdeploymentRV\tdeploymentRendersSpec\tdeploymentRolledOut\tviolation\n")
	for _, r := range a.rows {
		fmt.Fprintf(&b, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t",
			r.step, r.rv, r.cr.GetGeneration(), observedGeneration(r.cr),
			conditionOf(r.cr, "Ready"), conditionOf(r.cr, "Reconciling"), conditionOf(r.cr, "Stalled"),
			conditionOf(r.cr, "RolledOut"), conditionOf(r.cr, "Paused"), r.kstatus)
		if a.stock {
			fmt.Fprintf(&b, "%s\t", r.kstatusStockCRD)
		}
		fmt.Fprintf(&b, "%t\t%d\t%t\t%t\t%s\n", kubectlWaitMet(r.cr), r.deployRV, r.renders, r.rolledOut, r.violation)
	}
	return b.String()
}

// summary counts the versions by kstatus, and those that read Current too early.
func (a *analysis) summary() string {
	out := "kstatus: " + a.count(func(r *row) kstatus.Status { return r.kstatus })
	if a.stock {
		out += "\nkstatus without our CRD's default observedGeneration (the stock operator's own CRD): " +
			a.count(func(r *row) kstatus.Status { return r.kstatusStockCRD })
	}
	early := 0
	for _, r := range a.rows {
		if kubectlWaitMet(r.cr) && (!r.renders || !r.rolledOut) {
			early++
		}
	}
	return out + fmt.Sprintf("\nkubectl wait --for=condition=Ready satisfied while the Deployment did not render the spec or rolled out: %d; contract violations: %d",
		early, len(a.violations))
}

// count sums up the kstatus that status gives each version.
func (a *analysis) count(status func(*row) kstatus.Status) string {
	byStatus := map[kstatus.Status]int{}
	behind, rollingOut := 0, 0
	for _, r := range a.rows {
		s := status(r)
		byStatus[s]++
		if s == kstatus.CurrentStatus {
			if !r.renders {
				behind++
			} else if !r.rolledOut {
				rollingOut++
			}
		}
	}
	var counts []string
	for s, n := range byStatus {
		counts = append(counts, fmt.Sprintf("%s %d", s, n))
	}
	sort.Strings(counts)
	return fmt.Sprintf("%d versions: %s; Current while the Deployment did not render the spec: %d, Current while it rolled out: %d",
		len(a.rows), strings.Join(counts, ", "), behind, rollingOut)
}

// ---- Fixtures for the Argo CD health check's test ----

// fixtureSituations pick one recorded version of each situation, with the health Argo CD
// must show for it (docs/status.md, "How the tools read it").
var fixtureSituations = []struct {
	name, health, about string
	is                  func(r *row) bool
}{
	{"new", "Progressing", "a CR the manager has not reconciled yet (no conditions)", func(r *row) bool {
		conds, _, _ := unstructured.NestedSlice(r.cr.Object, "status", "conditions")
		return len(conds) == 0
	}},
	{"upgrade-pending", "Progressing", "a spec edit the manager has not deployed yet", func(r *row) bool {
		return behind(r.cr) && conditionOf(r.cr, "Ready").reason == "UpgradePending"
	}},
	{"manager-down", "Progressing", "a spec edit while the manager is down: Ready is still the previous generation's True", func(r *row) bool {
		return r.step == "manager-down" && behind(r.cr) && conditionOf(r.cr, "Ready").status == "True"
	}},
	{"rolling-out", "Progressing", "the release of the current generation deployed, its new pods held Pending", func(r *row) bool {
		return r.step == "rollout-held" && !behind(r.cr) && conditionOf(r.cr, "Ready").reason == "RollingOut" &&
			conditionOf(r.cr, "RolledOut").status == "False"
	}},
	{"ready", "Healthy", "deployed and rolled out", func(r *row) bool {
		ready := conditionOf(r.cr, "Ready")
		return r.kstatus == kstatus.CurrentStatus && !behind(r.cr) && ready.status == "True" &&
			ready.observedGeneration == r.cr.GetGeneration() && r.renders && r.rolledOut
	}},
	{"retrying", "Progressing", "an upgrade that failed fewer than 3 times, being retried", func(r *row) bool {
		return behind(r.cr) && conditionOf(r.cr, "Reconciling").reason == "RetryingAfterFailure"
	}},
	{"stalled", "Degraded", "an upgrade the release refuses (a cpu limit below the request), given up on", func(r *row) bool {
		stalled := conditionOf(r.cr, "Stalled")
		return !behind(r.cr) && stalled.status == "True" && stalled.observedGeneration == r.cr.GetGeneration()
	}},
	{"stalled-then-edited", "Progressing", "the fix of a stalled generation, not yet handled: the Stalled is the previous generation's", func(r *row) bool {
		return behind(r.cr) && conditionOf(r.cr, "Stalled").status == "True"
	}},
	{"paused-nothing-pending", "Suspended", "the pause annotation set, nothing waiting", func(r *row) bool {
		return !behind(r.cr) && conditionOf(r.cr, "Paused").status == "True" && r.cr.GetAnnotations()[pauseAnnotation] == "true"
	}},
	{"paused-edit-pending", "Suspended", "the pause annotation set and a spec edit waiting", func(r *row) bool {
		return behind(r.cr) && conditionOf(r.cr, "Paused").status == "True" && conditionOf(r.cr, "Ready").reason == "Paused" &&
			r.cr.GetAnnotations()[pauseAnnotation] == "true"
	}},
}

// behind: the CR's generation is ahead of status.observedGeneration.
func behind(u *unstructured.Unstructured) bool {
	g, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return !found || g < u.GetGeneration()
}

// writeFixtures writes the last version of each situation as <dir>/recorded-<situation>.yaml
// in the format of test/argocd's fixtures: header comments with the health Argo CD must show
// (the contract's, for the situation) and what kstatus computes, then the CR without its
// managedFields.
func (a *analysis) writeFixtures(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range fixtureSituations {
		var pick *row
		for _, r := range a.rows {
			if s.is(r) {
				pick = r
			}
		}
		if pick == nil {
			t.Logf("fixture %s: no such version recorded", s.name)
			continue
		}
		obj := pick.cr.DeepCopy()
		unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprintf("# Recorded by test/e2e TestStatusContract (step %q, resourceVersion %d): %s.\n# health: %s\n# kstatus: %s\n%s",
			pick.step, pick.rv, s.about, s.health, pick.kstatus, data)
		file := filepath.Join(dir, "recorded-"+s.name+".yaml")
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("fixture %s: %s", file, condensed(pick.cr))
	}
}
