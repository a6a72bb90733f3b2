package faults

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// maxHistory is the manager's default --max-release-history.
const maxHistory = 3

// churn makes random creates, edits and deletes of CRs of every kind in a set of namespaces,
// without waiting for the operator.
type churn struct {
	namespaces []string
	mu         sync.Mutex
	counts     map[string]int
}

func (c *churn) count(what string) {
	c.mu.Lock()
	c.counts[what]++
	c.mu.Unlock()
}

// cycle creates a CR where there is none, and edits or deletes the one there is: a few names
// per kind and namespace, so that names are reused, also while their CR is being deleted.
func (c *churn) cycle(ctx context.Context, rng *rand.Rand) error {
	ns := c.namespaces[rng.Intn(len(c.namespaces))]
	k := allKinds[rng.Intn(len(allKinds))]
	name := fmt.Sprintf("%s-%d", strings.ToLower(k.gvk.Kind[:4]), rng.Intn(4))
	replicas := k.minReplicas + rng.Int63n(3-k.minReplicas)
	cr := k.newCR(ns, name, replicas)
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(k.gvk)
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got)
	switch {
	case apierrors.IsNotFound(err):
		err = env.Client.Create(ctx, cr)
		if apierrors.IsAlreadyExists(err) {
			c.count("create raced")
			return nil
		}
		c.count("create")
	case err != nil:
		return err
	case got.GetDeletionTimestamp() != nil:
		c.count("skip: being deleted")
	case rng.Intn(3) > 0:
		err = k.setReplicas(ctx, got, replicas)
		c.count("edit")
	default:
		err = env.Client.Delete(ctx, got)
		c.count("delete")
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted or changed under us: churn
	}
	return err
}

// TestChurn: random create/edit/delete cycles of every kind over several namespaces while the
// operator runs, one CR upgraded more times than the history keeps, then a third of the
// namespaces deleted with their CRs in them. At the end: every remaining CR at its spec; no
// release Secret without its CR; no object of a release (StorageClasses included) whose
// release or CR is gone; no CR stuck with its finalizer; at most maxHistory revisions per release.
func TestChurn(t *testing.T) {
	cycles, nsCount, workers := size(1000, 5000), size(10, 20), 4
	op := newOperator(t)
	manager := op.manager()
	op.sidecar()

	c := &churn{counts: map[string]int{}}
	for range nsCount {
		c.namespaces = append(c.namespaces, env.Namespace(t))
	}

	// One AppService upgraded one revision at a time, more times than the history keeps.
	hot := appService.newCR(c.namespaces[0], "hot", 0)
	env.Create(t, hot)
	type upgraded struct {
		last int // the release's last revision, deployed, after the last edit
		err  error
	}
	hotDone := make(chan upgraded, 1)
	go func() {
		last, err := upgradeTimes(hot, maxHistory+3)
		hotDone <- upgraded{last, err}
	}()

	t.Logf("%d cycles in %d namespaces by %d workers", cycles, nsCount, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(time.Now().UnixNano() + int64(w)))
			for range cycles / workers {
				if err := c.cycle(context.Background(), rng); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("cycles: %v", c.counts)

	// Delete a third of the namespaces (not the hot one's) with their CRs in them, among them
	// a pool each, whose StorageClass is outside the namespace. The first is deleted while
	// the manager runs, so that the namespace controller and the uninstalls race; the second
	// while it is down, so that the release Secrets are surely gone before the uninstall.
	doomed := c.namespaces[1 : 1+max(2, nsCount/3)]
	for _, ns := range doomed {
		env.Create(t, pool.newCR(ns, "doomed", 1))
	}
	for _, ns := range doomed {
		waitConverged(t, ns, pool)
	}
	deleteNamespace := func(ns string) {
		t.Logf("deleting namespace %s with CRs %v in it", ns, names(crsIn(t, ns)))
		if err := env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range doomed[2:] {
		deleteNamespace(ns)
	}
	deleteNamespace(doomed[0])
	manager.Kill()
	deleteNamespace(doomed[1])
	framework.Eventually(t, convergeTimeout(), func(ctx context.Context) error {
		rels, err := releases(ctx, doomed[1])
		if err != nil {
			return err
		}
		if len(rels) > 0 {
			return fmt.Errorf("namespace %s still has releases %v", doomed[1], slices.Sorted(maps.Keys(rels)))
		}
		if crs := crsIn(t, doomed[1]); len(crs) == 0 {
			return fmt.Errorf("namespace %s has no CRs left: the finalizers did not hold them", doomed[1])
		}
		return nil
	})
	t.Logf("namespace %s: release Secrets deleted, %d CRs held by their finalizers; restarting the manager", doomed[1], len(crsIn(t, doomed[1])))
	op.manager()
	hotResult := <-hotDone
	if hotResult.err != nil {
		t.Fatal(hotResult.err)
	}

	framework.Eventually(t, convergeTimeout(), func(ctx context.Context) error {
		for _, ns := range doomed {
			err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s not gone yet (%v); CRs left: %v", ns, err, names(crsIn(t, ns)))
			}
		}
		return nil
	})
	var remaining []string
	for _, ns := range c.namespaces {
		if !slices.Contains(doomed, ns) {
			remaining = append(remaining, ns)
			waitConverged(t, ns, allKinds...)
		}
	}
	framework.Eventually(t, convergeTimeout(), func(ctx context.Context) error {
		if l := leaks(ctx, remaining, c.namespaces); len(l) > 0 {
			return fmt.Errorf("%d leaks, e.g. %v", len(l), l[:min(5, len(l))])
		}
		return nil
	})

	rels, err := releases(context.Background(), hot.GetNamespace())
	if err != nil {
		t.Fatal(err)
	}
	// Each edit made one revision, and one more if the kill above left it pending (marked
	// failed, then retried): at least maxHistory+4 in all, of which the last maxHistory kept.
	revs, last := rels["hot"], hotResult.last
	var want []string
	for v := last - maxHistory + 1; v <= last; v++ {
		want = append(want, fmt.Sprint(v))
	}
	var got []string
	for _, r := range revs {
		got = append(got, fmt.Sprint(r.version))
	}
	if last < maxHistory+4 || !slices.Equal(got, want) {
		t.Errorf("release hot after %d upgrades: revisions %v, want the last %d of %d (at least %d)", maxHistory+3, versions(revs), maxHistory, last, maxHistory+4)
	}
}

// upgradeTimes edits cr n times, each time once the previous spec is deployed (so that no
// two edits make one upgrade), waits for the last, and returns the release's last revision.
// An edit is deployed when the release has a newer revision than before it, deployed: one
// more, or two when a kill of the manager left the first pending.
func upgradeTimes(cr *unstructured.Unstructured, n int) (int, error) {
	ctx := context.Background()
	base := 0 // the last revision deployed before the edit
	for i := 0; i <= n; i++ {
		err := framework.Poll(ctx, convergeTimeout(), func(ctx context.Context) error {
			rels, err := releases(ctx, cr.GetNamespace())
			if err != nil {
				return err
			}
			revs := rels[cr.GetName()]
			if len(revs) == 0 || revs[len(revs)-1].version <= base || revs[len(revs)-1].status != "deployed" {
				return fmt.Errorf("release %s: %v, want a revision after %d deployed", cr.GetName(), versions(revs), base)
			}
			base = revs[len(revs)-1].version
			return nil
		})
		if err != nil || i == n {
			return base, err
		}
		if err := appService.setReplicas(ctx, cr, int64((i+1)%3)); err != nil {
			return base, err
		}
	}
	return base, nil
}

// crsIn lists the CRs of every kind in ns.
func crsIn(t testing.TB, ns string) []*unstructured.Unstructured {
	t.Helper()
	s, err := snapshot(context.Background(), ns, allKinds...)
	if err != nil {
		t.Fatal(err)
	}
	return s.crs
}

func names(crs []*unstructured.Unstructured) []string {
	var out []string
	for _, cr := range crs {
		out = append(out, cr.GetKind()+"/"+cr.GetName())
	}
	return out
}

// leaks lists what the operator has left behind in the test's namespaces (all, some of which
// are deleted; remaining, those that are not): release Secrets whose CR is gone, objects of a
// release whose release or CR is gone (cluster-scoped StorageClasses included), CRs stuck
// with a deletion timestamp, releases with more revisions than the history keeps.
func leaks(ctx context.Context, remaining, all []string) []string {
	var out []string
	live := map[string]*unstructured.Unstructured{} // "ns/name" -> CR
	lastStatus := map[string]string{}               // "ns/name" -> status of the release's last revision
	for _, ns := range remaining {
		s, err := snapshot(ctx, ns, allKinds...)
		if err != nil {
			return []string{err.Error()}
		}
		uids := map[string]bool{}
		for _, cr := range s.crs {
			live[ns+"/"+cr.GetName()] = cr
			uids[string(cr.GetUID())] = true
			if cr.GetDeletionTimestamp() != nil {
				out = append(out, fmt.Sprintf("%s %s/%s stuck being deleted, finalizers %v", cr.GetKind(), ns, cr.GetName(), cr.GetFinalizers()))
			}
		}
		for name, revs := range s.releases {
			lastStatus[ns+"/"+name] = revs[len(revs)-1].status
			if len(revs) > maxHistory {
				out = append(out, fmt.Sprintf("release %s/%s keeps %d revisions", ns, name, len(revs)))
			}
			for _, r := range revs {
				if !uids[controllerUID(&r.secret)] {
					out = append(out, fmt.Sprintf("release Secret %s/%s without its CR", ns, r.secret.Name))
				}
			}
		}
	}
	objects, err := env.HelmObjects(ctx, remaining)
	if err != nil {
		return []string{err.Error()}
	}
	for _, o := range objects {
		ns, name := o.GetAnnotations()["meta.helm.sh/release-namespace"], o.GetAnnotations()["meta.helm.sh/release-name"]
		if !slices.Contains(all, ns) {
			continue // another test's
		}
		if live[ns+"/"+name] == nil || lastStatus[ns+"/"+name] != "deployed" {
			out = append(out, fmt.Sprintf("%T %s of release %s/%s, whose CR or release is gone", o, client.ObjectKeyFromObject(o), ns, name))
		}
	}
	return out
}
