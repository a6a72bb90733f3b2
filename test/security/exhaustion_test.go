package security

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The planted-records attack: how many Secrets the tenant labels as records of its own
// release, and how large each is (near a Secret's 1 MiB limit, base64 included).
const (
	plantedRecords = 100
	plantedBytes   = 640 << 10
)

// maxPlantedRise bounds what the planted records may add to the manager's peak memory (the
// issue's goal): none of them is read whole, where holding them all at once takes more than
// twice the 62 MiB they weigh (the response and the objects decoded from it).
const maxPlantedRise = 20

// twoTenants are an attacker and another tenant, each with an AppService deployed (x and y).
func twoTenants(t *testing.T) (attacker, other *tenant, cr, theirs *unstructured.Unstructured) {
	t.Helper()
	attacker, other = newTenant(t), newTenant(t)
	cr, theirs = appService(attacker.ns, "x", "x-app", 1), appService(other.ns, "y", "y-app", 1)
	for _, c := range []struct {
		tn *tenant
		cr *unstructured.Unstructured
	}{{attacker, cr}, {other, theirs}} {
		if err := c.tn.client.Create(context.Background(), c.cr); err != nil {
			t.Fatal(err)
		}
		if _, err := deployed(c.cr, 1); err != nil {
			t.Fatal(err)
		}
	}
	return attacker, other, cr, theirs
}

// A namespace editor labels a hundred large Secrets as release records of their own CR and
// forces reconciles of it: the manager refuses them on their metadata and never reads them
// whole, so its peak memory barely rises, it stays up, and another tenant's edit is served.
func TestPlantedRecordsDoNotExhaustTheManager(t *testing.T) {
	attacker, other, cr, theirs := twoTenants(t)
	ctx := context.Background()

	// The planted Secrets carry signatures of every shape a tenant can give them: none; the
	// signature and digest of the tenant's own real record, copied; a signature of the key's
	// id in the layout of earlier versions, which signed the whole release.
	real := &corev1.Secret{}
	if err := attacker.client.Get(ctx, client.ObjectKey{Namespace: attacker.ns, Name: "sh.helm.release.v1.x.v1"}, real); err != nil {
		t.Fatal(err)
	}
	keyID, _, _ := strings.Cut(real.Annotations[releasesign.SignatureAnnotation], ".")
	signatures := []map[string]string{nil,
		{releasesign.SignatureAnnotation: real.Annotations[releasesign.SignatureAnnotation],
			releasesign.DigestAnnotation: real.Annotations[releasesign.DigestAnnotation]},
		{releasesign.SignatureAnnotation: keyID + ".bWFjIG9mIGFuIGVhcmxpZXIgdmVyc2lvbg"}}
	// From before the planting: the manager's informer of release Secrets sees every one.
	resetPeak(t, manager.Pid())
	before := peakRSS(t, manager.Pid())
	for i := range plantedRecords {
		data := make([]byte, plantedBytes*3/4)
		_, _ = rand.Read(data)
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: fmt.Sprintf("sh.helm.release.v1.x.v%d", 100+i),
				Labels:      map[string]string{"owner": "helm", "name": "x", "status": "superseded", "version": strconv.Itoa(100 + i)},
				Annotations: signatures[i%len(signatures)]},
			Type: "helm.sh/release.v1",
			Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(data))},
		}
		if err := attacker.client.Create(ctx, s); err != nil {
			t.Fatalf("planting record %d: %v", i, err)
		}
	}
	time.Sleep(2 * time.Second) // the manager's informer sees them
	for i := range 3 {
		request := fmt.Sprintf("planted-%d", i)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statuscontract.RequestAnnotation, request)
		if err := attacker.client.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
		if !stock {
			waitHandled(t, cr, request)
		} else {
			time.Sleep(10 * time.Second) // the stock operator echoes no request
		}
	}
	report(t, otherServedWithin(t, other, theirs, before, maxPlantedRise,
		fmt.Sprintf("the planting of %d records of %d KiB and 3 forced reconciles", plantedRecords, plantedBytes>>10)))
}

// otherServedWithin has the other tenant edit theirs (y, at 2 replicas) after an attack, and
// returns what went wrong: the edit not applied, the manager gone, or its peak RSS risen from
// before by more than maxRise MiB through the attack (named by what, for the log).
func otherServedWithin(t *testing.T, other *tenant, theirs *unstructured.Unstructured, before float64, maxRise int, what string) []string {
	t.Helper()
	other.setReplicas(t, theirs, 2)
	var v []string
	if err := deploymentReplicas(other.ns, "y-app", 2); err != nil {
		v = append(v, "the other tenant's edit: "+err.Error())
	}
	if manager.Exited() {
		return append(v, "the manager exited")
	}
	rise := peakRSS(t, manager.Pid()) - before
	t.Logf("manager peak RSS rose by %.0f MiB through %s", rise, what)
	if rise > float64(maxRise) {
		v = append(v, fmt.Sprintf("the manager's peak RSS rose by %.0f MiB, more than %d", rise, maxRise))
	}
	return v
}

// waitHandled waits until the CR's status echoes the reconcile request.
func waitHandled(t *testing.T, cr *unstructured.Unstructured, request string) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		got := cr.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		if h, _, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); h != request {
			return fmt.Errorf("reconcile request %q not handled yet (last %q)", request, h)
		}
		return nil
	})
}

// resetPeak resets the peak resident set size of process pid (Linux: clear_refs 5).
func resetPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the manager's peak RSS: %v", err)
	}
}

// peakRSS is the peak resident set size of process pid since its last reset, in MiB.
func peakRSS(t *testing.T, pid int) float64 { return procStatusMiB(t, pid, "VmHWM") }

// A tenant at their namespace's quota of CRs is refused the next one by the API server, with
// a message naming the quota; the operator serves the CRs they have and another tenant's.
func TestCRCountAtQuota(t *testing.T) {
	attacker, other := newTenant(t), newTenant(t)
	ctx := context.Background()
	const admitted = 2
	quota := tenantQuota(t, attacker.ns)
	resource := framework.GVK("AppService")
	for name := range quota.Spec.Hard {
		if strings.HasPrefix(string(name), "count/appservices.") {
			quota.Spec.Hard[name] = *apiresource.NewQuantity(admitted, apiresource.DecimalSI)
		}
	}
	if err := env.Client.Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// The quota admits creates once the controller-manager has counted what the namespace has.
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		got := &corev1.ResourceQuota{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(quota), got); err != nil {
			return err
		}
		for name, hard := range got.Status.Hard {
			if strings.HasPrefix(string(name), "count/appservices.") && hard.Value() == admitted {
				if _, counted := got.Status.Used[name]; counted {
					return nil
				}
			}
		}
		return fmt.Errorf("quota of %s AppServices not in force yet: %v", resource.Group, got.Status)
	})
	var crs []*unstructured.Unstructured
	for i := range admitted {
		cr := appService(attacker.ns, fmt.Sprintf("a-%d", i), fmt.Sprintf("a-%d", i), 0)
		if err := attacker.client.Create(ctx, cr); err != nil {
			t.Fatalf("CR %d of the %d the quota admits: %v", i+1, admitted, err)
		}
		crs = append(crs, cr)
	}
	var v []string
	over := appService(attacker.ns, "over", "over", 0)
	if err := attacker.client.Create(ctx, over); err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		v = append(v, fmt.Sprintf("a CR over the quota: %v, want refused for exceeding it", err))
	}
	for _, cr := range crs {
		if _, err := deployed(cr, 1); err != nil {
			v = append(v, "a CR within the quota: "+err.Error())
		}
	}
	theirs := appService(other.ns, "y", "y-app", 1)
	if err := other.client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if _, err := deployed(theirs, 1); err != nil {
		v = append(v, "the other tenant's CR: "+err.Error())
	}
	if manager.Exited() {
		v = append(v, "the manager exited")
	}
	report(t, v)
}

// A namespace editor who forces reconciles of their CR in a loop gets at most one every
// informers.ForcedInterval (10 s): the requests in between are passed on as one, and another tenant's
// edit is served meanwhile. So does one who writes another annotation beside each request
// (`kubectl annotate ... reconcile-requested-at=$i n=$i`): any update that changes neither
// spec nor generation draws on the same budget.
func TestForcedReconcileLoop(t *testing.T) {
	if stock {
		t.Skip("the stock operator has no forced reconciles: every CR update is a full reconcile")
	}
	t.Run("request alone", func(t *testing.T) { forcedReconcileLoop(t, false) })
	t.Run("request and another annotation", func(t *testing.T) { forcedReconcileLoop(t, true) })
}

func forcedReconcileLoop(t *testing.T, withAnother bool) {
	attacker, other, cr, theirs := twoTenants(t)
	ctx := context.Background()
	const requests = 40
	handled := map[string]bool{}
	seen := func() {
		got := cr.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err == nil {
			if h, ok, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); ok {
				handled[h] = true
			}
		}
	}
	for i := range requests {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"loop-%d"}}}`, statuscontract.RequestAnnotation, i)
		if withAnother {
			patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:"loop-%d","n":"%d"}}}`, statuscontract.RequestAnnotation, i, i)
		}
		if err := attacker.client.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
		if i == requests/2 {
			other.setReplicas(t, theirs, 2)
		}
		time.Sleep(100 * time.Millisecond)
		seen()
	}
	var v []string
	if err := deploymentReplicas(other.ns, "y-app", 2); err != nil {
		v = append(v, "the other tenant's edit: "+err.Error())
	}
	last := fmt.Sprintf("loop-%d", requests-1)
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		seen()
		if !handled[last] {
			return fmt.Errorf("the last request %s not handled yet", last)
		}
		return nil
	})
	// The first request passes, the last (with all those between) after the interval; a
	// request can be seen handled between the two only if its reconcile began then.
	t.Logf("%d forced reconciles in a loop were handled as %d: %v", requests, len(handled), handled)
	if len(handled) > 3 {
		v = append(v, fmt.Sprintf("%d of the %d forced reconciles ran one by one (%v), want them passed on as one", len(handled), requests, handled))
	}
	if manager.Exited() {
		v = append(v, "the manager exited")
	}
	report(t, v)
}

// noisyCRs is how many CRs the noisy neighbour forces at once.
const noisyCRs = 200

// A namespace editor forces a reconcile of each of their many CRs at once; another tenant's
// edit made right after is served in its turn (the queue serves namespaces in turn), not
// behind all of them: when it is deployed, most of the neighbour's requests still wait. With
// one first-in first-out queue, all of them would be handled first.
func TestNoisyNeighbourDoesNotQueueOthersBehind(t *testing.T) {
	if stock {
		t.Skip("the stock operator writes no status.lastHandledReconcileAt, by which this test tells which requests were handled")
	}
	attacker, other, _, theirs := twoTenants(t)
	ctx := context.Background()
	crs := make([]*unstructured.Unstructured, noisyCRs)
	for i := range crs {
		crs[i] = appService(attacker.ns, fmt.Sprintf("n%d", i), fmt.Sprintf("n%d-app", i), 0)
		if err := attacker.client.Create(ctx, crs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, cr := range crs {
		if _, err := deployed(cr, 1); err != nil {
			t.Fatal(err)
		}
	}
	// All at once: from as many writers as CRs, so that the requests queue up faster than
	// the manager handles them.
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"all-at-once"}}}`, statuscontract.RequestAnnotation)
	var writers errgroup.Group
	for _, cr := range crs {
		writers.Go(func() error {
			return attacker.client.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch)))
		})
	}
	if err := writers.Wait(); err != nil {
		t.Fatal(err)
	}
	other.setReplicas(t, theirs, 2)
	var v []string
	if err := deploymentReplicas(other.ns, "y-app", 2); err != nil {
		v = append(v, "the other tenant's edit: "+err.Error())
	}
	handled := func() int {
		n := 0
		for _, cr := range crs {
			got := cr.DeepCopy()
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err == nil {
				if h, _, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); h == "all-at-once" {
					n++
				}
			}
		}
		return n
	}
	before := handled()
	t.Logf("the other tenant's edit was deployed when %d of the neighbour's %d forced reconciles had been handled", before, noisyCRs)
	if before > noisyCRs/2 {
		v = append(v, fmt.Sprintf("the other tenant's edit waited behind %d of the neighbour's %d forced reconciles", before, noisyCRs))
	}
	// The neighbour is served too, only not first.
	framework.Eventually(t, 3*time.Minute, func(context.Context) error {
		if n := handled(); n < noisyCRs {
			return fmt.Errorf("%d of the neighbour's %d forced reconciles handled", n, noisyCRs)
		}
		return nil
	})
	if manager.Exited() {
		v = append(v, "the manager exited")
	}
	report(t, v)
}

// overBoundObjects is how many empty objects the spec over the bound holds: more than the
// manager's default --max-spec-values (20,000), and 90 KB of JSON, which a kind whose schema
// leaves the spec open admits (here the chart of TestLookupReadsOnlyTheRelease, without a
// schema: its CRD keeps any spec, as a kind made from a chart without one does).
const overBoundObjects = 30000

// A namespace editor gives their CR a spec of more values than the manager's bound, in the
// shape that costs a Go heap most per byte: the manager refuses it without rendering it
// (Stalled SpecTooLarge, a Warning Event), leaves the tenant's spec and release as they are,
// serves another tenant's edit of the same kind, and reconciles the CR again once its spec is
// small. TestManagerMemoryWithLargestOpenCRs measures what the bound saves.
func TestSpecOverTheBoundIsRefused(t *testing.T) {
	if stock {
		t.Skip("the stock operator bounds no spec: it reconciles whatever the API server admits")
	}
	attacker, other := newTenant(t), newTenant(t)
	ctx := context.Background()
	env.InstallChartKind(t, lookupKind)
	grantLookupKind(t, attacker.ns)
	grantLookupKind(t, other.ns)
	p, err := env.StartManager(framework.ProcessOptions{Name: "security-open-spec", WatchesFile: lookupKind.WatchesFile(t),
		Flags: []string{"--leader-election-id=security-open-spec"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	holder := func(tn *tenant, name string) *unstructured.Unstructured {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(lookupGVK)
		cr.SetNamespace(tn.ns)
		cr.SetName(name)
		cr.Object["spec"] = map[string]any{}
		if err := tn.client.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
		// Before the manager stops (cleanups run last first): the finalizer would keep the CR.
		t.Cleanup(func() { _ = tn.deleteAndWait(cr) })
		return cr
	}
	cr, theirs := holder(attacker, "x"), holder(other, "y")
	var v []string
	for _, c := range []*unstructured.Unstructured{cr, theirs} {
		if err := greeting(c, "hello from "+c.GetName()); err != nil {
			t.Fatal(err)
		}
	}

	junk := make([]any, overBoundObjects)
	for i := range junk {
		junk[i] = map[string]any{}
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"junk": junk, "greeting": "refused"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := attacker.client.Patch(ctx, cr.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		got := cr.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		status, reason, msg := framework.Condition(got, statuscontract.Stalled)
		if status != "True" || reason != "SpecTooLarge" || !strings.Contains(msg, "--max-spec-values") {
			return fmt.Errorf("Stalled=%s %s: %s; want True SpecTooLarge naming --max-spec-values", status, reason, msg)
		}
		if g, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); g != got.GetGeneration() {
			return fmt.Errorf("observedGeneration %d, want %d (given up on)", g, got.GetGeneration())
		}
		return nil
	})
	if err := warningEvent(cr, "SpecTooLarge", "--max-spec-values"); err != nil {
		v = append(v, err.Error())
	}
	// Refused for good until edited: not retried, so its status, which every write of sends
	// the whole CR to every watcher, is not written again (with retries, each one counted
	// another attempt in the message). The sidecar's word on the generation now observed may
	// follow the refusal once; give it 3 s.
	time.Sleep(3 * time.Second)
	got := cr.DeepCopy()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	if later := cr.DeepCopy(); env.Client.Get(ctx, client.ObjectKeyFromObject(cr), later) == nil &&
		later.GetResourceVersion() != got.GetResourceVersion() {
		_, _, msg := framework.Condition(later, statuscontract.Stalled)
		failures, _, _ := unstructured.NestedInt64(later.Object, "status", "failures")
		v = append(v, fmt.Sprintf("the refused CR was written again within 10 s (resourceVersion %s -> %s; last writer %s; failures %d; Stalled: %s)",
			got.GetResourceVersion(), later.GetResourceVersion(), lastWriter(later), failures, msg))
	}
	if kept, _, _ := unstructured.NestedSlice(got.Object, "spec", "junk"); len(kept) != overBoundObjects {
		v = append(v, fmt.Sprintf("the tenant's spec was changed: %d objects of %d left", len(kept), overBoundObjects))
	}
	// The release is left as it is: the greeting of the refused spec is not rendered.
	if err := greeting(cr, "hello from x"); err != nil {
		v = append(v, "the release changed: "+err.Error())
	}
	if err := other.client.Patch(ctx, theirs.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"greeting":"theirs"}}`))); err != nil {
		t.Fatal(err)
	}
	if err := greeting(theirs, "theirs"); err != nil {
		v = append(v, "the other tenant's edit: "+err.Error())
	}
	small := []byte(`{"spec":{"junk":null,"greeting":"small again"}}`)
	if err := attacker.client.Patch(ctx, cr.DeepCopy(), client.RawPatch(types.MergePatchType, small)); err != nil {
		t.Fatal(err)
	}
	if err := greeting(cr, "small again"); err != nil {
		v = append(v, "the spec made small again was not reconciled: "+err.Error())
	}
	if p.Exited() {
		v = append(v, "the manager exited")
	}
	report(t, v)
}

// lastWriter names the field manager of obj's latest write, as its managedFields say.
func lastWriter(obj client.Object) string {
	var name string
	var at time.Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && !f.Time.Time.Before(at) {
			name, at = f.Manager+" "+f.Subresource, f.Time.Time
		}
	}
	return name
}

// greeting waits until the ConfigMap that cr's release of the lookup test chart renders
// greets with want.
func greeting(cr *unstructured.Unstructured, want string) error {
	return framework.Poll(context.Background(), time.Minute, func(ctx context.Context) error {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: cr.GetNamespace(), Name: cr.GetName() + "-settings"}, cm); err != nil {
			return err
		}
		if cm.Data["greeting"] != want {
			return fmt.Errorf("%s/%s-settings greets %q, want %q", cr.GetNamespace(), cr.GetName(), cm.Data["greeting"], want)
		}
		return nil
	})
}

// warningEvent waits for a Warning Event on cr with reason whose message holds text.
func warningEvent(cr *unstructured.Unstructured, reason, text string) error {
	return framework.Poll(context.Background(), 30*time.Second, func(ctx context.Context) error {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(cr.GetNamespace())); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.UID == cr.GetUID() && e.Type == corev1.EventTypeWarning &&
				e.Reason == reason && strings.Contains(e.Message, text) {
				return nil
			}
		}
		return fmt.Errorf("no Warning Event %s on %s %s saying %q", reason, cr.GetKind(), cr.GetName(), text)
	})
}

// The annotated-ConfigMaps attack: how many ConfigMaps a namespace editor makes, each with
// annotations near the 256 KiB the API server allows an object.
const (
	annotatedConfigMaps = 300
	annotatedBytes      = 250 << 10
)

// maxAnnotatedRise bounds what the annotated ConfigMaps may add to the manager's peak memory:
// kept whole, the 73 MiB of annotations would be in its cache of ConfigMaps (that of the
// chart objects, as the pool's release renders one) and in that of valuesFrom's sources,
// each on every replica; the informers still decode each object once as it comes, and that
// garbage is most of the rise: 17-29 MiB in five runs of 2026-12-07, 187 MiB with the cached
// metadata unbounded.
const maxAnnotatedRise = 60

// A namespace editor makes hundreds of ConfigMaps with 250 KiB of annotations each, while
// the manager watches ConfigMaps twice (the sources of valuesFrom, and a chart's objects):
// neither cache keeps the annotations, so its peak memory rises by a small part of what they
// weigh, it stays up, and another tenant's edit is served.
func TestAnnotatedConfigMapsDoNotExhaustTheManager(t *testing.T) {
	attacker, other, _, theirs := twoTenants(t)
	attacker.mayEditPools(t)
	newPool(t, attacker.client, attacker.ns, "p") // its release renders a ConfigMap: the manager watches them
	ctx := context.Background()
	resetPeak(t, manager.Pid())
	before := peakRSS(t, manager.Pid())
	padding := strings.Repeat("a", annotatedBytes)
	for i := range annotatedConfigMaps {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: fmt.Sprintf("annotated-%d", i),
			Annotations: map[string]string{"padding": padding[:annotatedBytes-i]}}}
		if err := attacker.client.Create(ctx, cm); err != nil {
			t.Fatalf("ConfigMap %d: %v", i, err)
		}
	}
	time.Sleep(5 * time.Second) // the manager's informers see them
	report(t, otherServedWithin(t, other, theirs, before, maxAnnotatedRise,
		fmt.Sprintf("%d ConfigMaps with %d KiB of annotations each", annotatedConfigMaps, annotatedBytes>>10)))
}
