package framework

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Version is one version of an object seen by a watch, with its resourceVersion (an etcd
// revision on the local cluster, which orders versions across resources). Obj is nil once
// the object is deleted.
type Version struct {
	RV  int64
	Obj *unstructured.Unstructured
}

// VersionLog records every version of the objects of one resource, from a watch that
// resumes where it was cut: the status contract and rollout tests judge what kstatus, kubectl
// wait or a wave would have seen at each of them.
type VersionLog struct {
	what       string
	namespaces map[string]bool
	cancel     context.CancelFunc
	done       chan struct{}

	mu       sync.Mutex
	versions []Version
	errs     []string
}

// Record starts recording gvr in the namespaces until Stop (or the end of t): every object,
// or with name the object of that name only (which need not exist yet).
func (e *Env) Record(t testing.TB, gvr schema.GroupVersionResource, name string, namespaces ...string) *VersionLog {
	t.Helper()
	dc, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	var ri dynamic.ResourceInterface = dc.Resource(gvr)
	if len(namespaces) == 1 {
		ri = dc.Resource(gvr).Namespace(namespaces[0])
	}
	var selector string
	if name != "" {
		selector = fields.OneTermEqualSelector("metadata.name", name).String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &VersionLog{what: fmt.Sprintf("%s %s in %v", gvr.Resource, name, namespaces), cancel: cancel,
		done: make(chan struct{}), namespaces: map[string]bool{}}
	for _, ns := range namespaces {
		l.namespaces[ns] = true
	}
	list, err := ri.List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for i := range list.Items {
		l.add(watch.Added, &list.Items[i])
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = selector
		return ri.Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), lw)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(l.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified, watch.Deleted:
					if u, ok := ev.Object.(*unstructured.Unstructured); ok {
						l.add(ev.Type, u)
					}
				case watch.Error:
					l.mu.Lock()
					l.errs = append(l.errs, fmt.Sprint(ev.Object))
					l.mu.Unlock()
				}
			}
		}
	}()
	t.Cleanup(l.Stop)
	return l
}

func (l *VersionLog) add(typ watch.EventType, u *unstructured.Unstructured) {
	if !l.namespaces[u.GetNamespace()] {
		return
	}
	rv, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs = append(l.errs, fmt.Sprintf("resourceVersion %q is not an integer (not an etcd revision?)", u.GetResourceVersion()))
		return
	}
	v := Version{RV: rv, Obj: u}
	if typ == watch.Deleted {
		v.Obj = nil
	}
	l.versions = append(l.versions, v)
}

// Stop ends the recording; it may be called more than once.
func (l *VersionLog) Stop() {
	l.cancel()
	<-l.done
}

// All are the versions recorded so far, by resourceVersion.
func (l *VersionLog) All() []Version {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]Version(nil), l.versions...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].RV < out[j].RV })
	return out
}

// StopAt waits until the log has a version at or after rv, stops it and returns what it
// has, failing t if the watch reported errors or delivered versions out of order.
func (l *VersionLog) StopAt(t testing.TB, rv int64, timeout time.Duration) []Version {
	t.Helper()
	Eventually(t, timeout, func(context.Context) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if n := len(l.versions); n > 0 && l.versions[n-1].RV >= rv {
			return nil
		}
		return fmt.Errorf("the watch of %s has not seen resourceVersion %d yet (errors: %v)", l.what, rv, l.errs)
	})
	l.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) > 0 {
		t.Errorf("the watch of %s: %v", l.what, l.errs)
	}
	out := append([]Version(nil), l.versions...)
	for i := 1; i < len(out); i++ {
		if out[i].RV <= out[i-1].RV {
			t.Fatalf("the watch of %s delivered resourceVersion %d after %d", l.what, out[i].RV, out[i-1].RV)
		}
	}
	return out
}
