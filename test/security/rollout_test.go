package security

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestTenantCannotSteerAChartRollout: a chart rollout spans every tenant's CRs, and a
// namespace editor tries to steer it. They label each of their CRs a canary, to make the
// first wave theirs (and as large as they like), and they keep one CR broken (its pods ask
// for a resource no node offers), named to fall in the first wave, so that its failure would
// halt the rollout for everyone. The rollout must go in the waves the administrator's choices
// make (canaries come from labelled Namespaces only, and there are none), mark no CR failed,
// and end with every working CR Ready on the new chart.
func TestTenantCannotSteerAChartRollout(t *testing.T) {
	if stock {
		t.Skip("the stock helm-operator has no chart rollouts")
	}
	if env.Impersonating() {
		t.Skip("the test kind's CRD is not in the operator's RBAC")
	}
	const policy = "canaries:1,waves:25/50/100,timeout:2m,minready:2s"
	pol, err := rollout.Parse(policy)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tn := newTenant(t)
	others := env.Namespace(t)
	chart := env.NewChartCopy(t)
	grantRolloutKind(t, tn.ns)

	restart := startRolloutOperator(t, chart, "security-rollout", policy, tn.ns, others)
	// The test knows the operator's key, which orders the waves; the tenant does not. It
	// names its CRs as a tenant who had found the order's secret would.
	pol.OrderKey = env.RolloutOrderKey(t)

	// The broken CR, named to be the first wave (the one canary) of the administrator's order:
	// the first of many candidate names in that order, and every other CR named so as to come
	// after it (a name that would come first is passed over), so that the choice never depends
	// on the random namespace names.
	brokenKey := tn.ns + "/broken-0"
	for i := 1; i < 5000; i++ {
		if k := fmt.Sprintf("%s/broken-%d", tn.ns, i); framework.Before(pol.OrderKey, k, brokenKey) {
			brokenKey = k
		}
	}
	_, broken, _ := strings.Cut(brokenKey, "/")

	// Other tenants' CRs, and the editor's, each labelled a canary.
	var keys, working []string
	create := func(c client.Client, ns, prefix string, n int, labels map[string]string) {
		for i := 0; n > 0; i++ {
			name := fmt.Sprintf("%s-%02d", prefix, i)
			if !framework.Before(pol.OrderKey, brokenKey, ns+"/"+name) {
				continue
			}
			cr := chart.NewCR(ns, name)
			cr.SetLabels(labels)
			if err := c.Create(ctx, cr); err != nil {
				t.Fatal(err)
			}
			keys, working = append(keys, ns+"/"+name), append(working, name)
			n--
		}
	}
	create(chart.Client, others, "app", 12, nil)
	create(tn.client, tn.ns, "mine", 3, map[string]string{rollout.CanaryLabel: "true"})
	if w := framework.Waves(pol, append(slices.Clone(keys), brokenKey))[0]; !slices.Equal(w, []string{broken}) {
		t.Fatalf("the first wave is %v, want the broken CR %s alone", w, broken)
	}
	cr := chart.NewCR(tn.ns, broken)
	never := "security.warpdrive.transwarp.io/never-offered"
	_ = unstructured.SetNestedMap(cr.Object, map[string]any{"requests": map[string]any{never: "1"},
		"limits": map[string]any{never: "1"}}, "spec", "resources")
	if err := tn.client.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, tn.ns+"/"+broken)
	chart.WaitOnChart(t, 5*time.Minute, "0.1.0", working, tn.ns, others)

	// A new chart, and a manager that carries it.
	chart.Write(t, "0.2.0", "")
	crLog := env.Record(t, framework.RolloutGVR, "", tn.ns, others)
	deployLog := env.Record(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "", tn.ns, others)
	restart()
	chart.WaitOnChart(t, 5*time.Minute, "0.2.0", working, tn.ns, others)
	crLog.Stop()
	deployLog.Stop()

	// The waves as the administrator's order cuts them, without the broken CR, which is never
	// Ready: every wave started only once the waves before were Ready and rolled out.
	var waves [][]string
	for _, w := range framework.Waves(pol, keys) {
		if w = slices.DeleteFunc(w, func(n string) bool { return n == broken }); len(w) > 0 {
			waves = append(waves, w)
		}
	}
	problems, report := framework.WaveOrder(waves, crLog, deployLog, "0.2.0", chart.Digests["0.2.0"])
	for _, r := range report {
		t.Log(r)
	}
	for _, p := range problems {
		t.Error(p)
	}
	crs, err := chart.List(ctx, tn.ns, others)
	if err != nil {
		t.Fatal(err)
	}
	for name, cr := range crs {
		if d, _, _ := unstructured.NestedString(cr.Object, "status", "chart", "failedDigest"); d != "" {
			t.Errorf("%s is marked failed on chart %s", name, d)
		}
	}
	if d, _, _ := unstructured.NestedString(crs[broken].Object, "status", "chart", "digest"); d != chart.Digests["0.2.0"] {
		t.Errorf("the broken CR %s is on chart %s, want the new one (it was in the first wave)", broken, d)
	}
	for _, ns := range []string{tn.ns, others} {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == "ChartRolloutFailed" {
				t.Errorf("%s/%s: %s", ns, e.InvolvedObject.Name, e.Message)
			}
		}
	}
}

// startRolloutOperator runs the operator of the test kind: a manager over the chart copy,
// with the rollout policy given, and a sidecar. restart stops the manager and starts another,
// which carries the chart copy as it is then. At the end, the CRs of namespaces are deleted
// and both stopped.
func startRolloutOperator(t *testing.T, chart *framework.ChartCopy, lease, policy string, namespaces ...string) (restart func()) {
	t.Helper()
	start := func() *framework.Process {
		p, err := env.StartManager(framework.ProcessOptions{Name: lease + "-manager", WatchesFile: chart.WatchesFile(),
			Flags: []string{"--leader-election-id=" + lease + "-manager", "--rollout=" + framework.RolloutGVK.Kind + "=" + policy}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	manager := start()
	sidecar, err := env.StartSidecar(framework.ProcessOptions{Name: lease + "-sidecar", WatchesFile: chart.WatchesFile(),
		Flags: []string{"--leader-election-id=" + lease + "-sidecar"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := chart.DeleteCRs(context.Background(), namespaces...); err != nil {
			t.Errorf("deleting the CRs: %v", err)
		}
		manager.Stop()
		sidecar.Stop()
	})
	return func() {
		manager.Stop()
		manager = start()
	}
}

// grantRolloutKind lets the tenant of ns edit the test kind there, as an editor role of the
// kind would.
func grantRolloutKind(t *testing.T, ns string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rollouttest-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{framework.RolloutGVK.Group}, Resources: []string{framework.RolloutGVR.Resource},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rollouttest-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}}
	for _, o := range []client.Object{role, rb} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCanaryStrikeCannotHaltARollout: the tenant whose CRs are the first wave of a chart
// rollout strikes each of them as its status names the new chart, through what they own
// beside the spec, which changes no generation: one's valuesFrom ConfigMap deleted, one's
// filled past the bound, one's rewritten so that its pods ask for a resource no node offers,
// and one's CR marked with the manager's own spec-over-bound annotation. Each says nothing of
// the chart: the rollout must reach every other tenant's CR, and mark none failed.
func TestCanaryStrikeCannotHaltARollout(t *testing.T) {
	if stock {
		t.Skip("the stock helm-operator has no chart rollouts")
	}
	if env.Impersonating() {
		t.Skip("the test kind's CRD is not in the operator's RBAC")
	}
	const policy = "canaries:4,waves:50/100,timeout:1m,minready:20s"
	ctx := context.Background()
	tn := newTenant(t)
	others := env.Namespace(t)
	chart := env.NewChartCopy(t)
	grantRolloutKind(t, tn.ns)
	restart := startRolloutOperator(t, chart, "security-rollout-strike", policy, tn.ns, others)

	// The strikers are the first four of the administrator's order among many candidate names,
	// and the other tenant's CRs are named to come after them.
	var candidates []string
	for i := range 2000 {
		candidates = append(candidates, fmt.Sprintf("%s/strike-%d", tn.ns, i))
	}
	orderKey := env.RolloutOrderKey(t)
	strikers := framework.Waves(rollout.Policy{Waves: []int{100}, OrderKey: orderKey}, candidates)[0][:4]
	last := tn.ns + "/" + strikers[3]
	never := "security.warpdrive.transwarp.io/never-offered"
	overBound := &strings.Builder{}
	for i := range 30000 {
		fmt.Fprintf(overBound, "k%d: 0\n", i)
	}
	strikes := map[string]func() error{
		strikers[0]: func() error { // its source deleted
			return tn.client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: strikers[0]}})
		},
		strikers[1]: func() error { // its source past the bound
			return tn.client.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: strikers[1]},
				Data: map[string]string{"values.yaml": overBound.String()}})
		},
		strikers[2]: func() error { // its source makes its pods unschedulable
			return tn.client.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: strikers[2]},
				Data: map[string]string{"values.yaml": fmt.Sprintf("resources: {requests: {%q: 1}, limits: {%q: 1}}\n", never, never)}})
		},
		strikers[3]: func() error { // the manager's mark, written by the CR's owner
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"warpdrive.transwarp.io/spec-over-bound":"true",%q:"strike"}}}`,
				statuscontract.RequestAnnotation)
			cr := chart.NewCR(tn.ns, strikers[3])
			return tn.client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, []byte(patch)))
		},
	}
	for _, name := range strikers {
		if err := tn.client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name},
			Data: map[string]string{"values.yaml": "size: 1\n"}}); err != nil {
			t.Fatal(err)
		}
		cr := chart.NewCR(tn.ns, name)
		cr.Object["spec"] = map[string]any{"valuesFrom": []any{map[string]any{"kind": "ConfigMap", "name": name}}}
		if err := tn.client.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	var working []string
	for i := 0; len(working) < 8; i++ {
		name := fmt.Sprintf("app-%02d", i)
		if !framework.Before(orderKey, last, others+"/"+name) {
			continue
		}
		if err := chart.Client.Create(ctx, chart.NewCR(others, name)); err != nil {
			t.Fatal(err)
		}
		working = append(working, name)
	}
	chart.WaitOnChart(t, 5*time.Minute, "0.1.0", append(slices.Clone(strikers), working...), tn.ns, others)

	// The new chart; each striker is struck as soon as its status names it.
	chart.Write(t, "0.2.0", "")
	struck := map[string]error{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for deadline := time.Now().Add(5 * time.Minute); len(struck) < len(strikers) && time.Now().Before(deadline); {
			crs, err := chart.List(ctx, tn.ns)
			if err == nil {
				for _, name := range strikers {
					d, _, _ := unstructured.NestedString(crs[name].Object, "status", "chart", "digest")
					if _, ok := struck[name]; !ok && d == chart.Digests["0.2.0"] {
						struck[name] = strikes[name]()
					}
				}
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	restart()
	chart.WaitOnChart(t, 5*time.Minute, "0.2.0", working, others)
	<-done
	for _, name := range strikers {
		if err, ok := struck[name]; !ok || err != nil {
			t.Errorf("striker %s: struck %v (%v)", name, ok, err)
		}
	}
	crs, err := chart.List(ctx, tn.ns, others)
	if err != nil {
		t.Fatal(err)
	}
	for name, cr := range crs {
		if d, _, _ := unstructured.NestedString(cr.Object, "status", "chart", "failedDigest"); d != "" {
			t.Errorf("%s is marked failed on chart %s", name, d)
		}
	}
	for _, name := range strikers[:3] { // the strikes took: their own CRs are broken
		if c := statuscontract.Find(statuscontract.Conditions(crs[name]), statuscontract.Ready); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("striker %s is Ready: its strike did not take, and the test shows nothing", name)
		}
	}
	if c := statuscontract.Find(statuscontract.Conditions(crs[strikers[3]]), statuscontract.Stalled); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("striker %s is Stalled (%s) by a mark its owner wrote", strikers[3], c.Reason)
	}
	events := &corev1.EventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(tn.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "ChartRolloutFailed" {
			t.Errorf("%s: %s", e.InvolvedObject.Name, e.Message)
		}
	}
}
