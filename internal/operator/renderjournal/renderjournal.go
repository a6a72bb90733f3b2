package renderjournal

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// The render journal is how a CR that kills the manager (a render past what the render bounds
// catch: an OOM kill, a panic) stops being the first thing the next leader does again. Before
// each render (install or upgrade, dry run included) the CR is added to the journal's
// in-flight set, and the render waits until a journal holding it is written to a ConfigMap
// in the operator's namespace; after the render the CR leaves the set. A leader that finds
// CRs in flight in the journal at its start knows the previous leader died while rendering
// them: each one's death count goes up, and a CR at quarantineDeaths deaths in a row is
// quarantined at its generation, refused until its owner edits it. Only the leader
// reconciles, so one journal serves both replicas. The manager's ClusterRole already grants
// get, create and update on ConfigMaps (the charts render them).

// DefaultConfigMap is the name of the journal's ConfigMap where Options.RenderJournal names none.
const DefaultConfigMap = "warpdrive-render-journal"

// journalDataKey is the ConfigMap's key that holds the journal (journalState, JSON).
const journalDataKey = "journal.json"

// quarantineDeaths is how many deaths in a row of the manager, each while the CR was being
// rendered, quarantine it: one death may be another CR's doing, or the node's.
const quarantineDeaths = 2

// journalFlushEvery bounds how long a finished render stays in flight in the written journal:
// finished renders are written with the next render's write, or by then. A render finished
// but still written as in flight when the manager dies counts a death it did not cause.
const journalFlushEvery = 5 * time.Second

// journalEntry names one CR at one generation.
type journalEntry struct {
	Kind       string    `json:"kind"` // group and kind, as schema.GroupKind prints them
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	Generation int64     `json:"generation"`
}

func (e journalEntry) key() string { return e.Kind + "/" + e.Namespace + "/" + e.Name }

func entryOf(cr client.Object) journalEntry {
	return journalEntry{Kind: cr.GetObjectKind().GroupVersionKind().GroupKind().String(),
		Namespace: cr.GetNamespace(), Name: cr.GetName(), UID: cr.GetUID(), Generation: cr.GetGeneration()}
}

// journalDeath is a CR's count of the manager's deaths in a row while rendering it.
type journalDeath struct {
	journalEntry
	Deaths      int  `json:"deaths"`
	Quarantined bool `json:"quarantined,omitempty"`
}

// journalState is what the ConfigMap holds.
type journalState struct {
	InFlight []journalEntry `json:"inFlight"`
	Deaths   []journalDeath `json:"deaths,omitempty"`
}

// journalStore reads and writes the journal; ConfigMapStore in the cluster.
type journalStore interface {
	load(ctx context.Context) (journalState, error)
	save(ctx context.Context, s journalState) error
}

// journalBatch is one write of the journal that renders wait for: every render that enters
// while a write is under way shares the next one (group commit).
type journalBatch struct {
	done chan struct{}
	err  error
}

// Journal is the journal of one manager, shared by every kind; a Runnable that loads it
// once this process leads and writes it until the manager stops.
type Journal struct {
	store  journalStore
	loaded chan struct{} // closed once the journal is loaded: renders wait for it
	wake   chan struct{} // a render entered and waits for a write
	every  time.Duration // how often finished renders are written at the latest

	mu       sync.Mutex
	inFlight map[string]journalEntry
	renders  map[string]int // renders in progress by key: a CR's dry run and upgrade may overlap its own
	deaths   map[string]journalDeath
	pending  *journalBatch // the next write, if a render waits for it
	dirty    bool          // a render finished or a count changed since the last write
	stopped  bool          // the manager stopped: nothing more is written
}

// New is an empty journal kept in store (ConfigMapStore in the cluster): Setup makes one per
// manager, adds it to the manager as a Runnable and hands it to every kind's pipeline.
func New(store journalStore) *Journal {
	return &Journal{store: store, loaded: make(chan struct{}), wake: make(chan struct{}, 1), every: journalFlushEvery,
		inFlight: map[string]journalEntry{}, renders: map[string]int{}, deaths: map[string]journalDeath{}}
}

// NeedLeaderElection: only the leader renders, and the journal is the leader's.
func (*Journal) NeedLeaderElection() bool { return true }

// Start loads the journal, counts the previous leader's death against the CRs it was
// rendering, and writes the journal until ctx ends; then it writes it once more with nothing
// in flight, so that a clean stop counts no death.
func (j *Journal) Start(ctx context.Context) error {
	j.load(ctx)
	close(j.loaded)
	j.run(ctx)
	return nil
}

// load reads the journal; a journal that cannot be read is logged and started empty: the
// quarantine is lost, not every render stopped.
func (j *Journal) load(ctx context.Context) {
	log := ctrl.Log.WithName("render-journal")
	var s journalState
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s, err = j.store.load(ctx); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second << attempt)
	}
	if err != nil {
		log.Error(err, "reading the render journal; starting without the previous leader's")
		return
	}
	j.mu.Lock()
	for _, d := range s.Deaths {
		j.deaths[d.key()] = d
	}
	for _, e := range s.InFlight {
		d := j.deaths[e.key()]
		if d.UID != e.UID { // another object of that name: its own count
			d = journalDeath{}
		}
		d.journalEntry, d.Deaths = e, d.Deaths+1
		if d.Deaths >= quarantineDeaths {
			d.Quarantined = true
			log.Info("quarantining a CR: the manager died twice in a row while rendering it",
				"kind", e.Kind, "namespace", e.Namespace, "name", e.Name, "generation", e.Generation)
		}
		j.deaths[e.key()] = d
	}
	j.setGauge()
	st := j.snapshot()
	j.mu.Unlock()
	// Written at once: a death before this leader's first write must not count again.
	if err := j.store.save(ctx, st); err != nil {
		log.Error(err, "writing the render journal")
		j.mu.Lock()
		j.dirty = true
		j.mu.Unlock()
	}
}

// run writes the journal whenever a render waits for it, and finished renders at the
// latest every j.every, until ctx ends.
func (j *Journal) run(ctx context.Context) {
	tick := time.NewTicker(j.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			j.stop()
			return
		case <-j.wake:
			j.write(ctx)
		case <-tick.C:
			j.mu.Lock()
			dirty := j.dirty
			j.mu.Unlock()
			if dirty {
				j.write(ctx)
			}
		}
	}
}

func (j *Journal) write(ctx context.Context) {
	j.mu.Lock()
	b := j.pending
	j.pending, j.dirty = nil, false
	st := j.snapshot()
	j.mu.Unlock()
	err := j.store.save(ctx, st)
	if err != nil {
		ctrl.Log.WithName("render-journal").Error(err, "writing the render journal; rendering unrecorded")
		j.mu.Lock()
		j.dirty = true
		j.mu.Unlock()
	}
	if b != nil {
		b.err = err
		close(b.done)
	}
}

// stop writes the journal with nothing in flight: the renders still running finish within
// the manager's graceful shutdown, and a death after it is not theirs.
func (j *Journal) stop() {
	j.mu.Lock()
	j.stopped = true
	b := j.pending
	j.pending = nil
	st := j.snapshot()
	st.InFlight = nil
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := j.store.save(ctx, st); err != nil {
		ctrl.Log.WithName("render-journal").Error(err, "writing the render journal at a clean stop")
	}
	if b != nil {
		close(b.done)
	}
}

// enter is called before a render of cr: a quarantined CR at the generation it was
// quarantined at is refused, terminally; else cr is in flight once the journal that says so
// is written, and done takes it out. A journal that cannot be written does not stop the render.
func (j *Journal) enter(cr client.Object) (done func(), err error) {
	<-j.loaded
	e := entryOf(cr)
	k := e.key()
	j.mu.Lock()
	if d, ok := j.deaths[k]; ok && d.Quarantined {
		if d.UID == e.UID && d.Generation == e.Generation {
			j.mu.Unlock()
			return nil, refusal.Refuse(statuscontract.Failure{Reason: statuscontract.ReasonQuarantined, Step: "render", Terminal: true,
				Message: fmt.Sprintf("quarantined: the manager died twice in a row while rendering generation %d of this CR; an edit of its spec lifts the quarantine", e.Generation)})
		}
		delete(j.deaths, k) // edited, or another object of that name
		j.dirty = true
		j.setGauge()
	}
	if j.stopped {
		j.mu.Unlock()
		return func() {}, nil
	}
	j.inFlight[k] = e
	j.renders[k]++
	b := j.pending
	if b == nil {
		b = &journalBatch{done: make(chan struct{})}
		j.pending = b
	}
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default: // the writer is already woken
	}
	<-b.done
	return func() { j.finish(k) }, nil
}

// finish takes a render of the CR of key k out of flight: it ended without a death, so the
// CR's count starts again.
func (j *Journal) finish(k string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.renders[k]--; j.renders[k] <= 0 {
		delete(j.renders, k)
		delete(j.inFlight, k)
	}
	if d, ok := j.deaths[k]; ok && !d.Quarantined {
		delete(j.deaths, k)
	}
	j.dirty = true
}

// forget drops what the journal holds of cr, which is being uninstalled.
func (j *Journal) forget(cr client.Object) {
	k := entryOf(cr).key()
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.deaths[k]; ok {
		delete(j.deaths, k)
		j.dirty = true
		j.setGauge()
	}
}

// snapshot is the journal as it is to be written, in a stable order; j.mu is held.
func (j *Journal) snapshot() journalState {
	var s journalState
	for _, e := range j.inFlight {
		s.InFlight = append(s.InFlight, e)
	}
	for _, d := range j.deaths {
		s.Deaths = append(s.Deaths, d)
	}
	sort.Slice(s.InFlight, func(a, b int) bool { return s.InFlight[a].key() < s.InFlight[b].key() })
	sort.Slice(s.Deaths, func(a, b int) bool { return s.Deaths[a].key() < s.Deaths[b].key() })
	return s
}

// setGauge sets the metric of quarantined CRs; j.mu is held.
func (j *Journal) setGauge() {
	n := 0
	for _, d := range j.deaths {
		if d.Quarantined {
			n++
		}
	}
	metrics.QuarantinedCRs.Set(float64(n))
}

// ConfigMapStore keeps the journal in one ConfigMap. Read from the API server (the manager's
// cache would watch every ConfigMap for it); written only by the journal's writer.
type ConfigMapStore struct {
	Reader client.Reader        // the API server, not the manager's cache
	Writer client.Client        // the manager's client
	Key    types.NamespacedName // the ConfigMap
	last   *corev1.ConfigMap    // as last read or written, for the next update
}

func (c *ConfigMapStore) load(ctx context.Context) (journalState, error) {
	var s journalState
	cm := &corev1.ConfigMap{}
	if err := c.Reader.Get(ctx, c.Key, cm); apierrors.IsNotFound(err) {
		return s, nil
	} else if err != nil {
		return s, err
	}
	c.last = cm
	if data := cm.Data[journalDataKey]; data != "" {
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			return journalState{}, fmt.Errorf("ConfigMap %s: %w", c.Key, err)
		}
	}
	return s, nil
}

func (c *ConfigMapStore) save(ctx context.Context, s journalState) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err = c.put(ctx, string(data))
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) || attempt == 2 {
			return err
		}
		c.last = nil // changed by someone else: read it again
	}
}

func (c *ConfigMapStore) put(ctx context.Context, data string) error {
	if c.last == nil {
		cm := &corev1.ConfigMap{}
		err := c.Reader.Get(ctx, c.Key, cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.Key.Namespace, Name: c.Key.Name,
				Labels: map[string]string{"app.kubernetes.io/name": "warpdrive-operator"}},
				Data: map[string]string{journalDataKey: data}}
			if err := c.Writer.Create(ctx, cm); err != nil {
				return err
			}
			c.last = cm
			return nil
		}
		if err != nil {
			return err
		}
		c.last = cm
	}
	cm := c.last.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[journalDataKey] = data
	if err := c.Writer.Update(ctx, cm); err != nil {
		return err
	}
	c.last = cm
	return nil
}
