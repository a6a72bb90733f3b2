package operator

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// The state of a CR the cache no longer holds is forgotten, whatever path the CR went by;
// that of a CR the cache holds, or of one recorded since the cache was read, is kept.
func TestGoneForgetterForgetsGoneCRs(t *testing.T) {
	crAt := func(name string) *unstructured.Unstructured {
		cr := actiontest.Memcached(nil)
		cr.SetName(name)
		cr.SetUID(types.UID("uid-" + name))
		return cr
	}
	fleet, o := metrics.NewFleet(0), outcomes.New()
	for _, name := range []string{"gone", "here"} {
		cr := crAt(name)
		fleet.HelmOperation("Memcached", "ns", name, time.Second, nil)
		o.Resolved(cr, nil, valuesfrom.Redactor{}, nil) // recorded, without waking anyone
	}
	s := &goneForgetter{reader: readerWith(crAt("here")), metrics: fleet,
		kinds: []forgetKind{{gvk: actiontest.MemcachedGVK, outcomes: o}}}
	s.forget(context.Background())
	for name, want := range map[string]bool{"gone": false, "here": true} {
		if kept := hasSeries(fleet, name); kept != want {
			t.Errorf("series of %s kept: %v, want %v", name, kept, want)
		}
		if _, kept := o.Get(types.NamespacedName{Namespace: "ns", Name: name}, types.UID("uid-"+name)); kept != want {
			t.Errorf("outcome of %s kept: %v, want %v", name, kept, want)
		}
	}

	// Recorded after the cache was read: the list may have missed its CR.
	before := time.Now().Add(-time.Second)
	fleet.HelmOperation("Memcached", "ns", "new", time.Second, nil)
	fleet.ForgetGone("Memcached", map[types.NamespacedName]bool{}, before)
	if !hasSeries(fleet, "new") {
		t.Error("the series of a CR recorded after goneForgetter read the cache was forgotten")
	}
}

// hasSeries reports whether a scrape of fleet exports a series of the CR named name.
func hasSeries(fleet *metrics.Fleet, name string) bool {
	ch := make(chan prometheus.Metric)
	go func() { fleet.Collect(ch); close(ch) }()
	found := false
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			found = found || (l.GetName() == "name" && l.GetValue() == name)
		}
	}
	return found
}
