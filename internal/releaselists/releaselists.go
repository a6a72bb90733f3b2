// Package releaselists gives Helm's release storage a Secrets client that answers a list of a
// release's records it has already answered from that answer, until the next write.
//
// Helm's Secrets driver finds a release's records by listing the Secrets of the namespace
// with a label selector, and one reconcile asks the same question many times: the
// reconciler's look-up of the release, the dry-run upgrade's last and deployed revisions,
// the real upgrade's, the rollout gate's and the release guard's look-ups, each a LIST.
// Through a wave that is 8 LISTs per CR, and a label selector is not indexed: the API server
// filters every Secret of the namespace for each, two or more per CR, so their cost grows
// with the fleet (docs/bench/findings.md, "Helm's Secret lists memoized per reconcile").
//
// A list narrower than one remembered (the release's deployed revision, after its records) is
// answered from the wider one, filtered.
//
// A Memo lives as long as the storage driver it serves, one action configuration, that is
// one reconcile. Every write through it (create, update, patch, apply, delete) forgets every
// answer, so the storage reads its own writes as before. What it does not see is a write by
// another client during the reconcile: a reader that must see those from some point on (one
// that has just taken the lock such writers hold, as the release guard does) calls Forget.
package releaselists

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Memo is a Secrets client whose lists are remembered until its next write.
type Memo struct {
	corev1client.SecretInterface

	mu    sync.Mutex
	lists map[selectors]*corev1.SecretList
}

// selectors are what a remembered list asked for.
type selectors struct{ label, field string }

// New wraps c.
func New(c corev1client.SecretInterface) *Memo {
	return &Memo{SecretInterface: c, lists: map[selectors]*corev1.SecretList{}}
}

// List answers from memory a list asked before since the last write, or one narrower than it
// (see narrowed); a list that pages or asks for a resourceVersion goes to the API server every
// time. The caller gets its own copy.
func (m *Memo) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	if opts.Limit != 0 || opts.Continue != "" || opts.ResourceVersion != "" || opts.Watch || opts.SendInitialEvents != nil {
		return m.SecretInterface.List(ctx, opts)
	}
	key := selectors{label: opts.LabelSelector, field: opts.FieldSelector}
	m.mu.Lock()
	l, ok := m.lists[key]
	if !ok {
		l, ok = m.narrowed(key)
	}
	m.mu.Unlock()
	if ok {
		return l.DeepCopy(), nil
	}
	l, err := m.SecretInterface.List(ctx, opts)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.lists[key] = l.DeepCopy()
	m.mu.Unlock()
	return l, nil
}

// narrowed answers key from a remembered list whose label selector asks for some of what
// key's does, and no more, with the same field selector: its Secrets that key's selector
// matches. m.mu is held.
//
// Why: Helm's storage asks for a release's deployed revision (labels name, owner and status)
// after its records (name and owner), and so does its pruning of the history, which every
// upgrade of a release with a full history makes before its Deployment. The answer is in the
// records already listed; asking the API server again is a LIST more on the way of each
// tenant's edit, on an API server an edit wave loads (docs/bench/memory.md, "An edit wave
// whose sidecar syncs at once on what Ready waits for (twenty-fifth)").
func (m *Memo) narrowed(key selectors) (*corev1.SecretList, bool) {
	want, err := labels.Parse(key.label)
	if err != nil {
		return nil, false
	}
	asked := map[string]bool{}
	reqs, _ := want.Requirements()
	for _, r := range reqs {
		asked[r.String()] = true
	}
	for k, l := range m.lists {
		if k.field != key.field {
			continue
		}
		have, err := labels.Parse(k.label)
		if err != nil {
			continue
		}
		haveReqs, _ := have.Requirements()
		wider := true
		for _, r := range haveReqs {
			wider = wider && asked[r.String()]
		}
		if !wider {
			continue
		}
		out := &corev1.SecretList{ListMeta: l.ListMeta}
		for i := range l.Items {
			if want.Matches(labels.Set(l.Items[i].Labels)) {
				out.Items = append(out.Items, l.Items[i])
			}
		}
		return out, true
	}
	return nil, false
}

// Forget drops every list remembered, so that the next list of each reads the API server.
// A write calls it before and after itself: a list running alongside the write may have
// read the Secrets before it.
func (m *Memo) Forget() {
	m.mu.Lock()
	clear(m.lists)
	m.mu.Unlock()
}

func (m *Memo) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	m.Forget()
	defer m.Forget()
	return m.SecretInterface.Create(ctx, s, opts)
}

func (m *Memo) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	m.Forget()
	defer m.Forget()
	return m.SecretInterface.Update(ctx, s, opts)
}

func (m *Memo) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	m.Forget()
	defer m.Forget()
	return m.SecretInterface.Delete(ctx, name, opts)
}

func (m *Memo) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	m.Forget()
	defer m.Forget()
	return m.SecretInterface.DeleteCollection(ctx, opts, listOpts)
}

func (m *Memo) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Secret, error) {
	m.Forget()
	defer m.Forget()
	return m.SecretInterface.Patch(ctx, name, pt, data, opts, subresources...)
}

func (m *Memo) Apply(ctx context.Context, s *applycorev1.SecretApplyConfiguration, opts metav1.ApplyOptions) (*corev1.Secret, error) {
	m.Forget()
	defer m.Forget()
	return m.SecretInterface.Apply(ctx, s, opts)
}
