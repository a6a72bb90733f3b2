package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	chartrollout "transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The rollout policy the chart rollout tests give their kind: two canaries (one in a
// Namespace labelled as the canaries'), then 10%, 25%, 50% and 100% of the CRs; a CR that
// fails is rolled back.
const rolloutPolicy = "canaries:2,waves:10/25/50/100,timeout:3m,minready:3s,onfailure:rollback"

// rolloutCRs is how many CRs the chart rollout tests make.
const rolloutCRs = 50

// rolloutFleet is a namespace of CRs of framework.RolloutGVK (the memcached chart under a
// kind of its own), reconciled by a manager and a sidecar of their own, with Leases of their
// own: the manager carries a copy of the chart that the test edits between its runs, and no
// other manager on the cluster knows the kind.
type rolloutFleet struct {
	t        *testing.T
	ns       string // the tenants' namespace
	canaryNS string // a namespace an administrator labelled rollout.CanaryLabel
	chart    *framework.ChartCopy
	names    []string
	canary   string // the CR in canaryNS
	manager  *framework.Process
	sidecar  *framework.Process
	metrics  string
	lease    string
	extra    []string // CRs not in names (brokenTenantCR), in ns
	policy   chartrollout.Policy
	starting int // manager starts, to name their logs
}

// newRolloutFleet writes the chart copy, starts a manager and a sidecar over it and
// creates the CRs, all Ready on the chart as shipped (0.1.0): one in the canary namespace,
// the others in the tenants' namespace, where one of them carries the canary label on the
// CR itself, as a tenant may set it: it must count for nothing. At the end the CRs are
// deleted while that manager runs, then both processes stop.
func newRolloutFleet(t *testing.T) *rolloutFleet {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator has no chart rollouts")
	}
	policy, err := chartrollout.Parse(rolloutPolicy)
	if err != nil {
		t.Fatal(err)
	}
	f := &rolloutFleet{t: t, ns: env.Namespace(t), canaryNS: env.Namespace(t), chart: env.NewChartCopy(t), policy: policy,
		lease: "rollout-e2e-" + rand.String(5)}
	label := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+chartrollout.CanaryLabel+`":"true"}}}`))
	if err := env.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.canaryNS}}, label); err != nil {
		t.Fatal(err)
	}
	if f.metrics, err = framework.FreeAddr(); err != nil {
		t.Fatal(err)
	}
	if f.sidecar, err = env.StartSidecar(framework.ProcessOptions{Name: f.lease + "-sidecar",
		WatchesFile: f.chart.WatchesFile(), Flags: []string{"--leader-election-id=" + f.lease + "-sidecar"}}); err != nil {
		t.Fatal(err)
	}
	processes = append(processes, f.sidecar)
	t.Cleanup(func() {
		if f.manager == nil || f.manager.Exited() {
			f.start()
		}
		if err := f.chart.DeleteCRs(context.Background(), f.ns, f.canaryNS); err != nil {
			t.Errorf("deleting the CRs: %v", err)
		}
		f.manager.Stop()
		f.sidecar.Stop()
	})
	f.start()
	for i := range rolloutCRs {
		name := fmt.Sprintf("mc-%02d", i)
		cr := f.chart.NewCR(f.ns, name)
		switch i {
		case 7:
			cr.SetNamespace(f.canaryNS)
			f.canary = name
		case 3:
			cr.SetLabels(map[string]string{chartrollout.CanaryLabel: "true"})
		}
		if err := f.chart.Client.Create(context.Background(), cr); err != nil {
			t.Fatal(err)
		}
		f.names = append(f.names, name)
	}
	f.chart.WaitOnChart(f.t, 5*time.Minute, "0.1.0", f.names, f.ns, f.canaryNS)
	f.policy.OrderKey = env.RolloutOrderKey(t) // the manager's order, for the waves the test expects
	return f
}

// brokenTenantCR creates, in the tenants' namespace, a CR that is never Ready (its pods
// request a resource no node offers), with a name that puts it in the canary wave, and
// returns its name. It is not among f.names: the waves include it, the checks that every CR
// ends Ready do not.
//
// The canary wave is the canary Namespace's CR and the first of the others in the policy's
// order, so the name is the first tenant-N that comes before that CR, compared two at a
// time: cheap enough to try a million names, which the random namespace names may need.
func (f *rolloutFleet) brokenTenantCR() string {
	f.t.Helper()
	var keys, tenants []string
	for _, n := range f.names {
		keys = append(keys, f.nsOf(n)+"/"+n)
		if f.nsOf(n) == f.ns {
			tenants = append(tenants, f.ns+"/"+n)
		}
	}
	first := tenants[0]
	for _, k := range tenants[1:] {
		if framework.Before(f.policy.OrderKey, k, first) {
			first = k
		}
	}
	for i := range 1_000_000 {
		name := fmt.Sprintf("tenant-%d", i)
		if !framework.Before(f.policy.OrderKey, f.ns+"/"+name, first) {
			continue
		}
		if !slices.Contains(framework.Waves(f.policy, append(keys, f.ns+"/"+name), f.canaryNS)[0], name) {
			f.t.Fatalf("%s comes before %s but is not in the canary wave", name, first)
		}
		cr := f.chart.NewCR(f.ns, name)
		never := "e2e.warpdrive.transwarp.io/never-offered"
		_ = unstructured.SetNestedMap(cr.Object, map[string]any{"requests": map[string]any{never: "1"},
			"limits": map[string]any{never: "1"}}, "spec", "resources")
		if err := f.chart.Client.Create(context.Background(), cr); err != nil {
			f.t.Fatal(err)
		}
		f.extra = append(f.extra, name)
		return name
	}
	f.t.Fatalf("no tenant-N name comes before %s", first)
	return ""
}

// start starts a manager that carries the chart copy as it is now.
func (f *rolloutFleet) start() {
	f.starting++
	p, err := env.StartManager(framework.ProcessOptions{Name: fmt.Sprintf("%s-manager-%d", f.lease, f.starting),
		MetricsAddr: f.metrics, WatchesFile: f.chart.WatchesFile(),
		Flags: []string{"--leader-election-id=" + f.lease + "-manager",
			"--rollout=" + framework.RolloutGVK.Kind + "=" + rolloutPolicy}})
	if err != nil {
		f.t.Fatal(err)
	}
	processes = append(processes, p)
	f.manager = p
}

// restart stops the manager and starts one that carries the chart copy as it is now.
func (f *rolloutFleet) restart() {
	f.manager.Stop()
	f.start()
}

// list reads the CRs by name.
func (f *rolloutFleet) list(ctx context.Context) (map[string]*unstructured.Unstructured, error) {
	return f.chart.List(ctx, f.ns, f.canaryNS)
}

// nsOf is the namespace of the CR name.
func (f *rolloutFleet) nsOf(name string) string {
	if name == f.canary {
		return f.canaryNS
	}
	return f.ns
}

// waves are the waves the policy cuts the fleet into, as the manager cuts it.
func (f *rolloutFleet) waves() [][]string {
	var keys []string
	for _, n := range append(f.names, f.extra...) {
		keys = append(keys, f.nsOf(n)+"/"+n)
	}
	return framework.Waves(f.policy, keys, f.canaryNS)
}

// TestChartRollout: 50 CRs (of the memcached chart), and a new chart version that works rolls out over them in
// the configured waves: the canaries (the labelled one among them) first, then 10%, 25%, 50%
// and 100%. Two watches, on the CRs and on their Deployments, order every version of both
// by resourceVersion (etcd revisions on the local cluster): no Deployment of a wave takes
// the new chart before every CR of the waves before it reads Ready on that chart.
func TestChartRollout(t *testing.T) {
	f := newRolloutFleet(t)
	waves := f.waves()
	var sizes []int
	for _, w := range waves {
		sizes = append(sizes, len(w))
	}
	if fmt.Sprint(sizes) != "[2 3 8 12 25]" {
		t.Fatalf("waves of %v, want [2 3 8 12 25]", sizes)
	}
	if waves[0][0] != f.canary && waves[0][1] != f.canary {
		t.Fatalf("canary wave %v lacks the canary namespace's CR %s", waves[0], f.canary)
	}

	f.chart.Write(t, "0.2.0", "")
	crLog := env.Record(t, framework.RolloutGVR, "", f.ns, f.canaryNS)
	deployLog := env.Record(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "", f.ns, f.canaryNS)
	f.restart()
	f.chart.WaitOnChart(f.t, 8*time.Minute, "0.2.0", f.names, f.ns, f.canaryNS)
	crLog.Stop()
	deployLog.Stop()
	problems, report := framework.WaveOrder(waves, crLog, deployLog, "0.2.0", f.chart.Digests["0.2.0"])
	for _, r := range report {
		t.Log(r)
	}
	for _, p := range problems {
		t.Error(p)
	}
	// The rollout controller counts a CR as upgraded once its wave is done, minready after
	// its release was deployed: the gauge follows the CRs' status, a moment later.
	framework.Eventually(t, time.Minute, func(context.Context) error {
		v, err := framework.Metric(f.metrics, "warpdrive_rollout_crs", `kind="RolloutTest"`, `state="upgraded"`)
		if err != nil || v != rolloutCRs {
			return fmt.Errorf("warpdrive_rollout_crs upgraded: %v, %v; want %d", v, err, rolloutCRs)
		}
		return nil
	})
}

// TestChartRolloutHalts: a new chart version that breaks one CR of the first wave after the
// canaries (a template failure for that release) halts the rollout there. The CRs of the
// later waves keep their releases as they are (same revision, same chart), say why in their
// ChartRollout condition, and an edit of one of them still applies, with its old chart, as does
// a change of the ConfigMap another one takes values from (spec.valuesFrom). The
// broken CR gets a Warning Event and is rolled back to its chart. A fixed chart resumes: every
// CR ends Ready on it.
//
// A tenant's CR that was never Ready (its pods ask for a resource no node offers), named so
// that it falls in the canary wave, must not halt the rollout, nor hold it up: its state
// on the new chart says nothing of the chart. Otherwise anyone who may edit one CR could
// stop every tenant's upgrades.
func TestChartRolloutHalts(t *testing.T) {
	f := newRolloutFleet(t)
	broken := f.brokenTenantCR()
	waves := f.waves()
	victim := waves[1][0]
	f.chart.Write(t, "0.2.0", victim)
	f.restart()

	brokenChart := f.chart.Digests["0.2.0"]
	old := f.chart.Digests["0.1.0"]
	revisions := map[string]int64{}
	crs, err := f.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for n, cr := range crs {
		revisions[n], _, _ = unstructured.NestedInt64(cr.Object, "status", "chart", "revision")
	}
	framework.Eventually(t, 5*time.Minute, func(ctx context.Context) error {
		crs, err := f.list(ctx)
		if err != nil {
			return err
		}
		if d, _, _ := unstructured.NestedString(crs[victim].Object, "status", "chart", "failedDigest"); d != brokenChart {
			return fmt.Errorf("%s not marked failed yet (failedDigest %q)", victim, d)
		}
		if !framework.OnChart(crs[victim], old) {
			return fmt.Errorf("%s not rolled back to Ready on its chart yet", victim)
		}
		for _, n := range waves[len(waves)-1] {
			if _, reason, _ := framework.Condition(crs[n], "ChartRollout"); reason != "RolloutHalted" {
				return fmt.Errorf("%s: ChartRollout %q, want RolloutHalted", n, reason)
			}
		}
		return nil
	})
	// What a person sees (docs/rollouts.md shows it).
	for _, args := range [][]string{{"get", framework.RolloutGVR.Resource, "-n", f.ns}, {"get", "events", "-n", f.ns, "--field-selector", "reason=ChartRolloutFailed"}} {
		out, err := env.Kubectl(args...)
		t.Logf("kubectl %s:\n%s%v", strings.Join(args, " "), out, err)
	}
	if v, err := framework.Metric(f.metrics, "warpdrive_rollout_halted", `kind="RolloutTest"`); err != nil || v != 1 {
		t.Errorf("warpdrive_rollout_halted: %v, %v; want 1", v, err)
	}

	// Events: the broken CR's.
	events, err := env.Clientset.CoreV1().Events(f.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var failedEvents []string
	for _, e := range events.Items {
		if e.Reason == "ChartRolloutFailed" {
			failedEvents = append(failedEvents, e.InvolvedObject.Name)
		}
	}
	if fmt.Sprint(failedEvents) != fmt.Sprint([]string{victim}) {
		t.Errorf("ChartRolloutFailed Events on %v, want on %s only", failedEvents, victim)
	}
	// The tenant's broken CR moved with the canary wave, and failed nothing.
	crs, err = f.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := unstructured.NestedString(crs[broken].Object, "status", "chart", "digest"); d != brokenChart {
		t.Errorf("the tenant's broken CR %s is on chart %s, want %s (it is in the canary wave)", broken, d, brokenChart)
	}
	if _, reason, msg := framework.Condition(crs[broken], "ChartRollout"); reason == "RolloutFailed" {
		t.Errorf("the tenant's broken CR %s counts as failed: %s", broken, msg)
	}

	// The later waves are untouched, and stay so.
	time.Sleep(5 * time.Second)
	crs, err = f.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var later []string
	for _, w := range waves[2:] {
		later = append(later, w...)
	}
	for _, n := range later {
		rev, _, _ := unstructured.NestedInt64(crs[n].Object, "status", "chart", "revision")
		if d, _, _ := unstructured.NestedString(crs[n].Object, "status", "chart", "digest"); d != old || rev != revisions[n] {
			t.Errorf("%s, held back, changed: chart %s revision %d, was %s revision %d", n, d, rev, old, revisions[n])
		}
	}

	// An edit of a held CR applies, with its own chart.
	edited := later[len(later)-1]
	cr := crs[edited]
	if err := unstructured.SetNestedField(cr.Object, int64(2), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := f.chart.Client.Update(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	// heldApplies waits until the held CR name's Deployment has replicas, still on its own chart.
	heldApplies := func(name string, replicas int32) {
		t.Helper()
		framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.nsOf(name), Name: name}, d); err != nil {
				return err
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
				return fmt.Errorf("the Deployment of %s has %v replicas, want %d", name, d.Spec.Replicas, replicas)
			}
			if a := d.Spec.Template.Annotations[framework.PodChartAnnotation]; a != "" {
				t.Errorf("the Deployment of the held CR %s took chart %s with its change", name, a)
			}
			cr := crs[name].DeepCopy()
			if err := f.chart.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
				return err
			}
			if !framework.OnChart(cr, old) {
				return fmt.Errorf("%s not Ready on its old chart after the change", name)
			}
			return nil
		})
	}
	heldApplies(edited, 2)

	// So does a change of a held CR's spec.valuesFrom source (no edit of the CR).
	sourced := later[len(later)-2]
	values := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.nsOf(sourced), Name: "held-values"},
		Data: map[string]string{"values.yaml": "size: 2\n"}}
	if err := env.Client.Create(context.Background(), values); err != nil {
		t.Fatal(err)
	}
	cr = crs[sourced]
	if err := unstructured.SetNestedSlice(cr.Object, []any{map[string]any{"kind": "ConfigMap", "name": values.Name}}, "spec", "valuesFrom"); err != nil {
		t.Fatal(err)
	}
	if err := f.chart.Client.Update(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	heldApplies(sourced, 2)
	values.Data["values.yaml"] = "size: 3\n"
	if err := env.Client.Update(context.Background(), values); err != nil {
		t.Fatal(err)
	}
	heldApplies(sourced, 3)

	// A fixed chart resumes the rollout.
	f.chart.Write(t, "0.3.0", "")
	f.restart()
	f.chart.WaitOnChart(f.t, 8*time.Minute, "0.3.0", f.names, f.ns, f.canaryNS)
	crs, err = f.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := unstructured.NestedString(crs[victim].Object, "status", "chart", "failedDigest"); d != "" {
		t.Errorf("%s still marked failed (%s) on the fixed chart", victim, d)
	}
	if v, err := framework.Metric(f.metrics, "warpdrive_rollout_halted", `kind="RolloutTest"`); err != nil || v != 0 {
		t.Errorf("warpdrive_rollout_halted after the fix: %v, %v; want 0", v, err)
	}
}
