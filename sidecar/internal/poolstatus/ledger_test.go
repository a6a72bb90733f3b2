package poolstatus

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func claim(uid, ns, class, size, phase string) Claim {
	return Claim{UID: types.UID(uid), Namespace: ns, Class: class, Size: resource.MustParse(size), Phase: phase}
}

// usageString renders a class's usage for comparison: allocated (bound claims), requested
// (pending claims), the counts of bound and pending claims, and of namespaces with bound
// claims.
func usageString(l *Ledger, class string) string {
	u := l.Usage(class)
	return fmt.Sprintf("%s req %s b%d p%d n%d", canonical(u.Allocated, resource.BinarySI), canonical(u.Requested, resource.BinarySI),
		u.Bound, u.Pending, u.Namespaces)
}

func TestLedgerApplyRemove(t *testing.T) {
	const none = "0 req 0 b0 p0 n0"
	l := NewLedger()
	steps := []struct {
		name        string
		do          func() []string
		wantChanged string
		wantA       string
		wantB       string
	}{
		{"pending claim asks, holds nothing", func() []string { return l.Apply(claim("1", "ns1", "a", "1Gi", "Pending")) }, "a",
			"0 req 1Gi b0 p1 n0", none},
		{"claim without a phase yet counts as pending", func() []string { return l.Apply(claim("2", "ns2", "a", "2Gi", "")) }, "a",
			"0 req 3Gi b0 p2 n0", none},
		{"pending to bound", func() []string { return l.Apply(claim("1", "ns1", "a", "1Gi", "Bound")) }, "a",
			"1Gi req 2Gi b1 p1 n1", none},
		{"same state again changes nothing", func() []string { return l.Apply(claim("1", "ns1", "a", "1Gi", "Bound")) }, "",
			"1Gi req 2Gi b1 p1 n1", none},
		{"bound claim resized counts at its new size", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Bound")) }, "a",
			"5Gi req 2Gi b1 p1 n1", none},
		{"a second bound claim of the namespace: one namespace", func() []string { return l.Apply(claim("5", "ns1", "a", "1Gi", "Bound")) }, "a",
			"6Gi req 2Gi b2 p1 n1", none},
		{"a bound claim of another namespace: two", func() []string { return l.Apply(claim("2", "ns2", "a", "2Gi", "Bound")) }, "a",
			"8Gi req 0 b3 p0 n2", none},
		{"its deletion: one again", func() []string { return l.Remove("5") }, "a",
			"7Gi req 0 b2 p0 n2", none},
		{"bound back to pending (volume lost and reclaimed)", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Pending")) }, "a",
			"2Gi req 5Gi b1 p1 n1", none},
		{"claim moves to another class", func() []string { return l.Apply(claim("2", "ns2", "b", "2Gi", "Pending")) }, "a,b",
			"0 req 5Gi b0 p1 n0", "0 req 2Gi b0 p1 n0"},
		{"lost claim stops counting", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Lost")) }, "a",
			none, "0 req 2Gi b0 p1 n0"},
		{"lost claim bound again counts again", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Bound")) }, "a",
			"5Gi req 0 b1 p0 n1", "0 req 2Gi b0 p1 n0"},
		{"deleted claim stops counting", func() []string { return l.Remove("1") }, "a",
			none, "0 req 2Gi b0 p1 n0"},
		{"deleting it twice changes nothing", func() []string { return l.Remove("1") }, "",
			none, "0 req 2Gi b0 p1 n0"},
		{"claim without a class counts nowhere", func() []string { return l.Apply(claim("3", "ns1", "", "1Gi", "Pending")) }, "",
			none, "0 req 2Gi b0 p1 n0"},
		{"fractional sizes add exactly", func() []string { return l.Apply(claim("4", "ns2", "b", "1536Mi", "Pending")) }, "b",
			none, "0 req 3584Mi b0 p2 n0"},
	}
	for _, s := range steps {
		changed := strings.Join(s.do(), ",")
		if changed != s.wantChanged {
			t.Errorf("%s: changed classes %q, want %q", s.name, changed, s.wantChanged)
		}
		if got := usageString(l, "a"); got != s.wantA {
			t.Errorf("%s: class a %q, want %q", s.name, got, s.wantA)
		}
		if got := usageString(l, "b"); got != s.wantB {
			t.Errorf("%s: class b %q, want %q", s.name, got, s.wantB)
		}
		if diff := l.CheckTotals(); diff != "" {
			t.Errorf("%s: running totals are not the sum of the entries: %s", s.name, diff)
		}
	}
	if l.classes["a"] != nil {
		t.Errorf("a class without claims keeps totals: %+v", l.classes["a"])
	}
}

// Claims of classes no pool uses are counted too, so that a pool created later for such a
// class sees them at once, and they never leak into another class's totals.
func TestLedgerUnknownClasses(t *testing.T) {
	l := NewLedger()
	l.Apply(claim("1", "ns1", "pool-a", "1Gi", "Bound"))
	l.Apply(claim("2", "ns1", "someone-elses", "7Gi", "Bound"))
	l.Apply(claim("3", "ns2", "standard", "3Gi", "Pending"))
	if got := usageString(l, "pool-a"); got != "1Gi req 0 b1 p0 n1" {
		t.Errorf("pool-a: %s", got)
	}
	if got := usageString(l, "someone-elses"); got != "7Gi req 0 b1 p0 n1" {
		t.Errorf("a class without a pool is counted as soon as a pool asks for it: %s", got)
	}
	if got := usageString(l, "no-claims-yet"); got != "0 req 0 b0 p0 n0" {
		t.Errorf("a class without claims: %s", got)
	}
}

// Sums beyond int64 and mixed scales stay exact.
func TestLedgerExactArithmetic(t *testing.T) {
	l := NewLedger()
	l.Apply(claim("1", "ns", "a", "7Ei", "Bound"))
	l.Apply(claim("2", "ns", "a", "7Ei", "Bound"))
	l.Apply(claim("3", "ns", "a", "1", "Bound"))
	l.Apply(claim("4", "ns", "a", "100m", "Bound"))
	u := l.Usage("a")
	want, _ := new(inf.Dec).SetString("16140901064495857665.1") // 14 × 2^60 + 1.1
	if u.Allocated.AsDec().Cmp(want) != 0 {
		t.Fatalf("allocated %s, want %s", u.Allocated.AsDec(), want)
	}
	l.Remove("4")
	l.Remove("1")
	l.Remove("2")
	if got := canonical(l.Usage("a").Allocated, resource.BinarySI); got != "1" {
		t.Errorf("after removing all but the 1-byte claim: %s, want 1", got)
	}
}

// A pending claim holds nothing: however large, it cannot fill a pool; it is counted apart.
// Namespaces are counted, never listed.
func TestLedgerPendingClaimsAskWithoutHolding(t *testing.T) {
	l := NewLedger()
	for i := 0; i < 15; i++ {
		l.Apply(claim(fmt.Sprint(i), fmt.Sprintf("ns%02d", i), "a", fmt.Sprintf("%dGi", i%5+1), "Bound"))
	}
	l.Apply(claim("huge", "intruder", "a", "1Pi", "Pending"))
	if got, want := usageString(l, "a"), "45Gi req 1Pi b15 p1 n15"; got != want {
		t.Errorf("usage %s, want %s", got, want)
	}
}

// A long random history of claim events leaves the books equal to a recount of the
// claims' final states, entry by entry and total by total.
func TestLedgerRandomHistoryEqualsRecount(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	classes := []string{"a", "b", "unknown", ""}
	phases := []string{"Pending", "Bound", "Lost", ""}
	sizes := []string{"1Gi", "1536Mi", "10G", "500M", "3", "250m"}
	l := NewLedger()
	live := map[types.UID]Claim{}
	for i := 0; i < 20000; i++ {
		uid := types.UID(fmt.Sprint(rng.Intn(500)))
		if _, ok := live[uid]; ok && rng.Intn(4) == 0 {
			l.Remove(uid)
			delete(live, uid)
			continue
		}
		c := claim(string(uid), fmt.Sprintf("ns%d", rng.Intn(12)), classes[rng.Intn(len(classes))],
			sizes[rng.Intn(len(sizes))], phases[rng.Intn(len(phases))])
		if old, ok := live[uid]; ok {
			c.Namespace = old.Namespace // a claim never changes namespace
		}
		l.Apply(c)
		live[uid] = c
	}
	var final []Claim
	for _, c := range live {
		final = append(final, c)
	}
	fresh := Recount(final)
	if diff := l.Diff(fresh); diff != "" {
		t.Fatalf("books differ from the recount: %s", diff)
	}
	if diff := l.CheckTotals(); diff != "" {
		t.Fatal(diff)
	}
	for _, class := range []string{"a", "b", "unknown"} {
		if got, want := usageString(l, class), usageString(fresh, class); got != want {
			t.Errorf("class %s: %s, recount %s", class, got, want)
		}
	}
	// The comparison itself notices a difference.
	fresh.Apply(claim("extra", "ns0", "a", "1", "Bound"))
	if l.Diff(fresh) == "" {
		t.Error("Diff found no difference with a recount that has one more claim")
	}
}

func TestCheckTotalsFindsCorruption(t *testing.T) {
	l := NewLedger()
	l.Apply(claim("1", "ns", "a", "1Gi", "Bound"))
	l.classes["a"].allocated.Add(resource.MustParse("1"))
	if l.CheckTotals() == "" {
		t.Fatal("CheckTotals missed running totals that are not the sum of the entries")
	}
}
