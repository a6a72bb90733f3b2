package mgropts

import (
	"context"
	"net/http/httptest"
	"testing"
)

// fakeCache is synced when told.
type fakeCache struct{ synced bool }

func (c *fakeCache) WaitForCacheSync(context.Context) bool { return c.synced }

// A pod is ready once its cache is filled, and stays ready: a rolling update stops the old
// pod on that signal.
func TestReadyOnceTheCacheIsSynced(t *testing.T) {
	c := &fakeCache{}
	check := cacheSynced(c)
	probe := func() error { return check(httptest.NewRequest("GET", "/readyz", nil)) }
	if err := probe(); err == nil {
		t.Fatal("ready before the cache was synced")
	}
	c.synced = true
	if err := probe(); err != nil {
		t.Fatalf("not ready once the cache was synced: %v", err)
	}
	c.synced = false // an informer added later, still listing
	if err := probe(); err != nil {
		t.Fatalf("not ready again after the first sync: %v", err)
	}
}
