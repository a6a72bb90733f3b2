package bench

import (
	"testing"
	"time"
)

// TestWaitForSaysHowFarItGot: a phase that times out reports how many CRs reached its goal,
// and one that converges returns as soon as all have.
func TestWaitForSaysHowFarItGot(t *testing.T) {
	tr := &tracker{
		deployments: map[string]int32{"a": 2, "b": 2, "c": -1}, // c is still rolling out
		crs:         map[string]bool{"a": true, "b": true, "c": true},
		cpu:         map[string]string{"a": "60m", "b": "50m", "c": "50m"},
		changed:     make(chan struct{}, 1),
	}
	if _, done, ok := tr.waitFor(10*time.Millisecond, 3, tr.available(2)); ok || done != 2 {
		t.Errorf("available: ok %v with %d done, want a timeout with 2 of 3", ok, done)
	}
	if _, done, ok := tr.waitFor(10*time.Millisecond, 3, tr.withCPU("60m")); ok || done != 1 {
		t.Errorf("withCPU: ok %v with %d done, want a timeout with 1 of 3", ok, done)
	}

	go func() {
		tr.mu.Lock()
		tr.deployments["c"] = 2
		tr.mu.Unlock()
		tr.notify()
	}()
	if _, done, ok := tr.waitFor(time.Minute, 3, tr.available(2)); !ok || done != 3 {
		t.Errorf("available: ok %v with %d done, want all 3", ok, done)
	}

	// Deleting: a CR counts as gone once its CR and its Deployment both are.
	delete(tr.crs, "a")
	delete(tr.deployments, "a")
	delete(tr.crs, "b") // its Deployment is still there
	if _, done, ok := tr.waitFor(10*time.Millisecond, 3, tr.gone(3)); ok || done != 1 {
		t.Errorf("gone: ok %v with %d done, want a timeout with 1 of 3", ok, done)
	}
}
