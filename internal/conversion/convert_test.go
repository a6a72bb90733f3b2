package conversion

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// redisSteps is a chart whose values were reorganised between two versions, as Bitnami's
// redis chart was, with a field v1 has no counterpart for.
const redisSteps = `
- from: v1alpha1
  to: v1
  moves:
  - {from: /replicaCount, to: /replicas}
  - {from: /password, to: /auth/password}
  - {from: /old/nested/port, to: /port}
  - {from: /a, to: /b}
  - {from: /b, to: /a}
  - {from: "/x~1y", to: "/x~0y"}
  drops: [/legacyPort]
`

func mustParse(t testing.TB, file string) *Chain {
	t.Helper()
	c, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// cr is a CR of the group cache.example.com at version; spec is left out if it is absent,
// and the annotation if kept is "".
func cr(version string, spec any, kept string) map[string]any {
	obj := map[string]any{
		"apiVersion": "cache.example.com/" + version,
		"kind":       "Redis",
		"metadata": map[string]any{
			"name":        "cache",
			"namespace":   "tenant-a",
			"labels":      map[string]any{"app": "cache"},
			"annotations": map[string]any{"note": "kept as is"},
		},
		"status": map[string]any{"phase": "Deployed", "replicas": int64(3)},
	}
	if spec != absent {
		obj["spec"] = spec
	}
	if kept != "" {
		obj["metadata"].(map[string]any)["annotations"].(map[string]any)[Annotation] = kept
	}
	return obj
}

// absent stands for a spec the object does not have.
var absent any = struct{}{}

// convert converts obj to version and fails the test on an error, or if obj changed.
func convert(t *testing.T, c *Chain, obj map[string]any, version string) map[string]any {
	t.Helper()
	before := copyValue(obj)
	out, err := c.ConvertMap(obj, version)
	if err != nil {
		t.Fatalf("ConvertMap to %s: %v", version, err)
	}
	if !reflect.DeepEqual(obj, before) {
		t.Fatalf("ConvertMap to %s modified its input:\n%s", version, cmp.Diff(before, obj))
	}
	return out
}

func TestConvert(t *testing.T) {
	c := mustParse(t, redisSteps)
	for _, tc := range []struct {
		name             string
		from, to         string
		spec, want       any
		wantKept         string
		wantBackWithKept bool // the conversion back keeps something too (edits)
	}{{
		name: "moves values, creating the objects on the way",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{"replicaCount": int64(3), "password": "secret", "image": "redis:7", "x/y": true},
		want: map[string]any{"replicas": int64(3), "auth": map[string]any{"password": "secret"}, "image": "redis:7", "x~y": true},
	}, {
		name: "removes the objects a move empties",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{"old": map[string]any{"nested": map[string]any{"port": int64(80)}}},
		want: map[string]any{"port": int64(80)},
	}, {
		name: "leaves the objects a move does not empty",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{"old": map[string]any{"nested": map[string]any{"port": int64(80), "host": "h"}}},
		want: map[string]any{"port": int64(80), "old": map[string]any{"nested": map[string]any{"host": "h"}}},
	}, {
		name: "swaps",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{"a": int64(1), "b": map[string]any{"c": "d"}},
		want: map[string]any{"a": map[string]any{"c": "d"}, "b": int64(1)},
	}, {
		name: "moves null and empty values as values",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{"replicaCount": nil, "password": map[string]any{}, "a": []any{}},
		want: map[string]any{"replicas": nil, "auth": map[string]any{"password": map[string]any{}}, "b": []any{}},
	}, {
		name: "moves a value of any type",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{"replicaCount": "three", "password": []any{int64(1), 2.5}},
		want: map[string]any{"replicas": "three", "auth": map[string]any{"password": []any{int64(1), 2.5}}},
	}, {
		name: "keeps an empty object it found on a destination's way",
		from: "v1alpha1", to: "v1",
		spec:     map[string]any{"password": "secret", "auth": map[string]any{}},
		want:     map[string]any{"auth": map[string]any{"password": "secret"}},
		wantKept: `{"v1alpha1":{"/auth":{}}}`,
	}, {
		name: "keeps a value whose destination a string blocks",
		from: "v1alpha1", to: "v1",
		spec:     map[string]any{"password": "secret", "auth": "none"},
		want:     map[string]any{"auth": "none"},
		wantKept: `{"v1alpha1":{"/password":"secret"}}`,
	}, {
		name: "keeps a value whose destination a list blocks",
		from: "v1alpha1", to: "v1",
		spec:     map[string]any{"password": "secret", "auth": []any{map[string]any{"password": "other"}}},
		want:     map[string]any{"auth": []any{map[string]any{"password": "other"}}},
		wantKept: `{"v1alpha1":{"/password":"secret"}}`,
	}, {
		name: "keeps a value whose destination a null blocks",
		from: "v1alpha1", to: "v1",
		spec:     map[string]any{"password": "secret", "auth": nil},
		want:     map[string]any{"auth": nil},
		wantKept: `{"v1alpha1":{"/password":"secret"}}`,
	}, {
		name: "keeps a value that was at a destination, which the moved one replaces",
		from: "v1alpha1", to: "v1",
		spec:     map[string]any{"replicaCount": int64(3), "replicas": int64(5), "auth": map[string]any{"password": "stray", "user": "u"}},
		want:     map[string]any{"replicas": int64(3), "auth": map[string]any{"user": "u"}},
		wantKept: `{"v1alpha1":{"/auth/password":"stray","/replicas":5}}`,
	}, {
		name: "keeps a dropped value",
		from: "v1alpha1", to: "v1",
		spec:     map[string]any{"legacyPort": int64(6379), "image": "redis"},
		want:     map[string]any{"image": "redis"},
		wantKept: `{"v1alpha1":{"/legacyPort":6379}}`,
	}, {
		name: "keeps nothing for a source through a value that is not an object",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{"old": "str", "a": nil},
		want: map[string]any{"old": "str", "b": nil},
	}, {
		name: "passes a string spec through",
		from: "v1alpha1", to: "v1",
		spec: "replicaCount: 3", want: "replicaCount: 3",
	}, {
		name: "passes a list spec through",
		from: "v1alpha1", to: "v1",
		spec: []any{map[string]any{"replicaCount": int64(3)}}, want: []any{map[string]any{"replicaCount": int64(3)}},
	}, {
		name: "passes a null spec through",
		from: "v1alpha1", to: "v1",
		spec: nil, want: nil,
	}, {
		name: "passes no spec through",
		from: "v1alpha1", to: "v1",
		spec: absent, want: absent,
	}, {
		name: "passes an empty spec through",
		from: "v1alpha1", to: "v1",
		spec: map[string]any{}, want: map[string]any{},
	}, {
		name: "moves back",
		from: "v1", to: "v1alpha1",
		spec: map[string]any{"replicas": int64(3), "auth": map[string]any{"password": "secret"}, "port": int64(80)},
		want: map[string]any{"replicaCount": int64(3), "password": "secret", "old": map[string]any{"nested": map[string]any{"port": int64(80)}}},
	}, {
		name: "keeps on the way back a value where the older version has the moved field",
		from: "v1", to: "v1alpha1",
		spec:     map[string]any{"replicas": int64(3), "replicaCount": int64(7)},
		want:     map[string]any{"replicaCount": int64(3)},
		wantKept: `{"v1":{"/replicaCount":7}}`,
	}, {
		name: "keeps on the way back a value where the older version has a dropped field",
		from: "v1", to: "v1alpha1",
		spec:     map[string]any{"legacyPort": "new meaning"},
		want:     map[string]any{},
		wantKept: `{"v1":{"/legacyPort":"new meaning"}}`,
	}, {
		name: "keeps on the way back a value whose source a string blocks",
		from: "v1", to: "v1alpha1",
		spec:     map[string]any{"port": int64(80), "old": "str"},
		want:     map[string]any{"old": "str"},
		wantKept: `{"v1":{"/port":80}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := cr(tc.from, tc.spec, "")
			out := convert(t, c, in, tc.to)

			want := cr(tc.to, tc.want, tc.wantKept)
			if !reflect.DeepEqual(out, want) {
				t.Errorf("converted to %s:\n%s", tc.to, cmp.Diff(want, out))
			}
			back := convert(t, c, out, tc.from)
			if !reflect.DeepEqual(back, in) {
				t.Errorf("converted back to %s:\n%s", tc.from, cmp.Diff(in, back))
			}
		})
	}
}

// The annotation comes and goes with what it keeps, and leaves the other annotations be.
func TestConvertAnnotation(t *testing.T) {
	c := mustParse(t, redisSteps)

	in := cr("v1alpha1", map[string]any{"legacyPort": int64(1)}, "")
	delete(in["metadata"].(map[string]any), "annotations")
	out := convert(t, c, in, "v1")
	if got := out["metadata"].(map[string]any)["annotations"]; !reflect.DeepEqual(got, map[string]any{Annotation: `{"v1alpha1":{"/legacyPort":1}}`}) {
		t.Errorf("annotations = %v", got)
	}
	if back := convert(t, c, out, "v1alpha1"); !reflect.DeepEqual(back, in) {
		t.Errorf("converted back, the annotations map it made stays:\n%s", cmp.Diff(in, back))
	}

	noMetadata := map[string]any{"apiVersion": "v1alpha1", "spec": map[string]any{"legacyPort": int64(1)}}
	out = convert(t, c, noMetadata, "v1")
	if back := convert(t, c, out, "v1alpha1"); !reflect.DeepEqual(back, noMetadata) {
		t.Errorf("converted back, the metadata it made stays:\n%s", cmp.Diff(noMetadata, back))
	}
	if out["apiVersion"] != "v1" {
		t.Errorf("apiVersion of the core group = %v, want v1", out["apiVersion"])
	}
}

// An edit in the target version wins over a value kept from before it, which is not
// restored then, nor kept any longer.
func TestConvertEditWins(t *testing.T) {
	c := mustParse(t, redisSteps)
	v1 := convert(t, c, cr("v1alpha1", map[string]any{"password": "old", "auth": "none", "auth2": "x"}, ""), "v1")
	if got := v1["metadata"].(map[string]any)["annotations"].(map[string]any)[Annotation]; got != `{"v1alpha1":{"/password":"old"}}` {
		t.Fatalf("annotation = %v", got)
	}
	v1["spec"] = map[string]any{"auth": map[string]any{"password": "new"}}
	want := cr("v1alpha1", map[string]any{"password": "new"}, "")
	if got := convert(t, c, v1, "v1alpha1"); !reflect.DeepEqual(got, want) {
		t.Errorf("converted back after an edit:\n%s", cmp.Diff(want, got))
	}

	v1["spec"] = "not an object any more"
	want = cr("v1alpha1", "not an object any more", "")
	if got := convert(t, c, v1, "v1alpha1"); !reflect.DeepEqual(got, want) {
		t.Errorf("converted back after the spec became a string:\n%s", cmp.Diff(want, got))
	}
}

// What only this package writes, and finds malformed or stale, holds nothing.
func TestConvertIgnoresAMalformedAnnotation(t *testing.T) {
	c := mustParse(t, redisSteps)
	for _, kept := range []string{
		`not JSON`,
		`["v1"]`,
		`{"v1": "not an object"}`,
		`{"v1": {"not a pointer": 1, "/a~": 2, "": 3}}`,
		`{"v1alpha1": {"/extra": 1}}`, // kept for the version the object has: stale
	} {
		in := cr("v1alpha1", map[string]any{"replicaCount": int64(1)}, kept)
		want := cr("v1", map[string]any{"replicas": int64(1)}, "")
		if got := convert(t, c, in, "v1"); !reflect.DeepEqual(got, want) {
			t.Errorf("with annotation %s:\n%s", kept, cmp.Diff(want, got))
		}
	}
}

// Moves between versions of one schema (a step with no moves) change apiVersion alone.
func TestConvertSameSchema(t *testing.T) {
	c := mustParse(t, "- {from: v1beta1, to: v1}")
	spec := map[string]any{
		"replicaCount": int64(2),
		"auth":         map[string]any{"password": "p", "empty": map[string]any{}},
		"list":         []any{"a", int64(1), 1.5, nil, true, map[string]any{"k": "v"}},
	}
	for _, from := range []string{"v1beta1", "v1"} {
		to := map[string]string{"v1beta1": "v1", "v1": "v1beta1"}[from]
		in := cr(from, spec, "")
		got := convert(t, c, in, to)
		want := copyValue(in).(map[string]any)
		want["apiVersion"] = "cache.example.com/" + to
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s to %s:\n%s", from, to, cmp.Diff(want, got))
		}
	}
}

func TestConvertToItsOwnVersion(t *testing.T) {
	c := mustParse(t, redisSteps)
	in := cr("v1", map[string]any{"replicaCount": int64(1)}, `{"v1alpha1":{"/legacyPort":1}}`)
	if got := convert(t, c, in, "v1"); !reflect.DeepEqual(got, in) {
		t.Errorf("converted to its own version:\n%s", cmp.Diff(in, got))
	}
}

// Over three versions, each step keeps its values under its own version, and a conversion
// between the ends applies both steps, either way.
func TestConvertChain(t *testing.T) {
	c := mustParse(t, `
- from: v1alpha1
  to: v1beta1
  moves: [{from: /replicaCount, to: /replicas}]
  drops: [/legacyPort]
- from: v1beta1
  to: v1
  moves: [{from: /replicas, to: /scale/replicas}]
  drops: [/tls]
`)
	in := cr("v1alpha1", map[string]any{"replicaCount": int64(3), "legacyPort": int64(1), "tls": true}, "")
	out := convert(t, c, in, "v1")
	want := cr("v1", map[string]any{"scale": map[string]any{"replicas": int64(3)}}, `{"v1alpha1":{"/legacyPort":1},"v1beta1":{"/tls":true}}`)
	if !reflect.DeepEqual(out, want) {
		t.Errorf("v1alpha1 to v1:\n%s", cmp.Diff(want, out))
	}
	mid := convert(t, c, out, "v1beta1")
	want = cr("v1beta1", map[string]any{"replicas": int64(3), "tls": true}, `{"v1alpha1":{"/legacyPort":1}}`)
	if !reflect.DeepEqual(mid, want) {
		t.Errorf("v1 to v1beta1:\n%s", cmp.Diff(want, mid))
	}
	if back := convert(t, c, out, "v1alpha1"); !reflect.DeepEqual(back, in) {
		t.Errorf("v1 to v1alpha1:\n%s", cmp.Diff(in, back))
	}
	if back := convert(t, c, mid, "v1alpha1"); !reflect.DeepEqual(back, in) {
		t.Errorf("v1beta1 to v1alpha1:\n%s", cmp.Diff(in, back))
	}
}

func TestConvertFailsOnlyForVersionsAndTheBound(t *testing.T) {
	c := mustParse(t, redisSteps)
	for _, tc := range []struct {
		name    string
		obj     map[string]any
		version string
		want    string
	}{
		{"unknown target", cr("v1alpha1", nil, ""), "v2", `target version "v2" is not one of the kind's (v1alpha1, v1)`},
		{"unknown source", cr("v2", nil, ""), "v1", `version "v2" is not one of the kind's`},
		{"no apiVersion", map[string]any{"spec": map[string]any{}}, "v1", `version "" is not one of the kind's`},
		{"malformed apiVersion", map[string]any{"apiVersion": "a/b/c"}, "v1", `apiVersion: unexpected GroupVersion string`},
		{"nil object", nil, "v1", `version "" is not one of the kind's`},
		{"over the bound", cr("v1alpha1", map[string]any{"legacyPort": strings.Repeat("x", MaxAnnotationBytes)}, ""), "v1",
			"more than the 262144 the conversion.warpdrive.transwarp.io/unconverted annotation may hold"},
		{"metadata not an object", map[string]any{"apiVersion": "g/v1alpha1", "metadata": "m", "spec": map[string]any{"legacyPort": int64(1)}}, "v1",
			"metadata is not an object"},
		{"annotations not an object", map[string]any{"apiVersion": "g/v1alpha1", "metadata": map[string]any{"annotations": nil}, "spec": map[string]any{"legacyPort": int64(1)}}, "v1",
			"metadata: annotations is not an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := copyValue(tc.obj)
			got, err := c.ConvertMap(tc.obj, tc.version)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ConvertMap = %v, %v; want an error with %q", got, err, tc.want)
			}
			if !reflect.DeepEqual(tc.obj, before) {
				t.Errorf("ConvertMap modified its input")
			}
		})
	}

	// Just under the bound, the value is kept.
	big := strings.Repeat("x", MaxAnnotationBytes-len(`{"v1alpha1":{"/legacyPort":""}}`))
	out := convert(t, c, cr("v1alpha1", map[string]any{"legacyPort": big}, ""), "v1")
	if back := convert(t, c, out, "v1alpha1"); back["spec"].(map[string]any)["legacyPort"] != big {
		t.Error("a value just under the bound did not come back")
	}

	// Metadata need not be an object where nothing is kept.
	obj := map[string]any{"apiVersion": "g/v1alpha1", "metadata": "m", "spec": map[string]any{"replicaCount": int64(1)}}
	if _, err := c.ConvertMap(obj, "v1"); err != nil {
		t.Errorf("ConvertMap with nothing to keep: %v", err)
	}
}

// Values too big or deep for a webhook's taste convert as small ones do.
func TestConvertHugeValues(t *testing.T) {
	c := mustParse(t, redisSteps)
	deep := any("bottom")
	for range 5000 {
		deep = map[string]any{"d": []any{deep}}
	}
	wide := map[string]any{}
	for i := range 20_000 {
		wide[fmt.Sprint("key", i)] = strings.Repeat("v", i%100)
	}
	in := cr("v1alpha1", map[string]any{"password": deep, "replicaCount": wide, "auth": map[string]any{}}, "")
	out := convert(t, c, in, "v1")
	if back := convert(t, c, out, "v1alpha1"); !reflect.DeepEqual(back, in) {
		t.Error("huge values did not come back")
	}
}

func TestConvertUnstructured(t *testing.T) {
	c := mustParse(t, redisSteps)
	in := &unstructured.Unstructured{Object: cr("v1alpha1", map[string]any{"replicaCount": int64(2)}, "")}
	out, err := c.Convert(in, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if got := out.GetAPIVersion(); got != "cache.example.com/v1" {
		t.Errorf("apiVersion = %q", got)
	}
	if got, _, _ := unstructured.NestedInt64(out.Object, "spec", "replicas"); got != 2 {
		t.Errorf("spec.replicas = %d", got)
	}
	if in.GetAPIVersion() != "cache.example.com/v1alpha1" {
		t.Error("Convert modified its input")
	}
	if _, err := c.Convert(nil, "v1"); err == nil {
		t.Error("Convert(nil) succeeded")
	}
}
