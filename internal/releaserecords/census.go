package releaserecords

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
)

// DefaultSecretsPerGET is how many Secrets of a namespace the API server filters, in a LIST
// by label, for the cost of one GET (see the package's doc).
const DefaultSecretsPerGET = 1300

// Census counts the objects of an informer by namespace: added to the manager's informer of
// release Secrets, it says where a LIST of one release's records costs the API server less
// than reading them by name.
type Census struct {
	secretsPerGET int

	mu sync.RWMutex
	n  map[string]int
}

// NewCensus returns an empty census, to be added to an informer as its event handler, for an
// API server whose GET costs what a LIST spends on secretsPerGET Secrets (0: reading by name
// is always cheaper).
func NewCensus(secretsPerGET int) *Census {
	return &Census{secretsPerGET: secretsPerGET, n: map[string]int{}}
}

// listCheaper says whether a LIST in namespace ns costs less than reading by name a release
// of which the cache holds records records: those and the look for the next, a GET each. A
// nil census never says so.
func (c *Census) listCheaper(ns string, records int) bool {
	return c != nil && c.In(ns) < c.secretsPerGET*(records+1)
}

// In is the number of objects in namespace ns.
func (c *Census) In(ns string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.n[ns]
}

func (c *Census) add(obj any, delta int) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[m.GetNamespace()] += delta
	if c.n[m.GetNamespace()] <= 0 {
		delete(c.n, m.GetNamespace())
	}
}

func (c *Census) OnAdd(obj any, _ bool) { c.add(obj, 1) }
func (c *Census) OnUpdate(_, _ any)     {}
func (c *Census) OnDelete(obj any)      { c.add(obj, -1) }
