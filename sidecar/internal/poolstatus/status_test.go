package poolstatus

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

func pool(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(poolGVK)
	u.SetNamespace("ns1")
	u.SetName("pool-a")
	u.SetGeneration(1)
	return u
}

func TestParseSpec(t *testing.T) {
	cases := []struct {
		spec                     map[string]any
		class, capacity, allocat string
	}{
		{map[string]any{"capacity": "10Gi"}, "ns1.pool-a", "10Gi", "10Gi"},
		{map[string]any{"capacity": "10Gi", "overcommitRatio": int64(2), "storageClassName": "fast"}, "fast", "10Gi", "20Gi"},
		// 1.1 is not a float64: the ratio is read as the decimal the user wrote.
		{map[string]any{"capacity": "100Gi", "overcommitRatio": 1.1}, "ns1.pool-a", "100Gi", "110Gi"},
		{map[string]any{"capacity": "10G", "overcommitRatio": 1.5}, "ns1.pool-a", "10G", "15G"},
		// 1Gi × 1.3 = 1395864371.2 bytes: rounded down to whole bytes.
		{map[string]any{"capacity": "1Gi", "overcommitRatio": 1.3}, "ns1.pool-a", "1Gi", "1395864371"},
		{map[string]any{"capacity": int64(1099511627776), "overcommitRatio": 1.25}, "ns1.pool-a", "1099511627776", "1374389534720"},
		{map[string]any{"capacity": "0.5Ti", "overcommitRatio": 9.999}, "ns1.pool-a", "512Gi", "5497008383066"}, // 549755813888 × 9.999 = 5497008383066.112,
	}
	for _, tc := range cases {
		s, err := ParseSpec(pool(tc.spec))
		if err != nil {
			t.Errorf("%v: %v", tc.spec, err)
			continue
		}
		if s.Class != tc.class {
			t.Errorf("%v: class %q, want %q", tc.spec, s.Class, tc.class)
		}
		if got := canonical(s.Capacity, s.Capacity.Format); got != tc.capacity {
			t.Errorf("%v: capacity %s, want %s", tc.spec, got, tc.capacity)
		}
		if got := canonical(s.Allocatable(), s.Capacity.Format); got != tc.allocat {
			t.Errorf("%v: allocatable %s, want %s", tc.spec, got, tc.allocat)
		}
	}
	for _, bad := range []map[string]any{{}, {"capacity": "lots"}, {"capacity": "1Gi", "overcommitRatio": "x"}} {
		if _, err := ParseSpec(pool(bad)); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestLevel(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		allocated, allocatable string
		want                   int
	}{
		{"0", "10Gi", levelNormal},
		{"8589934591", "10Gi", levelNormal}, // one byte under 80%
		{"8Gi", "10Gi", levelHigh},          // exactly 80%
		{"10737418239", "10Gi", levelHigh},  // one byte under 100%
		{"10Gi", "10Gi", levelFull},
		{"11Gi", "10Gi", levelFull},
		{"0", "0", levelFull}, // a pool of no capacity is full
	}
	for _, tc := range cases {
		if got := level(q(tc.allocated), q(tc.allocatable)); got != tc.want {
			t.Errorf("level(%s of %s) = %d, want %d", tc.allocated, tc.allocatable, got, tc.want)
		}
	}
}

func usageOf(claims ...Claim) Usage { return Recount(claims).Usage("pool-a") }

// owned is the ownership of a pool that keeps its books.
var owned = Ownership{Owned: true, Reason: statuscontract.ReasonStorageClassOwned, Message: "ours"}

func TestComputeStatus(t *testing.T) {
	spec, err := ParseSpec(pool(map[string]any{"capacity": "10Gi", "overcommitRatio": 1.5, "storageClassName": "pool-a"}))
	if err != nil {
		t.Fatal(err)
	}
	t0 := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))

	u := usageOf(claim("1", "team-a", "pool-a", "4Gi", "Bound"), claim("2", "team-b", "pool-a", "2Gi", "Pending"),
		claim("3", "team-a", "other", "50Gi", "Bound"))
	st, lvl := ComputeStatus(3, spec, owned, u, nil, t0)
	got, _ := json.Marshal(st)
	// The pending claim asks, holds nothing; namespaces are counted, not named.
	want := `{"storageClassName":"pool-a","observedGeneration":3,"capacity":"10Gi","allocatable":"15Gi","allocated":"4Gi",` +
		`"available":"11Gi","requested":"2Gi","claims":{"bound":1,"pending":1,"total":2},"namespaceCount":1,`
	if !strings.HasPrefix(string(got), want) {
		t.Errorf("status:\n got %s\nwant %s...", got, want)
	}
	if lvl != levelNormal {
		t.Errorf("level %d at 26%%", lvl)
	}
	ca := meta.FindStatusCondition(st.Conditions, statuscontract.CapacityAvailable)
	oc := meta.FindStatusCondition(st.Conditions, statuscontract.Overcommitted)
	if ca.Status != metav1.ConditionTrue || oc.Status != metav1.ConditionFalse || !ca.LastTransitionTime.Equal(&t0) || ca.ObservedGeneration != 3 {
		t.Fatalf("conditions at 26%%: %+v", st.Conditions)
	}
	if strings.Contains(string(got), "team-") {
		t.Errorf("the status names a namespace: %s", got)
	}
	if !strings.Contains(ca.Message, "11Gi available") || !strings.Contains(ca.Message, "26%") {
		t.Errorf("CapacityAvailable message %q", ca.Message)
	}

	// 12Gi: over the physical capacity, within what the ratio allows.
	u = usageOf(claim("1", "team-a", "pool-a", "10Gi", "Bound"), claim("2", "team-b", "pool-a", "2Gi", "Bound"),
		claim("3", "team-c", "pool-a", "1Pi", "Pending"))
	st, lvl = ComputeStatus(3, spec, owned, u, st.Conditions, t1)
	ca = meta.FindStatusCondition(st.Conditions, statuscontract.CapacityAvailable)
	oc = meta.FindStatusCondition(st.Conditions, statuscontract.Overcommitted)
	if lvl != levelHigh || ca.Status != metav1.ConditionTrue || !ca.LastTransitionTime.Equal(&t0) {
		t.Errorf("at 80%%: level %d, CapacityAvailable %+v (its transition time must not move)", lvl, ca)
	}
	if oc.Status != metav1.ConditionTrue || !oc.LastTransitionTime.Equal(&t1) || !strings.Contains(oc.Message, "2Gi more than the physical capacity 10Gi") {
		t.Errorf("Overcommitted %+v", oc)
	}

	// 16Gi: full, 1Gi beyond.
	u = usageOf(claim("1", "team-a", "pool-a", "16Gi", "Bound"))
	st, lvl = ComputeStatus(3, spec, owned, u, st.Conditions, t1)
	ca = meta.FindStatusCondition(st.Conditions, statuscontract.CapacityAvailable)
	if lvl != levelFull || ca.Status != metav1.ConditionFalse || ca.Reason != statuscontract.ReasonPoolFull || st.Available != "-1Gi" {
		t.Errorf("at 106%%: level %d, available %s, CapacityAvailable %+v", lvl, st.Available, ca)
	}
	for _, words := range []string{"full", "16Gi", "15Gi", "spec.capacity", "spec.overcommitRatio", "106%"} {
		if !strings.Contains(ca.Message, words) {
			t.Errorf("CapacityAvailable message %q does not say %q", ca.Message, words)
		}
	}

	// No claims at all: zeros, not absent fields.
	st, _ = ComputeStatus(3, spec, owned, Usage{}, nil, t0)
	got, _ = json.Marshal(st)
	if !strings.Contains(string(got), `"allocated":"0","available":"15Gi","requested":"0","claims":{"bound":0,"pending":0,"total":0},"namespaceCount":0`) {
		t.Errorf("empty pool: %s", got)
	}
}

func TestLevelEvents(t *testing.T) {
	spec, _ := ParseSpec(pool(map[string]any{"capacity": "10Gi"}))
	st, _ := ComputeStatus(1, spec, owned, usageOf(claim("1", "team-a", "pool-a", "6Gi", "Bound"), claim("2", "team-b", "pool-a", "4Gi", "Bound"),
		claim("3", "team-c", "pool-a", "1Pi", "Pending")), nil, metav1.Now())
	reasons := func(from, to int) string {
		var out []string
		for _, e := range levelEvents(from, to, st, spec) {
			out = append(out, e.reason)
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		from, to int
		want     string
	}{
		{levelNormal, levelNormal, ""},
		{levelNormal, levelHigh, ReasonUsageHigh},
		{levelHigh, levelFull, ReasonFull},
		{levelNormal, levelFull, ReasonUsageHigh + "," + ReasonFull},
		{levelHigh, levelHigh, ""},
		{levelFull, levelFull, ""},
		{levelFull, levelHigh, ""},
		{levelFull, levelNormal, ""},
	}
	for _, tc := range cases {
		if got := reasons(tc.from, tc.to); got != tc.want {
			t.Errorf("level %d -> %d: events %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
	msg := levelEvents(levelHigh, levelFull, st, spec)[0].message
	// Counts, never the names of the namespaces: whoever reads the pool's Events may not
	// learn which namespaces use it.
	if !strings.Contains(msg, "10Gi of 10Gi") || !strings.Contains(msg, "2 bound claims") || !strings.Contains(msg, "in 2 namespaces") ||
		!strings.Contains(msg, "1 pending claims ask for 1Pi more") || strings.Contains(msg, "team-") {
		t.Errorf("event message %q", msg)
	}
}

func TestStatusPatch(t *testing.T) {
	spec, _ := ParseSpec(pool(map[string]any{"capacity": "10Gi"}))
	st, _ := ComputeStatus(1, spec, owned, usageOf(claim("1", "team-a", "pool-a", "1Gi", "Bound")), nil, metav1.Now())
	p := pool(map[string]any{"capacity": "10Gi"})
	p.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Deployed"}}, "availableReplicas": int64(1)}

	patch, err := StatusPatch(p, st)
	if err != nil || patch == nil {
		t.Fatalf("patch %s, %v", patch, err)
	}
	var doc map[string]map[string]any
	if err := json.Unmarshal(patch, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc) != 1 || len(doc["status"]) != 1 || doc["status"][StatusField] == nil {
		t.Fatalf("the patch must hold status.pool and nothing else: %s", patch)
	}

	// The status as the API server returns it after the patch: no new patch.
	var applied map[string]any
	if err := json.Unmarshal(patch, &applied); err != nil {
		t.Fatal(err)
	}
	roundTripped := &unstructured.Unstructured{}
	if err := roundTripped.UnmarshalJSON(mustJSON(t, map[string]any{"apiVersion": "tos.transwarp.io/v1alpha1", "kind": "WarpdrivePool",
		"metadata": map[string]any{"name": "pool-a"}, "status": applied["status"]})); err != nil {
		t.Fatal(err)
	}
	if again, err := StatusPatch(roundTripped, st); err != nil || again != nil {
		t.Errorf("status unchanged, yet patch %s (%v)", again, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestTrimClaim(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: "data", Namespace: "team-a", UID: "u1", ResourceVersion: "7",
			Labels:        map[string]string{"app": "x"},
			Annotations:   map[string]string{"pv.kubernetes.io/bind-completed": "yes"},
			Finalizers:    []string{"kubernetes.io/pvc-protection"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("pool-a"),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeName:       "pv-1",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("5Gi"),
				"example.com/iops":     resource.MustParse("100"),
			}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Gi")}},
	}
	before := ClaimOf(pvc)
	out, err := TrimClaim(pvc)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := out.(*corev1.PersistentVolumeClaim)
	if after := ClaimOf(trimmed); after.UID != before.UID || after.Namespace != before.Namespace || after.Class != before.Class ||
		after.Phase != before.Phase || after.Size.Cmp(before.Size) != 0 {
		t.Errorf("the ledger reads %+v from the trimmed claim, %+v from the whole", after, before)
	}
	if trimmed.Labels != nil || trimmed.Annotations != nil || trimmed.Finalizers != nil || trimmed.ManagedFields != nil ||
		trimmed.Spec.AccessModes != nil || trimmed.Spec.VolumeName != "" || len(trimmed.Spec.Resources.Requests) != 1 ||
		trimmed.Status.Capacity != nil || trimmed.Name != "data" || trimmed.ResourceVersion != "7" {
		t.Errorf("trimmed claim keeps more or less than it should: %+v", trimmed)
	}
	again, _ := TrimClaim(trimmed)
	if ClaimOf(again.(*corev1.PersistentVolumeClaim)) != ClaimOf(trimmed) {
		t.Error("TrimClaim is not idempotent")
	}
}

func TestKeepPoolSpec(t *testing.T) {
	dropSpec := func(in any) (any, error) {
		delete(in.(*unstructured.Unstructured).Object, "spec")
		return in, nil
	}
	p := pool(map[string]any{"capacity": "1Gi", "overcommitRatio": 1.5, "storageClassName": "fast", "image": "x", "replicas": int64(3)})
	out, err := keepPoolSpec(dropSpec)(p)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(out.(*unstructured.Unstructured).Object, "spec")
	got, _ := json.Marshal(spec)
	if string(got) != `{"capacity":"1Gi","overcommitRatio":1.5,"storageClassName":"fast"}` {
		t.Errorf("kept spec %s", got)
	}
	out, _ = keepPoolSpec(dropSpec)(out)
	spec, _, _ = unstructured.NestedMap(out.(*unstructured.Unstructured).Object, "spec")
	if again, _ := json.Marshal(spec); string(again) != string(got) {
		t.Errorf("not idempotent: %s", again)
	}
}

var poolGVK = schema.GroupVersionKind{Group: "tos.transwarp.io", Version: "v1alpha1", Kind: "WarpdrivePool"}

// Claims of one size share their trimmed requests; the sizes stay each claim's own.
func TestTrimClaimSharesRequests(t *testing.T) {
	trim := func(size string) *corev1.PersistentVolumeClaim {
		out, _ := TrimClaim(&corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}})
		return out.(*corev1.PersistentVolumeClaim)
	}
	a, b, c := trim("3Gi"), trim("3072Mi"), trim("5Gi")
	if reflect.ValueOf(a.Spec.Resources.Requests).Pointer() != reflect.ValueOf(b.Spec.Resources.Requests).Pointer() {
		t.Error("two claims of 3Gi do not share their requests")
	}
	if got := c.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "5Gi" {
		t.Errorf("a 5Gi claim reads %s", got.String())
	}
}
