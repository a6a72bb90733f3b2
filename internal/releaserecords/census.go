package releaserecords

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
)

// Census counts the objects of an informer by namespace: added to the manager's informer of
// release Secrets, it says where a LIST of one release's records costs more than reading them
// by name (ByNameFrom).
type Census struct {
	mu sync.RWMutex
	n  map[string]int
}

// NewCensus returns an empty census, to be added to an informer as its event handler.
func NewCensus() *Census { return &Census{n: map[string]int{}} }

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
