package bench

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// tracker watches the Deployments and the CRs of one namespace and remembers when each first
// showed a given number of available replicas: the Deployment in its status, the CR in the
// status the sidecar writes. Watching, not polling, keeps the measurement off the apiserver.
type tracker struct {
	mu          sync.Mutex
	deployments map[string]int32               // name -> available replicas now
	deployAt    map[string]map[int32]time.Time // name -> available count -> first seen
	crAt        map[string]map[int64]time.Time // name -> status.availableReplicas -> first seen
	crs         map[string]bool
	cpu         map[string]string // name -> the pods' CPU request, once the spec is observed
	changed     chan struct{}
	stop        context.CancelFunc
}

func newTracker(cfg *rest.Config, ns string, crResource schema.GroupVersionResource) (*tracker, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &tracker{
		deployments: map[string]int32{}, deployAt: map[string]map[int32]time.Time{},
		crAt: map[string]map[int64]time.Time{}, crs: map[string]bool{}, cpu: map[string]string{},
		changed: make(chan struct{}, 1), stop: cancel,
	}
	deployInf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns)).Apps().V1().Deployments().Informer()
	_, _ = deployInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.deployment(obj.(*appsv1.Deployment), false) },
		UpdateFunc: func(_, obj any) { t.deployment(obj.(*appsv1.Deployment), false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				t.deployment(d, true)
			} else if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				t.deployment(tomb.Obj.(*appsv1.Deployment), true)
			}
		},
	})
	crInf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil).ForResource(crResource).Informer()
	_, _ = crInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.cr(obj, false) },
		UpdateFunc: func(_, obj any) { t.cr(obj, false) },
		DeleteFunc: func(obj any) { t.cr(obj, true) },
	})
	go deployInf.Run(ctx.Done())
	go crInf.Run(ctx.Done())
	toolscache.WaitForCacheSync(ctx.Done(), deployInf.HasSynced, crInf.HasSynced)
	return t, nil
}

func (t *tracker) deployment(d *appsv1.Deployment, deleted bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if deleted {
		delete(t.deployments, d.Name)
		delete(t.cpu, d.Name)
	} else {
		if c := d.Spec.Template.Spec.Containers; len(c) > 0 && d.Status.ObservedGeneration >= d.Generation {
			t.cpu[d.Name] = c[0].Resources.Requests.Cpu().String()
		}
		avail := d.Status.AvailableReplicas
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != avail {
			avail = -1 // a rollout in progress: the count is not yet of the current spec
		}
		t.deployments[d.Name] = avail
		if t.deployAt[d.Name] == nil {
			t.deployAt[d.Name] = map[int32]time.Time{}
		}
		if _, seen := t.deployAt[d.Name][avail]; !seen {
			t.deployAt[d.Name][avail] = now
		}
	}
	t.notify()
}

func (t *tracker) cr(obj any, deleted bool) {
	now := time.Now()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			u, _ = tomb.Obj.(*unstructured.Unstructured)
		}
	}
	if u == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if deleted {
		delete(t.crs, u.GetName())
	} else {
		t.crs[u.GetName()] = true
		if avail, found, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas"); found {
			if t.crAt[u.GetName()] == nil {
				t.crAt[u.GetName()] = map[int64]time.Time{}
			}
			if _, seen := t.crAt[u.GetName()][avail]; !seen {
				t.crAt[u.GetName()][avail] = now
			}
		}
	}
	t.notify()
}

func (t *tracker) notify() {
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// count is how many CRs reached a phase's goal; the tracker evaluates it under its lock.
type count func() int

// waitFor blocks until c, evaluated under the lock after every change, reaches n; or until
// timeout. It returns when it did, or when it gave up, and how many had reached the goal
// then: a phase that times out says how far it got.
func (t *tracker) waitFor(timeout time.Duration, n int, c count) (time.Time, int, bool) {
	deadline := time.After(timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		t.mu.Lock()
		done := c()
		t.mu.Unlock()
		if done >= n {
			return time.Now(), done, true
		}
		select {
		case <-t.changed:
		case <-tick.C:
		case <-deadline:
			return time.Now(), done, false
		}
	}
}

// available counts the Deployments with want replicas available for their current spec.
func (t *tracker) available(want int32) count {
	return func() int {
		done := 0
		for _, avail := range t.deployments {
			if avail == want {
				done++
			}
		}
		return done
	}
}

// withCPU counts the Deployments whose observed spec asks cpu for each pod.
func (t *tracker) withCPU(cpu string) count {
	return func() int {
		done := 0
		for _, c := range t.cpu {
			if c == cpu {
				done++
			}
		}
		return done
	}
}

// gone counts, of n CRs, those whose CR and Deployment are both deleted (kubectl's runs
// have no CRs: only their Deployments count).
func (t *tracker) gone(n int) count {
	return func() int { return n - max(len(t.crs), len(t.deployments)) }
}

// statusLatencies: for every CR, the time from its Deployment first showing want available
// replicas to the CR's status first showing them.
func (t *tracker) statusLatencies(want int32) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for name, at := range t.deployAt {
		d, ok1 := at[want]
		c, ok2 := t.crAt[name][int64(want)]
		if ok1 && ok2 {
			lat := c.Sub(d)
			if lat < 0 {
				lat = 0 // the watch events of both arrived in the other order
			}
			out = append(out, lat)
		}
	}
	return out
}
