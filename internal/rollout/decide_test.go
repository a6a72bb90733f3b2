package rollout

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const (
	oldChart = "old"
	newChart = "new"
)

// fleet makes n members named ns/cr-00.. on the old chart, Ready for an hour at generation
// 1, with the baseline of that state recorded for the new chart.
func fleet(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Key: fmt.Sprintf("ns/cr-%02d", i), Generation: 1, Digest: oldChart, Ready: true,
			Deployed: now.Add(-time.Hour), Baseline: Baseline{Digest: newChart, Generation: 1, Healthy: true}}
	}
	return ms
}

// without is keys without key.
func without(keys []string, key string) []string {
	var out []string
	for _, k := range keys {
		if k != key {
			out = append(out, k)
		}
	}
	return out
}

// member runs f on the member of key.
func member(ms []Member, key string, f func(*Member)) {
	for i := range ms {
		if ms[i].Key == key {
			f(&ms[i])
		}
	}
}

// upgrade puts the members of keys on the new chart, deployed ago, Ready or not.
func upgrade(ms []Member, keys []string, ready bool, ago time.Duration) {
	set := map[string]bool{}
	for _, k := range keys {
		set[k] = true
	}
	for i := range ms {
		if set[ms[i].Key] {
			ms[i].Digest, ms[i].Deployed, ms[i].Ready = newChart, now.Add(-ago), ready
			if !ready {
				ms[i].NotReadySince = now.Add(-ago)
			}
		}
	}
}

func flat(waves [][]string, upTo int) []string {
	var out []string
	for _, w := range waves[:upTo] {
		out = append(out, w...)
	}
	return out
}

var policy = Policy{Canaries: 1, Waves: []int{10, 25, 50, 100}, Timeout: 10 * time.Minute, MinReady: 10 * time.Second, Rollback: true}

func admitted(p Plan) []string {
	var out []string
	for _, w := range p.Waves {
		for _, k := range w {
			if p.Admitted[k] {
				out = append(out, k)
			}
		}
	}
	return out
}

func TestWaveSizes(t *testing.T) {
	for _, tc := range []struct {
		n, canaries int
		waves       []int
		want        []int
	}{
		{50, 1, []int{10, 25, 50, 100}, []int{1, 4, 8, 12, 25}},
		{3, 1, []int{10, 25, 50, 100}, []int{1, 1, 1}},
		{10, 0, []int{50, 100}, []int{5, 5}},
		{1, 5, []int{100}, []int{1}},
		{0, 1, []int{100}, nil},
	} {
		p := Decide(Policy{Canaries: tc.canaries, Waves: tc.waves}, newChart, fleet(tc.n), now)
		var sizes []int
		for _, w := range p.Waves {
			sizes = append(sizes, len(w))
		}
		if !reflect.DeepEqual(sizes, tc.want) {
			t.Errorf("%d CRs, %d canaries, %v: waves of %v, want %v", tc.n, tc.canaries, tc.waves, sizes, tc.want)
		}
	}
}

func TestOrderIsStableAndCanariesFirst(t *testing.T) {
	ms := fleet(20)
	ms[13].Canary, ms[7].Canary = true, true
	a := Decide(policy, newChart, ms, now)
	reversed := make([]Member, len(ms))
	for i := range ms {
		reversed[len(ms)-1-i] = ms[i]
	}
	b := Decide(policy, newChart, reversed, now)
	if !reflect.DeepEqual(a.Waves, b.Waves) {
		t.Errorf("the order of the observation changed the waves:\n%v\n%v", a.Waves, b.Waves)
	}
	if got := a.Waves[0]; len(got) != 2 || !(got[0] == "ns/cr-13" || got[0] == "ns/cr-07") || !(got[1] == "ns/cr-13" || got[1] == "ns/cr-07") {
		t.Errorf("canary wave %v, want the two labelled CRs", got)
	}
}

func TestDecide(t *testing.T) {
	waves := Decide(policy, newChart, fleet(50), now).Waves // 1, 4, 8, 12, 25
	for _, tc := range []struct {
		name        string
		observe     func(ms []Member)
		pol         Policy
		wave        int
		admitted    []string
		halted      bool
		newlyFailed []string
		counts      Counts
	}{
		{name: "start: the canary only", observe: func([]Member) {}, wave: 0, admitted: flat(waves, 1),
			counts: Counts{Behind: 49, InProgress: 1}},
		{name: "canary moved, not ready yet: wait", observe: func(ms []Member) { upgrade(ms, flat(waves, 1), false, time.Minute) },
			wave: 0, admitted: flat(waves, 1), counts: Counts{Behind: 49, InProgress: 1}},
		{name: "canary ready but within minReady: wait", observe: func(ms []Member) { upgrade(ms, flat(waves, 1), true, 5*time.Second) },
			wave: 0, admitted: flat(waves, 1), counts: Counts{Behind: 49, InProgress: 1}},
		{name: "canary done: first wave", observe: func(ms []Member) { upgrade(ms, flat(waves, 1), true, time.Minute) },
			wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 4, Upgraded: 1}},
		{name: "three waves done: the fourth", observe: func(ms []Member) { upgrade(ms, flat(waves, 3), true, time.Minute) },
			wave: 3, admitted: flat(waves, 4), counts: Counts{Behind: 25, InProgress: 12, Upgraded: 13}},
		{name: "a wave half moved: no next wave", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 2), true, time.Minute)
			upgrade(ms, waves[2][:4], true, time.Minute)
		}, wave: 2, admitted: flat(waves, 3), counts: Counts{Behind: 37, InProgress: 4, Upgraded: 9}},
		{name: "all done", observe: func(ms []Member) { upgrade(ms, flat(waves, 5), true, time.Minute) },
			wave: 5, admitted: flat(waves, 5), counts: Counts{Upgraded: 50}},
		{name: "canary stalled: halt, nothing admitted, rolled back", observe: func(ms []Member) {
			for i := range ms {
				if ms[i].Key == waves[0][0] {
					ms[i].Stalled, ms[i].Ready = true, false
				}
			}
		}, wave: 0, admitted: nil, halted: true, newlyFailed: flat(waves, 1), counts: Counts{Behind: 49, Failed: 1}},
		{name: "canary stalled, hold policy: it stays admitted", pol: func() Policy { p := policy; p.Rollback = false; return p }(),
			observe: func(ms []Member) {
				for i := range ms {
					if ms[i].Key == waves[0][0] {
						ms[i].Stalled = true
					}
				}
			}, wave: 0, admitted: flat(waves, 1), halted: true, newlyFailed: flat(waves, 1), counts: Counts{Behind: 49, Failed: 1}},
		{name: "first wave not ready past the timeout: halt; moved CRs stay", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, time.Hour)
			upgrade(ms, waves[1][:2], true, time.Minute)
			upgrade(ms, waves[1][2:3], false, 11*time.Minute)
		}, wave: 1, admitted: append(flat(waves, 1), waves[1][:2]...), halted: true, newlyFailed: waves[1][2:3],
			counts: Counts{Behind: 46, Upgraded: 3, Failed: 1}},
		{name: "not ready within the timeout: no halt yet", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), false, 9*time.Minute)
		}, wave: 0, admitted: flat(waves, 1), counts: Counts{Behind: 49, InProgress: 1}},
		{name: "marked failed and rolled back: still halted", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, time.Hour)
			for i := range ms {
				if ms[i].Key == waves[1][0] {
					ms[i].FailedDigest = newChart
				}
			}
		}, wave: 1, admitted: flat(waves, 1), halted: true, counts: Counts{Behind: 48, Upgraded: 1, Failed: 1}},
		{name: "marked failed with an older chart: a new rollout", observe: func(ms []Member) {
			ms[0].FailedDigest = "older"
		}, wave: 0, admitted: flat(waves, 1), counts: Counts{Behind: 49, InProgress: 1}},
		{name: "a failed CR forced by its owner: it retries alone, the halt stays", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, time.Hour)
			member(ms, waves[1][0], func(m *Member) { m.FailedDigest, m.Forced = newChart, newChart })
		}, wave: 1, admitted: append(flat(waves, 1), waves[1][0]), halted: true, counts: Counts{Behind: 48, Upgraded: 1, Failed: 1}},
		{name: "a failed CR retried by its owner and healthy on the chart: the rollout resumes", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, time.Hour)
			upgrade(ms, waves[1][:1], true, time.Hour)
			member(ms, waves[1][0], func(m *Member) { m.FailedDigest, m.Forced = newChart, newChart })
		}, wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 3, Upgraded: 2}},
		{name: "an administrator forces the failed CR's Namespace: the rollout resumes", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, time.Hour)
			member(ms, waves[1][0], func(m *Member) { m.FailedDigest, m.NamespaceForced = newChart, newChart })
		}, wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 4, Upgraded: 1}},
		{name: "a paused CR does not hold its wave", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, time.Hour)
			upgrade(ms, waves[1][1:], true, time.Hour)
			member(ms, waves[1][0], func(m *Member) { m.Paused = true })
		}, wave: 2, admitted: flat(waves, 3), counts: Counts{Behind: 37, InProgress: 9, Upgraded: 4}},
		{name: "a CR its owner's edit keeps Stalled on its chart does not hold its wave", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, time.Hour)
			upgrade(ms, waves[1][1:], true, time.Hour)
			member(ms, waves[1][0], func(m *Member) { m.Generation, m.Stalled, m.Ready = 2, true, false })
		}, wave: 2, admitted: without(flat(waves, 3), waves[1][0]), counts: Counts{Behind: 38, InProgress: 8, Upgraded: 4}},
		{name: "a CR forced out of turn moves alone", observe: func(ms []Member) {
			for i := range ms {
				if ms[i].Key == waves[4][0] {
					ms[i].Forced = newChart
				}
			}
		}, wave: 0, admitted: append(flat(waves, 1), waves[4][0]), counts: Counts{Behind: 48, InProgress: 2}},
		{name: "a canary broken before the rollout: it moves, and its state on the new chart halts nothing", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), false, 20*time.Minute)
			member(ms, waves[0][0], func(m *Member) { m.Stalled, m.Baseline.Healthy = true, false })
		}, wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 4, Upgraded: 1}},
		{name: "a canary edited since its move: its failure is the edit's, not the chart's", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), false, 20*time.Minute)
			member(ms, waves[0][0], func(m *Member) { m.Stalled, m.Generation = true, 2 })
		}, wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 4, Upgraded: 1}},
		{name: "a canary whose source was edited since its move: its failure is the source's", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), false, 20*time.Minute)
			member(ms, waves[0][0], func(m *Member) { m.Stalled, m.Inputs = true, "configmap/values@2" })
		}, wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 4, Upgraded: 1}},
		{name: "a canary whose source is gone or past its bound: its failure is its owner's", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), false, 20*time.Minute)
			member(ms, waves[0][0], func(m *Member) { m.Stalled, m.InputsPending = true, true })
		}, wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 4, Upgraded: 1}},
		{name: "a canary not Ready past the timeout after its owner edited a source: not judged", observe: func(ms []Member) {
			upgrade(ms, flat(waves, 1), true, 20*time.Minute)
			member(ms, waves[0][0], func(m *Member) { m.Ready, m.Inputs = false, "configmap/values@2" })
		}, wave: 1, admitted: flat(waves, 2), counts: Counts{Behind: 45, InProgress: 4, Upgraded: 1}},
		{name: "a baseline of other sources does not count", observe: func(ms []Member) {
			member(ms, waves[0][0], func(m *Member) { m.Inputs = "configmap/values@2" })
		}, wave: 0, admitted: nil, counts: Counts{Behind: 50}},
		{name: "no baseline at the CR's generation: it waits for one", observe: func(ms []Member) {
			member(ms, waves[0][0], func(m *Member) { m.Baseline = Baseline{} })
		}, wave: 0, admitted: nil, counts: Counts{Behind: 50}},
		{name: "a baseline recorded for another chart does not count", observe: func(ms []Member) {
			member(ms, waves[0][0], func(m *Member) { m.Baseline.Digest = "older" })
		}, wave: 0, admitted: nil, counts: Counts{Behind: 50}},
		{name: "a baseline of an older generation does not count", observe: func(ms []Member) {
			member(ms, waves[0][0], func(m *Member) { m.Generation = 2 })
		}, wave: 0, admitted: nil, counts: Counts{Behind: 50}},
		{name: "all at once: everything admitted, nothing halts", pol: Policy{AllAtOnce: true}, observe: func(ms []Member) {
			ms[3].Stalled = true
		}, wave: 0, admitted: flat(waves, 5), counts: Counts{InProgress: 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := fleet(50)
			tc.observe(ms)
			pol := tc.pol
			if pol.Waves == nil && !pol.AllAtOnce {
				pol = policy
			}
			p := Decide(pol, newChart, ms, now)
			if p.Wave != tc.wave {
				t.Errorf("wave %d, want %d", p.Wave, tc.wave)
			}
			if got := admitted(p); !sameSet(got, tc.admitted) {
				t.Errorf("admitted %d %v, want %d %v", len(got), got, len(tc.admitted), tc.admitted)
			}
			if p.Halted != tc.halted {
				t.Errorf("halted %v, want %v", p.Halted, tc.halted)
			}
			if !sameSet(p.NewlyFailed, tc.newlyFailed) {
				t.Errorf("newly failed %v, want %v", p.NewlyFailed, tc.newlyFailed)
			}
			if p.Counts != tc.counts {
				t.Errorf("counts %+v, want %+v", p.Counts, tc.counts)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, k := range a {
		m[k]++
	}
	for _, k := range b {
		m[k]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

func TestDescribe(t *testing.T) {
	ms := fleet(10)
	ms[0].Canary = true
	describe := func(p Plan, key string) string {
		for _, m := range ms {
			if m.Key == key {
				_, reason, msg := p.Describe(key, m)
				if msg == "" {
					t.Errorf("%s: %s without a message", key, reason)
				}
				return reason
			}
		}
		return ""
	}
	p := Decide(policy, newChart, ms, now)
	if r := describe(p, "ns/cr-00"); r != statuscontract.ReasonUpgrading {
		t.Errorf("the canary: %s, want Upgrading", r)
	}
	if r := describe(p, "ns/cr-01"); r != statuscontract.ReasonWaiting {
		t.Errorf("a CR of a later wave: %s, want Waiting", r)
	}
	ms[1].FailedDigest = newChart
	p = Decide(policy, newChart, ms, now)
	for key, want := range map[string]string{"ns/cr-00": statuscontract.ReasonRolloutHalted, "ns/cr-01": statuscontract.ReasonRolloutFailed, "ns/cr-02": statuscontract.ReasonRolloutHalted} {
		if r := describe(p, key); r != want {
			t.Errorf("%s: %s, want %s", key, r, want)
		}
	}
	upgrade(ms, []string{"ns/cr-03"}, true, time.Hour)
	p = Decide(policy, newChart, ms, now)
	if r := describe(p, "ns/cr-03"); r != statuscontract.ReasonUpgraded {
		t.Errorf("a CR on the new chart: %s, want Upgraded", r)
	}
}

func TestBaseline(t *testing.T) {
	recorded := Baseline{Digest: newChart, Generation: 1, Healthy: true}
	for _, tc := range []struct {
		name    string
		pol     Policy
		observe func(m *Member)
		want    Baseline
	}{
		{name: "a later wave's CR, healthy: its state now", pol: policy,
			observe: func(m *Member) { m.Baseline = Baseline{} }, want: recorded},
		{name: "a later wave's CR that broke: recorded broken", pol: policy,
			observe: func(m *Member) { m.Stalled = true }, want: Baseline{Digest: newChart, Generation: 1}},
		{name: "admitted: the baseline stays, whatever happens next", pol: policy, observe: func(m *Member) {
			m.Key, m.Stalled, m.Ready = "canary", true, false
		}, want: recorded},
		{name: "admitted, then edited: a new baseline", pol: policy, observe: func(m *Member) {
			m.Key, m.Generation, m.Ready = "canary", 2, false
		}, want: Baseline{Digest: newChart, Generation: 2}},
		{name: "admitted, then a source edited: a new baseline", pol: policy, observe: func(m *Member) {
			m.Key, m.Inputs, m.Ready = "canary", "configmap/values@2", false
		}, want: Baseline{Digest: newChart, Generation: 1, Inputs: "configmap/values@2"}},
		{name: "a source's change pending: recorded broken", pol: policy, observe: func(m *Member) {
			m.InputsPending = true
		}, want: Baseline{Digest: newChart, Generation: 1}},
		{name: "on the new chart: the baseline stays", pol: policy, observe: func(m *Member) {
			m.Digest, m.Stalled = newChart, true
		}, want: recorded},
		{name: "on the new chart without a baseline: none", pol: policy, observe: func(m *Member) {
			m.Digest, m.Baseline = newChart, Baseline{}
		}, want: Baseline{}},
		{name: "a baseline for another chart is replaced", pol: policy, observe: func(m *Member) {
			m.Baseline.Digest = "older"
		}, want: recorded},
		{name: "all at once: none", pol: Policy{AllAtOnce: true}, observe: func(*Member) {}, want: Baseline{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Member{Key: "ns/later", Generation: 1, Digest: oldChart, Ready: true, Deployed: now.Add(-time.Hour), Baseline: recorded}
			tc.observe(&m)
			p := Plan{Target: newChart, Admitted: map[string]bool{"canary": true}, AllAtOnce: tc.pol.AllAtOnce}
			if got := p.Baseline(m); got != tc.want {
				t.Errorf("baseline %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A plan of a fleet of 10,000 CRs, half of them moved: the rollout controller decides one
// every second or two through a wave of events (go test -bench Decide -benchmem).
func BenchmarkDecide(b *testing.B) {
	ms := fleet(10000)
	for i := range ms[:5000] {
		ms[i].Digest = newChart
	}
	p := Policy{Canaries: 1, Waves: []int{10, 25, 50, 100}, Timeout: 10 * time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		Decide(p, newChart, ms, now)
	}
}

// The rollout order is keyed: the same key gives the same order in every process (whatever
// the chart), another key another order, so that a name searched to come first under one
// cannot be known to come first under the operator's.
func TestOrderKeyed(t *testing.T) {
	keys := func(key []byte, target string) []string {
		p := Policy{Waves: []int{100}, OrderKey: key}
		return Decide(p, target, fleet(50), now).Waves[0]
	}
	a, b := []byte("operator's secret"), []byte("a tenant's guess")
	if !reflect.DeepEqual(keys(a, newChart), keys(a, newChart)) {
		t.Error("the same key and chart gave two orders")
	}
	if reflect.DeepEqual(keys(a, newChart), keys(b, newChart)) {
		t.Error("another key gave the same order")
	}
	if !reflect.DeepEqual(keys(a, newChart), keys(a, "another chart")) {
		t.Error("another chart gave another order")
	}
}
