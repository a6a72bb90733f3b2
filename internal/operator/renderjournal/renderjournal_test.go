package renderjournal

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// testStore is a journal store that a test can kill, as the manager's death would: a dead
// store writes nothing more, not even the clean stop's journal. It counts the writes, and
// holds the next one until released if hold is set.
type testStore struct {
	journalStore
	mu      sync.Mutex
	dead    bool
	saves   int
	hold    chan struct{} // the next save waits for it to be closed
	holding chan struct{} // closed once a save waits
}

func (s *testStore) save(ctx context.Context, st journalState) error {
	s.mu.Lock()
	hold, holding := s.hold, s.holding
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		close(holding)
		<-hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errors.New("dead")
	}
	s.saves++
	return s.journalStore.save(ctx, st)
}

func (s *testStore) kill() { s.mu.Lock(); s.dead = true; s.mu.Unlock() }

func (s *testStore) writes() int { s.mu.Lock(); defer s.mu.Unlock(); return s.saves }

// journalLife is one life of the manager's journal over the ConfigMaps of c.
type journalLife struct {
	journal *Journal
	store   *testStore
	cancel  context.CancelFunc
	stopped chan struct{}
}

func startJournal(t *testing.T, c client.Client) *journalLife {
	t.Helper()
	store := &testStore{journalStore: &ConfigMapStore{Reader: c, Writer: c,
		Key: types.NamespacedName{Namespace: "warpdrive-system", Name: DefaultConfigMap}}}
	l := &journalLife{journal: New(store), store: store, stopped: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() { _ = l.journal.Start(ctx); close(l.stopped) }()
	t.Cleanup(l.die)
	<-l.journal.loaded
	return l
}

// die ends this life as an OOM kill would: nothing more is written.
func (l *journalLife) die() { l.store.kill(); l.cancel(); <-l.stopped }

// stop ends this life cleanly, as a rollout does.
func (l *journalLife) stop() { l.cancel(); <-l.stopped }

func journalClient() client.Client {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	return fake.NewClientBuilder().WithScheme(scheme).Build()
}

func journalCR(generation int64) client.Object {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("appcontroller.k8s.io/v1alpha1")
	cr.SetKind("AppService")
	cr.SetNamespace("team-a")
	cr.SetName("x")
	cr.SetUID("uid-x")
	cr.SetGeneration(generation)
	return cr
}

func deathsOf(j *Journal, cr client.Object) journalDeath {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.deaths[entryOf(cr).key()]
}

func isQuarantine(err error) bool {
	f, ok := refusal.Of(err)
	return ok && f.Reason == statuscontract.ReasonQuarantined && f.Terminal && errors.Is(err, reconcile.TerminalError(nil))
}

// A CR in flight when the manager dies counts one death at the next start, and is rendered
// again; a second death in a row quarantines it at its generation, with the metric; an edit
// of its spec lifts the quarantine.
func TestRenderJournalQuarantinesAfterTwoDeaths(t *testing.T) {
	c := journalClient()
	cr := journalCR(1)
	l := startJournal(t, c)
	if _, err := l.journal.enter(cr); err != nil { // its render never ends: the manager dies
		t.Fatal(err)
	}
	l.die()

	l = startJournal(t, c)
	if d := deathsOf(l.journal, cr); d.Deaths != 1 || d.Quarantined {
		t.Fatalf("after one death: %+v, want one death, not quarantined", d)
	}
	if _, err := l.journal.enter(cr); err != nil {
		t.Fatalf("after one death: %v, want the CR rendered again", err)
	}
	l.die()

	l = startJournal(t, c)
	if d := deathsOf(l.journal, cr); d.Deaths != 2 || !d.Quarantined || d.Generation != 1 {
		t.Fatalf("after two deaths: %+v, want quarantined at generation 1", d)
	}
	if got := testutil.ToFloat64(metrics.QuarantinedCRs); got != 1 {
		t.Errorf("warpdrive_quarantined_crs %v, want 1", got)
	}
	_, err := l.journal.enter(cr)
	if !isQuarantine(err) || !strings.Contains(err.Error(), "an edit of its spec lifts") {
		t.Fatalf("after two deaths: %v, want a terminal Quarantined refusal that says an edit lifts it", err)
	}
	done, err := l.journal.enter(journalCR(2))
	if err != nil {
		t.Fatalf("edited: %v, want the quarantine lifted", err)
	}
	done()
	if got := testutil.ToFloat64(metrics.QuarantinedCRs); got != 0 {
		t.Errorf("warpdrive_quarantined_crs %v after the edit, want 0", got)
	}
}

// A render that finishes clears the CR's count: a death, a clean render, a death is not two in
// a row. A clean stop counts no death for the renders in flight.
func TestRenderJournalFinishedRenderAndCleanStopCountNone(t *testing.T) {
	c := journalClient()
	cr, other := journalCR(1), journalCR(1)
	other.SetName("y")
	l := startJournal(t, c)
	if _, err := l.journal.enter(cr); err != nil {
		t.Fatal(err)
	}
	l.die()

	l = startJournal(t, c)
	done, err := l.journal.enter(cr)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if _, err := l.journal.enter(other); err != nil { // writes the finished render with it
		t.Fatal(err)
	}
	l.die()

	l = startJournal(t, c)
	if d := deathsOf(l.journal, cr); d.Deaths != 0 {
		t.Errorf("a finished render between two deaths: %+v, want no count", d)
	}
	if d := deathsOf(l.journal, other); d.Deaths != 1 {
		t.Errorf("in flight at a death: %+v, want one", d)
	}
	if _, err := l.journal.enter(cr); err != nil { // in flight at a clean stop
		t.Fatal(err)
	}
	l.stop()

	l = startJournal(t, c)
	if d := deathsOf(l.journal, cr); d.Deaths != 0 {
		t.Errorf("in flight at a clean stop: %+v, want no death", d)
	}
}

// Renders that enter while the journal is being written share the next write.
func TestRenderJournalGroupCommit(t *testing.T) {
	l := startJournal(t, journalClient())
	base := l.store.writes() // the load's
	hold, holding := make(chan struct{}), make(chan struct{})
	l.store.mu.Lock()
	l.store.hold, l.store.holding = hold, holding
	l.store.mu.Unlock()

	var wg sync.WaitGroup
	enter := func(name string) {
		defer wg.Done()
		cr := journalCR(1)
		cr.SetName(name)
		done, err := l.journal.enter(cr)
		if err != nil {
			t.Error(err)
			return
		}
		done()
	}
	wg.Add(1)
	go enter("first")
	<-holding // the first render's write is under way
	names := []string{"a", "b", "c", "d", "e"}
	wg.Add(len(names))
	for _, n := range names {
		go enter(n)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		l.journal.mu.Lock()
		n := len(l.journal.inFlight)
		l.journal.mu.Unlock()
		if n == 1+len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d renders in flight, want %d", n, 1+len(names))
		}
	}
	close(hold)
	wg.Wait()
	if got := l.store.writes() - base; got != 2 {
		t.Errorf("%d writes for six renders, five of them concurrent, want 2", got)
	}
}

// renderingActions renders as Helm's install and upgrade do: the call's options applied, then
// the post-renderers run over the manifests; then, before it returns, what follows the render
// (the record, the objects applied), where it reports whether the CR is still in flight.
type renderingActions struct {
	helmclient.ActionInterface // nil: only Install is called
	inFlight                   func() (before, after bool)
	before                     bool
	after                      bool
}

func (r *renderingActions) Install(_, _ string, _ *chart.Chart, _ map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	i := &action.Install{}
	for _, o := range opts {
		if err := o(i); err != nil {
			return nil, err
		}
	}
	r.before, _ = r.inFlight()
	if _, err := i.PostRenderer.Run(bytes.NewBufferString("kind: ConfigMap")); err != nil {
		return nil, err
	}
	_, r.after = r.inFlight()
	return nil, nil
}

// A CR is in the journal's flight while Helm renders it, not while Helm applies what it
// rendered: a manager killed then did not die of the CR's templates.
func TestRenderJournalEndsAtTheRender(t *testing.T) {
	l := startJournal(t, journalClient())
	defer l.stop()
	cr := journalCR(1)
	k := entryOf(cr).key()
	held := func() bool {
		l.journal.mu.Lock()
		defer l.journal.mu.Unlock()
		_, ok := l.journal.inFlight[k]
		return ok
	}
	engine := &renderingActions{inFlight: func() (bool, bool) { h := held(); return h, h }}
	c := journalingClient{ActionInterface: engine, journal: l.journal, cr: cr}
	if _, err := c.Install("x", "team-a", nil, nil); err != nil {
		t.Fatal(err)
	}
	if !engine.before || engine.after {
		t.Errorf("in flight before the post-render: %v, after it: %v; want true, false", engine.before, engine.after)
	}
	if held() {
		t.Error("still in flight after the install")
	}
}
