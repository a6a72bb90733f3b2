package faults

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// pendingRevision is a release revision seen pending after a kill, before the restart.
type pendingRevision struct {
	name    string
	version int
	status  string
}

func (p pendingRevision) String() string {
	return fmt.Sprintf("%s v%d %s", p.name, p.version, p.status)
}

// crasher kills the manager in the middle of waves of work and restarts it.
type crasher struct {
	t       *testing.T
	op      *operator
	ns      string
	manager *proc
	rng     *rand.Rand
	kills   int
	pending []pendingRevision // every revision seen pending after a kill
}

// progress counts the CRs of a wave that are done: those in want at their spec, and those
// in gone deleted.
func (c *crasher) progress(ctx context.Context, want map[string]int64, gone []string) (int, error) {
	s, err := snapshot(ctx, c.ns, appService)
	if err != nil {
		return 0, err
	}
	done := 0
	present := map[string]bool{}
	for _, cr := range s.crs {
		present[cr.GetName()] = true
		if n, ok := want[cr.GetName()]; ok && appService.replicas(cr) == n && s.converged(cr) == nil {
			done++
		}
	}
	for _, name := range gone {
		if !present[name] {
			done++
		}
	}
	return done, nil
}

// wave waits for kills points of the wave's progress, evenly spread before its end, and kills
// the manager at each (after a random few milliseconds more), then restarts it.
func (c *crasher) wave(kills int, want map[string]int64, gone []string) {
	c.t.Helper()
	total := len(want) + len(gone)
	for i := 1; i <= kills; i++ {
		mark := total * i / (kills + 1)
		framework.Eventually(c.t, convergeTimeout(), func(ctx context.Context) error {
			done, err := c.progress(ctx, want, gone)
			if err != nil {
				return err
			}
			if done < mark {
				return fmt.Errorf("wave at %d of %d, waiting for %d", done, total, mark)
			}
			return nil
		})
		time.Sleep(time.Duration(c.rng.Intn(300)) * time.Millisecond)
		c.killAndRestart(fmt.Sprintf("at %d/%d of the wave", mark, total))
	}
}

// watchPending watches the namespace's release Secrets that are pending.
func (c *crasher) watchPending() watch.Interface {
	c.t.Helper()
	w, err := env.Clientset.CoreV1().Secrets(c.ns).Watch(context.Background(), metav1.ListOptions{
		LabelSelector: "owner=helm,status in (pending-install,pending-upgrade,pending-rollback)",
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return w
}

// killOnPending kills and restarts the manager as soon as w reports a release Secret: a Helm
// operation has written its pending revision and not yet its outcome.
func (c *crasher) killOnPending(w watch.Interface) {
	c.t.Helper()
	defer w.Stop()
	timeout := time.After(convergeTimeout())
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				c.t.Fatal("the watch of pending release Secrets closed")
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			secret, _ := ev.Object.(*corev1.Secret)
			if secret == nil {
				continue
			}
			c.killAndRestart(fmt.Sprintf("when %s was seen %s", secret.Name, secret.Labels["status"]))
			return
		case <-timeout:
			c.t.Fatalf("no release went pending within %s", convergeTimeout())
		}
	}
}

// killAndRestart SIGKILLs the manager, notes the releases it left pending, starts a new
// manager, and waits until it has repaired those releases.
func (c *crasher) killAndRestart(when string) {
	c.t.Helper()
	c.manager.Kill()
	c.kills++
	ctx := context.Background()
	rels, err := releases(ctx, c.ns)
	if err != nil {
		c.t.Fatal(err)
	}
	var left []pendingRevision
	for name, revs := range rels {
		for _, r := range revs {
			if release.Status(r.status).IsPending() {
				left = append(left, pendingRevision{name: name, version: r.version, status: r.status})
			}
		}
	}
	c.t.Logf("kill %d %s: releases left pending: %v", c.kills, when, left)
	c.pending = append(c.pending, left...)
	c.manager = c.op.manager()
	for _, p := range left {
		c.waitRepaired(p)
	}
}

// waitRepaired waits until the revision left pending is marked failed (and maybe superseded
// since, by the retry) or its release uninstalled (when its CR was being deleted), and an
// Event on the CR says what was done.
func (c *crasher) waitRepaired(p pendingRevision) {
	c.t.Helper()
	wantEvent := fmt.Sprintf("release %s revision %d was left %s by an interrupted operation; marked failed and retried", p.name, p.version, p.status)
	framework.Eventually(c.t, convergeTimeout(), func(ctx context.Context) error {
		rels, err := releases(ctx, c.ns)
		if err != nil {
			return err
		}
		for _, r := range rels[p.name] {
			if r.version != p.version {
				continue
			}
			rel, err := r.decoded()
			if err != nil {
				return err
			}
			if release.Status(r.status).IsPending() || !strings.Contains(rel.Info.Description, "marked failed by warpdrive-operator") {
				return fmt.Errorf("%s: revision %d is %s (%q), want it marked failed", p.name, p.version, r.status, rel.Info.Description)
			}
		}
		evs, err := events(ctx, c.ns, p.name, "PendingReleaseRepaired")
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Message == wantEvent && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no Event %q on %s (%d PendingReleaseRepaired Events)", wantEvent, p.name, len(evs))
	})
}

// TestCrashMidOperation: the manager is SIGKILLed again and again while it installs,
// upgrades and uninstalls releases, and restarted each time. At least one kill leaves a
// release pending (the test kills again until one does, boundedly); the restarted manager
// marks it failed with an Event and upgrades it. At the end every CR is at its spec with
// exactly one deployed release, deleted CRs are gone with their releases and objects, and
// nothing else is left. The stock helm-operator leaves such a release pending for ever
// (WARPDRIVE_FAULTS_OPERATOR=stock).
func TestCrashMidOperation(t *testing.T) {
	n, kills := size(100, 200), size(6, 10)
	op := newOperator(t)
	c := &crasher{t: t, op: op, ns: env.Namespace(t), manager: op.manager(), rng: rand.New(rand.NewSource(time.Now().UnixNano()))}
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("app-%03d", i) }

	t.Logf("wave 1: %d installs, %d kills", n, kills)
	want := map[string]int64{}
	for i := range n {
		env.Create(t, appService.newCR(c.ns, name(i), 1))
		want[name(i)] = 1
	}
	c.wave(kills, want, nil)

	t.Logf("wave 2: %d upgrades, %d kills", n, kills)
	for i := range n {
		c.edit(name(i), 2)
		want[name(i)] = 2
	}
	c.wave(kills, want, nil)

	t.Logf("wave 3: %d uninstalls, %d installs, %d upgrades, %d kills", n/2, n/2, n-n/2, kills)
	var gone []string
	for i := range n / 2 {
		cr := appService.newCR(c.ns, name(i), 0)
		if err := env.Client.Delete(ctx, cr); err != nil {
			t.Fatal(err)
		}
		delete(want, name(i))
		gone = append(gone, name(i))
	}
	for i := n; i < n+n/2; i++ {
		env.Create(t, appService.newCR(c.ns, name(i), 1))
		want[name(i)] = 1
	}
	for i := n / 2; i < n; i++ {
		c.edit(name(i), 0)
		want[name(i)] = 0
	}
	c.wave(kills, want, gone)

	// Those kills land inside a Helm operation only by chance: until one has (boundedly),
	// run further waves of upgrades and kill the moment a watch sees a release go pending,
	// so that the repair is always exercised.
	for extra := 0; len(c.pending) == 0 && extra < 10; extra++ {
		t.Logf("no release left pending yet: an extra wave of %d upgrades, killed when one goes pending", len(want))
		w := c.watchPending()
		for name, n := range want {
			c.edit(name, (n+1)%3) // 0 -> 1 -> 2 -> 0: always a change
			want[name] = (n + 1) % 3
		}
		c.killOnPending(w)
	}
	if len(c.pending) == 0 {
		t.Fatalf("none of %d kills landed inside a Helm operation: the repair was not exercised", c.kills)
	}
	t.Logf("%d kills, %d releases left pending and repaired: %v", c.kills, len(c.pending), c.pending)

	s := waitConverged(t, c.ns, appService)
	expectExactly(t, c.ns, s, want)
}

// edit sets the replicas of AppService name.
func (c *crasher) edit(name string, n int64) {
	c.t.Helper()
	if err := appService.setReplicas(context.Background(), appService.newCR(c.ns, name, n), n); err != nil {
		c.t.Fatal(err)
	}
}

// expectExactly checks that namespace ns holds exactly the AppServices of want (name ->
// replicas), converged (s), each with one release whose Secrets its CR owns, and no other
// release, Deployment or Service.
func expectExactly(t testing.TB, ns string, s *state, want map[string]int64) {
	t.Helper()
	ctx := context.Background()
	var names []string
	uids := map[string]string{}
	for _, cr := range s.crs {
		names = append(names, cr.GetName())
		uids[cr.GetName()] = string(cr.GetUID())
		if n := appService.replicas(cr); n != want[cr.GetName()] {
			t.Errorf("AppService %s has %d replicas, want %d", cr.GetName(), n, want[cr.GetName()])
		}
	}
	wantNames := slices.Sorted(maps.Keys(want))
	slices.Sort(names)
	if !slices.Equal(names, wantNames) {
		t.Errorf("AppServices %v, want exactly %v", names, wantNames)
	}
	if got := slices.Sorted(maps.Keys(s.releases)); !slices.Equal(got, wantNames) {
		t.Errorf("releases %v, want exactly one per AppService %v", got, wantNames)
	}
	for name, revs := range s.releases {
		for _, r := range revs {
			if owner := controllerUID(&r.secret); owner != uids[name] {
				t.Errorf("release %s revision %d: Secret owned by %q, want the AppService %s (%s)", name, r.version, owner, name, uids[name])
			}
		}
	}
	var deployments appsv1.DeploymentList
	var services corev1.ServiceList
	if err := env.Client.List(ctx, &deployments, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.List(ctx, &services, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var gotDeployments, gotServices, wantDeployments []string
	for _, d := range deployments.Items {
		gotDeployments = append(gotDeployments, d.Name)
	}
	for _, svc := range services.Items {
		gotServices = append(gotServices, svc.Name)
	}
	for _, name := range wantNames {
		wantDeployments = append(wantDeployments, name+"-app")
	}
	slices.Sort(gotDeployments)
	slices.Sort(gotServices)
	if !slices.Equal(gotDeployments, wantDeployments) {
		t.Errorf("Deployments %v, want exactly %v", gotDeployments, wantDeployments)
	}
	if !slices.Equal(gotServices, wantNames) {
		t.Errorf("Services %v, want exactly %v", gotServices, wantNames)
	}
}

// controllerUID is the uid of the controller owner of obj, or "".
func controllerUID(obj metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return string(ref.UID)
	}
	return ""
}
