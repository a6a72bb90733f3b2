package conversionwebhook

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

// testConversions moves replicaCount to replicas and drops legacyPort from v1alpha1 to
// v1beta1, so that a conversion both moves a value and keeps one in the annotation.
const testConversions = `
- from: v1alpha1
  to: v1beta1
  moves:
  - {from: /replicaCount, to: /replicas}
  drops: [/legacyPort]
`

var testKind = schema.GroupKind{Group: "cache.example.com", Kind: "Memcached"}

func testHandler(t *testing.T) *Handler {
	t.Helper()
	chain, err := conversion.Parse([]byte(testConversions))
	if err != nil {
		t.Fatal(err)
	}
	return &Handler{Kinds: Kinds{testKind: chain}, Log: logr.Discard()}
}

// cr is a Memcached of version with spec and the metadata the API server sends.
func cr(version, name string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "cache.example.com/" + version,
		"kind":       "Memcached",
		"metadata": map[string]any{
			"name": name, "namespace": "tenant", "uid": "uid-" + name,
			"resourceVersion": "42", "generation": int64(3),
			"labels": map[string]any{"app": name},
		},
		"spec":   spec,
		"status": map[string]any{"replicas": int64(1)},
	}
}

// post sends a review of objs (raw JSON each) to h and decodes the answer.
func post(t *testing.T, h http.Handler, uid types.UID, desired string, objs ...[]byte) *apiextensionsv1.ConversionResponse {
	t.Helper()
	req := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: desired},
	}
	for _, o := range objs {
		req.Request.Objects = append(req.Request.Objects, runtime.RawExtension{Raw: o})
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "apiextensions.k8s.io/v1" || out.Kind != "ConversionReview" {
		t.Errorf("answered a %s %s, want an apiextensions.k8s.io/v1 ConversionReview", out.APIVersion, out.Kind)
	}
	if out.Response == nil {
		t.Fatal("review without a response")
	}
	if out.Response.UID != uid {
		t.Errorf("response uid %q, want the request's %q", out.Response.UID, uid)
	}
	return out.Response
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// objects decodes a successful response's objects.
func objects(t *testing.T, resp *apiextensionsv1.ConversionResponse) []map[string]any {
	t.Helper()
	if resp.Result.Status != metav1.StatusSuccess {
		t.Fatalf("review failed: %s", resp.Result.Message)
	}
	out := make([]map[string]any, len(resp.ConvertedObjects))
	for i, raw := range resp.ConvertedObjects {
		if err := json.Unmarshal(raw.Raw, &out[i]); err != nil {
			t.Fatalf("object %d: %v", i, err)
		}
	}
	return out
}

// normal is v as encoding/json decodes it, to compare with decoded responses.
func normal(t *testing.T, v any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustJSON(t, v), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConvertsEveryObjectBothWaysInOrder(t *testing.T) {
	h := testHandler(t)
	in := []map[string]any{
		cr("v1alpha1", "a", map[string]any{"replicaCount": int64(3), "legacyPort": int64(8080), "image": "memcached"}),
		cr("v1beta1", "b", map[string]any{"replicas": int64(5)}),
		cr("v1alpha1", "c", map[string]any{"replicaCount": int64(7)}),
		cr("v1beta1", "d", map[string]any{"replicas": int64(9), "image": "x"}),
	}
	raws := make([][]byte, len(in))
	for i, o := range in {
		raws[i] = mustJSON(t, o)
	}

	up := objects(t, post(t, h, "uid-up", "cache.example.com/v1beta1", raws...))
	if len(up) != len(in) {
		t.Fatalf("%d objects back, want %d", len(up), len(in))
	}
	wantSpecs := []map[string]any{
		{"replicas": 3.0, "image": "memcached"},
		{"replicas": 5.0},
		{"replicas": 7.0},
		{"replicas": 9.0, "image": "x"},
	}
	for i, o := range up {
		if o["apiVersion"] != "cache.example.com/v1beta1" {
			t.Errorf("object %d: apiVersion %v", i, o["apiVersion"])
		}
		if diff := cmp.Diff(wantSpecs[i], o["spec"]); diff != "" {
			t.Errorf("object %d spec (-want +got):\n%s", i, diff)
		}
		meta := maps.Clone(o["metadata"].(map[string]any))
		wantMeta := normal(t, in[i])["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		if _, kept := annotations[conversion.Annotation]; kept != (i == 0) {
			t.Errorf("object %d: annotation %s kept %v, want only the dropped legacyPort of a kept", i, conversion.Annotation, kept)
		}
		delete(meta, "annotations") // the kept legacyPort of a, put back on the way back
		if diff := cmp.Diff(wantMeta, meta); diff != "" {
			t.Errorf("object %d (order kept?) metadata (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(normal(t, in[i])["status"], o["status"]); diff != "" {
			t.Errorf("object %d status (-want +got):\n%s", i, diff)
		}
	}

	// Back to v1alpha1: a and c are as they were (legacyPort back from the annotation).
	back := make([][]byte, len(up))
	for i, o := range up {
		back[i] = mustJSON(t, o)
	}
	down := objects(t, post(t, h, "uid-down", "cache.example.com/v1alpha1", back...))
	for _, i := range []int{0, 2} {
		if diff := cmp.Diff(normal(t, in[i]), down[i]); diff != "" {
			t.Errorf("object %d converted and back (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(map[string]any{"replicaCount": 5.0}, down[1]["spec"]); diff != "" {
		t.Errorf("b in v1alpha1 (-want +got):\n%s", diff)
	}
	if down[3]["apiVersion"] != "cache.example.com/v1alpha1" {
		t.Errorf("d: apiVersion %v", down[3]["apiVersion"])
	}
}

func TestPassesThroughWhatItCannotConvert(t *testing.T) {
	h := testHandler(t)
	unknownKind := cr("v1alpha1", "other", map[string]any{"replicaCount": int64(3)})
	unknownKind["kind"] = "Guestbook"
	badMeta := cr("v1alpha1", "bad", map[string]any{"replicaCount": int64(3)})
	badMeta["metadata"] = "not an object"
	notAnObject := []byte(`["not", "an", "object"]`)

	got := post(t, h, "uid-pass", "cache.example.com/v1beta1",
		mustJSON(t, unknownKind), mustJSON(t, badMeta), notAnObject)
	objs := got.ConvertedObjects
	if got.Result.Status != metav1.StatusSuccess || len(objs) != 3 {
		t.Fatalf("result %+v with %d objects, want success with 3", got.Result, len(objs))
	}
	for i, in := range []map[string]any{unknownKind, badMeta} {
		want := normal(t, in)
		want["apiVersion"] = "cache.example.com/v1beta1"
		var out map[string]any
		if err := json.Unmarshal(objs[i].Raw, &out); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, out); diff != "" {
			t.Errorf("object %d, passed through with its apiVersion changed (-want +got):\n%s", i, diff)
		}
	}
	if !bytes.Equal(objs[2].Raw, []byte(`["not","an","object"]`)) {
		t.Errorf("a value that is not an object came back as %s, want it as it was", objs[2].Raw)
	}
}

func TestFailsWhereLosingValuesWouldBeWorse(t *testing.T) {
	h := testHandler(t)
	ok := mustJSON(t, cr("v1alpha1", "fine", map[string]any{"replicaCount": int64(1)}))
	for _, tc := range []struct {
		name    string
		obj     map[string]any
		desired string
		index   string // of the object that fails
		want    string
	}{{
		name:    "unknown source version",
		obj:     cr("v2", "new", map[string]any{"replicas": int64(1)}),
		desired: "cache.example.com/v1beta1",
		index:   "object 2 of 2: ",
		want:    "version v2 is not in its chart's conversions.yaml",
	}, {
		name:    "unknown target version",
		obj:     cr("v1alpha1", "old", map[string]any{"replicaCount": int64(1)}),
		desired: "cache.example.com/v2",
		index:   "object 1 of 2: ",
		want:    "version v2 is not in its chart's conversions.yaml",
	}, {
		name:    "kept values beyond the annotation's bound",
		obj:     cr("v1alpha1", "huge", map[string]any{"legacyPort": strings.Repeat("x", conversion.MaxAnnotationBytes)}),
		desired: "cache.example.com/v1beta1",
		index:   "object 2 of 2: ",
		want:    "Memcached tenant/huge from v1alpha1 to v1beta1: values without a place",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, h, "uid-fail", tc.desired, ok, mustJSON(t, tc.obj))
			if resp.Result.Status != metav1.StatusFailure {
				t.Fatalf("result %+v, want a failure", resp.Result)
			}
			if !strings.Contains(resp.Result.Message, tc.index+"Memcached") || !strings.Contains(resp.Result.Message, tc.want) {
				t.Errorf("message %q, want %q and %q", resp.Result.Message, tc.index, tc.want)
			}
			if len(resp.ConvertedObjects) != 0 {
				t.Errorf("a failed review carries %d objects", len(resp.ConvertedObjects))
			}
		})
	}
}

func TestRefusesWhatIsNotAReview(t *testing.T) {
	h := testHandler(t)
	tooLarge := append([]byte(`{"request":{"uid":"x","objects":[{"pad":"`), bytes.Repeat([]byte("x"), MaxRequestBytes)...)
	tooLarge = append(tooLarge, `"}]}}`...)
	for _, tc := range []struct {
		name   string
		method string
		body   []byte
		want   int
	}{
		{"oversized body", http.MethodPost, tooLarge, http.StatusRequestEntityTooLarge},
		{"not JSON", http.MethodPost, []byte("nope"), http.StatusBadRequest},
		{"no request", http.MethodPost, []byte(`{"kind":"ConversionReview"}`), http.StatusBadRequest},
		{"GET", http.MethodGet, nil, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, Path, bytes.NewReader(tc.body)))
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d", rec.Code, tc.want)
			}
		})
	}
}

func TestAReviewJustUnderTheBoundIsServed(t *testing.T) {
	h := testHandler(t)
	spec := map[string]any{"replicaCount": int64(1), "image": strings.Repeat("x", MaxRequestBytes-4096)}
	resp := post(t, h, "uid-big", "cache.example.com/v1beta1", mustJSON(t, cr("v1alpha1", "big", spec)))
	if len(objects(t, resp)) != 1 {
		t.Fatalf("want one object back")
	}
}
