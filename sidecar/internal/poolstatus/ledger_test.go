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

// usageString renders a class's usage for comparison: allocated, bound, pending, then the
// namespaces in order.
func usageString(l *Ledger, class string) string {
	u := l.Usage(class, TopNamespaces)
	var b strings.Builder
	fmt.Fprintf(&b, "%s b%d p%d", canonical(u.Allocated, resource.BinarySI), u.Bound, u.Pending)
	for _, n := range u.Namespaces {
		fmt.Fprintf(&b, " %s=%s/%d", n.Namespace, canonical(n.Allocated, resource.BinarySI), n.Claims)
	}
	return b.String()
}

func TestLedgerApplyRemove(t *testing.T) {
	l := NewLedger()
	steps := []struct {
		name        string
		do          func() []string
		wantChanged string
		wantA       string
		wantB       string
	}{
		{"pending claim", func() []string { return l.Apply(claim("1", "ns1", "a", "1Gi", "Pending")) }, "a",
			"1Gi b0 p1 ns1=1Gi/1", "0 b0 p0"},
		{"claim without a phase yet counts as pending", func() []string { return l.Apply(claim("2", "ns2", "a", "2Gi", "")) }, "a",
			"3Gi b0 p2 ns2=2Gi/1 ns1=1Gi/1", "0 b0 p0"},
		{"pending to bound", func() []string { return l.Apply(claim("1", "ns1", "a", "1Gi", "Bound")) }, "a",
			"3Gi b1 p1 ns2=2Gi/1 ns1=1Gi/1", "0 b0 p0"},
		{"same state again changes nothing", func() []string { return l.Apply(claim("1", "ns1", "a", "1Gi", "Bound")) }, "",
			"3Gi b1 p1 ns2=2Gi/1 ns1=1Gi/1", "0 b0 p0"},
		{"bound claim resized counts at its new size", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Bound")) }, "a",
			"7Gi b1 p1 ns1=5Gi/1 ns2=2Gi/1", "0 b0 p0"},
		{"bound back to pending (volume lost and reclaimed)", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Pending")) }, "a",
			"7Gi b0 p2 ns1=5Gi/1 ns2=2Gi/1", "0 b0 p0"},
		{"claim moves to another class", func() []string { return l.Apply(claim("2", "ns2", "b", "2Gi", "Pending")) }, "a,b",
			"5Gi b0 p1 ns1=5Gi/1", "2Gi b0 p1 ns2=2Gi/1"},
		{"lost claim stops counting", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Lost")) }, "a",
			"0 b0 p0", "2Gi b0 p1 ns2=2Gi/1"},
		{"lost claim bound again counts again", func() []string { return l.Apply(claim("1", "ns1", "a", "5Gi", "Bound")) }, "a",
			"5Gi b1 p0 ns1=5Gi/1", "2Gi b0 p1 ns2=2Gi/1"},
		{"deleted claim stops counting", func() []string { return l.Remove("1") }, "a",
			"0 b0 p0", "2Gi b0 p1 ns2=2Gi/1"},
		{"deleting it twice changes nothing", func() []string { return l.Remove("1") }, "",
			"0 b0 p0", "2Gi b0 p1 ns2=2Gi/1"},
		{"claim without a class counts nowhere", func() []string { return l.Apply(claim("3", "ns1", "", "1Gi", "Pending")) }, "",
			"0 b0 p0", "2Gi b0 p1 ns2=2Gi/1"},
		{"fractional sizes add exactly", func() []string { return l.Apply(claim("4", "ns2", "b", "1536Mi", "Pending")) }, "b",
			"0 b0 p0", "3584Mi b0 p2 ns2=3584Mi/2"},
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
	if got := usageString(l, "pool-a"); got != "1Gi b1 p0 ns1=1Gi/1" {
		t.Errorf("pool-a: %s", got)
	}
	if got := usageString(l, "someone-elses"); got != "7Gi b1 p0 ns1=7Gi/1" {
		t.Errorf("a class without a pool is counted as soon as a pool asks for it: %s", got)
	}
	if got := usageString(l, "no-claims-yet"); got != "0 b0 p0" {
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
	u := l.Usage("a", 1)
	want, _ := new(inf.Dec).SetString("16140901064495857665.1") // 14 × 2^60 + 1.1
	if u.Allocated.AsDec().Cmp(want) != 0 {
		t.Fatalf("allocated %s, want %s", u.Allocated.AsDec(), want)
	}
	l.Remove("4")
	l.Remove("1")
	l.Remove("2")
	if got := canonical(l.Usage("a", 1).Allocated, resource.BinarySI); got != "1" {
		t.Errorf("after removing all but the 1-byte claim: %s, want 1", got)
	}
}

func TestLedgerTopNamespaces(t *testing.T) {
	l := NewLedger()
	for i := 0; i < 15; i++ {
		l.Apply(claim(fmt.Sprint(i), fmt.Sprintf("ns%02d", i), "a", fmt.Sprintf("%dGi", i%5+1), "Pending"))
	}
	u := l.Usage("a", TopNamespaces)
	var got []string
	for _, n := range u.Namespaces {
		got = append(got, n.Namespace+"="+canonical(n.Allocated, resource.BinarySI))
	}
	// Largest first; ties by name.
	want := "ns04=5Gi ns09=5Gi ns14=5Gi ns03=4Gi ns08=4Gi ns13=4Gi ns02=3Gi ns07=3Gi ns12=3Gi ns01=2Gi"
	if strings.Join(got, " ") != want {
		t.Errorf("top namespaces:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if u.Bound+u.Pending != 15 {
		t.Errorf("claims %d, want all 15 counted though 10 namespaces are listed", u.Bound+u.Pending)
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
