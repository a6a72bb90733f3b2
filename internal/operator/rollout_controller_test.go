package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// onChart is a Memcached CR whose release is on the chart of digest, Ready since an hour.
func onChart(name, digest string) *unstructured.Unstructured {
	cr := actiontest.Memcached(map[string]any{
		"chart": map[string]any{chartVersion: "1.0.0", chartDigest: digest,
			chartLastDeployed: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)},
		"conditions": []any{map[string]any{"type": statuscontract.Ready, "status": "True", "observedGeneration": int64(1),
			"reason": "Ready", "lastTransitionTime": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}},
	})
	cr.SetName(name)
	cr.SetGeneration(1)
	return cr
}

func received(ch chan event.GenericEvent) []string {
	var out []string
	for len(ch) > 0 {
		e := <-ch
		out = append(out, e.Object.GetName())
	}
	return out
}

// writeBaselines writes into each CR's status the baseline the rollout controller says, as
// the readiness controller does.
func writeBaselines(t *testing.T, k *kindRollout, c client.Client, objs []client.Object) {
	t.Helper()
	for _, o := range objs {
		cr := o.(*unstructured.Unstructured)
		if b := baselineField(k.status(cr).baseline); b != nil {
			_ = unstructured.SetNestedMap(cr.Object, b, "status", "chart", chartBaseline)
		}
		if err := c.Update(context.Background(), cr); err != nil {
			t.Fatal(err)
		}
	}
}

// The rollout controller first records each CR's baseline, then admits the canary (the CR
// in the Namespace an administrator labelled; a CR's own label counts for nothing) and
// wakes its helm reconciler; the others are held; once a CR is marked failed, the rollout
// halts, the failed CR gets an Event, its status is sent to be written, and the gate rolls
// it back.
func TestRolloutController(t *testing.T) {
	v1, v2 := actiontest.MemcachedChart("1.0.0", "a"), actiontest.MemcachedChart("2.0.0", "b")
	old := rollout.Digest(v1)
	var objs []client.Object
	for i := range 5 {
		objs = append(objs, onChart(fmt.Sprintf("m%d", i), old))
	}
	objs[3].SetNamespace("staging")
	objs[0].SetLabels(map[string]string{rollout.CanaryLabel: "true"}) // a tenant's own label
	staging := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "staging", Labels: map[string]string{rollout.CanaryLabel: "true"}}}
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(append(objs, staging, tenant)...).Build()
	rec := record.NewFakeRecorder(10)
	notify := make(chan event.GenericEvent, 10)
	policy := rollout.Policy{Canaries: 1, Waves: []int{100}, Timeout: time.Minute, Rollback: true}
	k := newKindRollout(actiontest.MemcachedGVK, nil, policy, v2, c, rec, notify)

	if k.Admits(objs[3]) {
		t.Fatal("a CR admitted before the first plan")
	}
	if _, err := k.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := received(k.wake); len(got) != 0 {
		t.Errorf("woke %v before any baseline was recorded", got)
	}
	if got := received(notify); len(got) != 5 {
		t.Errorf("status to write for %v, want all 5 (none has a baseline)", got)
	}
	writeBaselines(t, k, c, objs)
	if _, err := k.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := received(k.wake); len(got) != 1 || got[0] != "m3" {
		t.Errorf("woke %v, want the canary m3", got)
	}
	if got := received(notify); len(got) != 5 {
		t.Errorf("status to write for %v, want all 5 (none has a ChartRollout condition)", got)
	}
	if !k.Admits(objs[3]) || k.Admits(objs[0]) {
		t.Errorf("admits the canary %v, another %v; want true, false", k.Admits(objs[3]), k.Admits(objs[0]))
	}
	held := k.status(objs[0].(*unstructured.Unstructured))
	if held.condition.Reason != statuscontract.ReasonWaiting || held.condition.Status != metav1.ConditionFalse || held.failedDigest != "" {
		t.Errorf("a CR of the next wave: %+v", held)
	}

	// The canary moves and stalls.
	canary := objs[3].(*unstructured.Unstructured)
	_ = unstructured.SetNestedField(canary.Object, rollout.Digest(v2), "status", "chart", chartDigest)
	_ = unstructured.SetNestedSlice(canary.Object, []any{
		map[string]any{"type": statuscontract.Ready, "status": "False", "reason": "RollingOut", "observedGeneration": int64(1),
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)},
		map[string]any{"type": statuscontract.Stalled, "status": "True", "reason": "UpgradeFailed", "message": "boom",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
	if err := c.Update(context.Background(), canary); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := received(k.wake); len(got) != 1 || got[0] != "m3" {
		t.Errorf("woke %v, want the failed canary, to roll it back", got)
	}
	if ev := actiontest.Events(rec); len(ev) != 1 || !contains(ev[0], reasonRolloutFailed) || !contains(ev[0], "boom") {
		t.Errorf("Events %q, want one %s with the failure", ev, reasonRolloutFailed)
	}
	// Planned again before the failure mark is written (status.chart.failedDigest): the
	// failure is told once, and the canary woken once.
	if _, err := k.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if ev, woken := actiontest.Events(rec), received(k.wake); len(ev) != 0 || len(woken) != 0 {
		t.Errorf("a plan before the failure mark: Events %q, woke %v; want none", ev, woken)
	}
	if !k.RollsBack(canary) || k.Admits(objs[0]) {
		t.Error("after the failure: the canary is not rolled back, or another CR is admitted")
	}
	if rs := k.status(canary); rs.failedDigest != rollout.Digest(v2) || rs.condition.Reason != statuscontract.ReasonRolloutFailed {
		t.Errorf("the failed canary's status %+v", rs)
	}
	if rs := k.status(objs[0].(*unstructured.Unstructured)); rs.condition.Reason != statuscontract.ReasonRolloutHalted {
		t.Errorf("a held CR's status %+v", rs)
	}
	// A person forces the canary: it moves again, and the rollout resumes.
	canary.SetAnnotations(map[string]string{rollout.ForceAnnotation: rollout.Digest(v2)})
	if k.RollsBack(canary) || !k.Admits(canary) {
		t.Error("a forced CR is still rolled back")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// status.chart: from the outcome when this process saw the release, else as the status says;
// behind when its digest is not the carried one; the failure mark from the rollout, or, before
// its first plan, as the status says if it is for the carried chart.
func TestStatusChart(t *testing.T) {
	cr := actiontest.Memcached(map[string]any{"chart": map[string]any{chartVersion: "1.0.0", chartDigest: "old", chartRevision: int64(3),
		chartFailed: "new"}})
	got := statusChart(cr, outcomes.Outcome{}, rolloutStatus{targetDigest: "new"})
	if got[chartVersion] != "1.0.0" || got[chartBehind] != true || got[chartFailed] != "new" || got[chartRevision] != int64(3) {
		t.Errorf("carried over before the first plan: %v", got)
	}
	got = statusChart(cr, outcomes.Outcome{}, rolloutStatus{targetDigest: "newer"})
	if _, kept := got[chartFailed]; kept {
		t.Errorf("a failure mark of another chart kept: %v", got)
	}
	o := outcomes.Outcome{Chart: outcomes.Chart{Version: "2.0.0", Digest: "new", Revision: 4}, ChartSet: true}
	got = statusChart(cr, o, rolloutStatus{targetDigest: "new", known: true})
	if got[chartVersion] != "2.0.0" || got[chartBehind] != false || got[chartFailed] != nil {
		t.Errorf("from the outcome, the rollout clearing the mark: %v", got)
	}
	if !sameChart(actiontest.Memcached(map[string]any{"chart": got}), got) || sameChart(cr, got) {
		t.Error("sameChart")
	}
	if statusChart(actiontest.Memcached(nil), outcomes.Outcome{}, rolloutStatus{}) != nil {
		t.Error("a chart for a CR whose release is not known")
	}
}

// threeOnTheOldChart is a rollout of chart 2.0.0, all at once, over three CRs (m0, m1, m2 in
// Namespace ns) on chart 1.0.0. plan runs one plan and returns the CRs whose status it asked
// the readiness controller to write.
func threeOnTheOldChart(t *testing.T) (k *kindRollout, c client.Client, objs []client.Object, plan func() []string) {
	t.Helper()
	v1, v2 := actiontest.MemcachedChart("1.0.0", "a"), actiontest.MemcachedChart("2.0.0", "b")
	for i := range 3 {
		objs = append(objs, onChart(fmt.Sprintf("m%d", i), rollout.Digest(v1)))
	}
	c = fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
	notify := make(chan event.GenericEvent, 10)
	k = newKindRollout(actiontest.MemcachedGVK, nil, rollout.Policy{AllAtOnce: true}, v2, c, record.NewFakeRecorder(10), notify)
	plan = func() []string {
		t.Helper()
		if _, err := k.Reconcile(context.Background(), reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		return received(notify)
	}
	return k, c, objs, plan
}

// A plan reads again only the CRs that changed since the last one (their resourceVersion),
// and forgets the deleted ones; what it decides follows the changed CRs' new status.
func TestRolloutPlansReadOnlyChangedCRs(t *testing.T) {
	k, c, objs, plan := threeOnTheOldChart(t)
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

	if got := plan(); len(got) != 3 {
		t.Fatalf("status to write for %v, want all 3 (none has a ChartRollout condition)", got)
	}
	m0 := k.seen[key("m0")]

	// m1's status comes to say what the plan says of it; m2 is deleted.
	m1 := &unstructured.Unstructured{}
	m1.SetGroupVersionKind(actiontest.MemcachedGVK)
	if err := c.Get(context.Background(), key("m1"), m1); err != nil {
		t.Fatal(err)
	}
	rs := k.status(m1)
	conds, _, _ := unstructured.NestedSlice(m1.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": statuscontract.ChartRollout, "status": string(rs.condition.Status),
		"reason": rs.condition.Reason, "message": rs.condition.Message,
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	_ = unstructured.SetNestedSlice(m1.Object, conds, "status", "conditions")
	if err := c.Update(context.Background(), m1); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(context.Background(), objs[2]); err != nil {
		t.Fatal(err)
	}

	if got := plan(); len(got) != 0 {
		t.Errorf("status to write for %v, want none (m0's was asked for at this version, m1's says what the plan says, m2 is gone)", got)
	}
	if k.seen[key("m0")] != m0 {
		t.Error("m0, unchanged, was read again")
	}
	if o := k.seen[key("m1")]; o == nil || o.chartRolloutReason != rs.condition.Reason {
		t.Errorf("m1 as the plan read it: %+v, want its new ChartRollout condition", o)
	}
	if _, ok := k.seen[key("m2")]; ok || len(k.seen) != 2 {
		t.Errorf("the plans remember %d CRs, m2 among them: %v; want m0 and m1", len(k.seen), ok)
	}
}

// A CR whose release the plan does not know yet (a new CR: no status.chart) is admitted but
// not woken, for its own event installs it; a CR on another chart is woken to move.
func TestRolloutWakesOnlyCRsOnAnotherChart(t *testing.T) {
	v1, v2 := actiontest.MemcachedChart("1.0.0", "a"), actiontest.MemcachedChart("2.0.0", "b")
	fresh := actiontest.Memcached(nil)
	fresh.SetName("fresh")
	old := onChart("old", rollout.Digest(v1))
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(fresh, old).Build()
	k := newKindRollout(actiontest.MemcachedGVK, nil, rollout.Policy{AllAtOnce: true}, v2, c, record.NewFakeRecorder(10),
		make(chan event.GenericEvent, 10))
	if _, err := k.Reconcile(context.Background(), reconcile.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := received(k.wake); len(got) != 1 || got[0] != "old" {
		t.Errorf("woke %v, want old only", got)
	}
	if !k.Admits(fresh) {
		t.Error("the new CR is not admitted")
	}
}

// The readiness controller is asked once to write what the plan says of a CR, not at every
// plan: again only when the CR changes or the plan comes to say something else of it.
func TestRolloutAsksForAStatusOnce(t *testing.T) {
	k, c, objs, plan := threeOnTheOldChart(t)
	notify := k.notify
	if got := plan(); len(got) != 3 {
		t.Fatalf("first plan asked for %v, want all 3 (none has a ChartRollout condition)", got)
	}
	if got := plan(); len(got) != 0 {
		t.Errorf("the same plan of the same CRs asked again for %v", got)
	}
	// m1 changes (its status is still without the condition): it is asked for again.
	m1 := objs[1].(*unstructured.Unstructured)
	m1.SetLabels(map[string]string{"team": "a"})
	if err := c.Update(context.Background(), m1); err != nil {
		t.Fatal(err)
	}
	if got := plan(); len(got) != 1 || got[0] != "m1" {
		t.Errorf("after m1 changed, asked for %v, want m1", got)
	}
	// A full channel: nothing is recorded as asked, and the next plan asks again.
	m0 := objs[0].(*unstructured.Unstructured)
	m0.SetLabels(map[string]string{"team": "a"})
	if err := c.Update(context.Background(), m0); err != nil {
		t.Fatal(err)
	}
	for len(notify) < cap(notify) {
		notify <- event.GenericEvent{Object: &unstructured.Unstructured{}}
	}
	if got := plan(); len(got) != cap(notify) {
		t.Fatalf("drained %d, want the %d that filled the channel", len(got), cap(notify))
	}
	if got := plan(); len(got) != 1 || got[0] != "m0" {
		t.Errorf("after a full channel, asked for %v, want m0 again", got)
	}
}
