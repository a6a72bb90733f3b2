package conversion

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want pointer
	}{
		{"/replicas", pointer{"replicas"}},
		{"/auth/password", pointer{"auth", "password"}},
		{"/a~1b", pointer{"a/b"}},
		{"/a~0b", pointer{"a~b"}},
		{"/~01", pointer{"~1"}}, // "~0" is read first: not "/"
		{"/0", pointer{"0"}},
		{"/a b/ü", pointer{"a b", "ü"}},
	} {
		got, err := parsePointer(tc.in)
		if err != nil {
			t.Errorf("parsePointer(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parsePointer(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if s := got.String(); s != tc.in {
			t.Errorf("parsePointer(%q).String() = %q", tc.in, s)
		}
	}
}

func TestParsePointerRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"":       "whole spec",
		"a/b":    "does not start with /",
		"/":      "empty key",
		"/a//b":  "empty key",
		"/a/":    "empty key",
		"/a~":    "~ must be followed by 0",
		"/a~2":   "~ must be followed by 0",
		"/a~~0b": "~ must be followed by 0",
	} {
		_, err := parsePointer(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parsePointer(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func TestInside(t *testing.T) {
	a, ab, abc, ac := pointer{"a"}, pointer{"a", "b"}, pointer{"a", "b", "c"}, pointer{"a", "c"}
	for _, tc := range []struct {
		p, q pointer
		want bool
	}{
		{ab, a, true}, {abc, a, true}, {abc, ab, true},
		{a, a, false}, {a, ab, false}, {ac, ab, false},
		{pointer{"ab"}, a, false},
	} {
		if got := tc.p.inside(tc.q); got != tc.want {
			t.Errorf("%s inside %s = %v, want %v", tc.p, tc.q, got, tc.want)
		}
	}
}

func TestTakeRemovesTheObjectsItEmpties(t *testing.T) {
	spec := map[string]any{
		"a": map[string]any{"b": map[string]any{"c": 1}},
		"x": map[string]any{"y": 1, "z": 2},
	}
	if v, ok := take(spec, pointer{"a", "b", "c"}); !ok || v != 1 {
		t.Fatalf("take /a/b/c = %v, %v", v, ok)
	}
	if v, ok := take(spec, pointer{"x", "y"}); !ok || v != 1 {
		t.Fatalf("take /x/y = %v, %v", v, ok)
	}
	want := map[string]any{"x": map[string]any{"z": 2}}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("spec = %v, want %v", spec, want)
	}
	if v, ok := take(spec, pointer{"x"}); !ok || len(spec) != 0 || !reflect.DeepEqual(v, map[string]any{"z": 2}) {
		t.Errorf("take /x = %v, %v, spec %v: want the object, and spec itself left empty", v, ok, spec)
	}
}

func TestTakeMissesWhatIsNotThere(t *testing.T) {
	spec := map[string]any{"s": "str", "l": []any{map[string]any{"k": 1}}, "n": nil, "m": map[string]any{}}
	for _, p := range []pointer{{"none"}, {"s", "k"}, {"l", "0", "k"}, {"l", "k"}, {"n", "k"}, {"m", "k"}, {"m", "k", "j"}} {
		if v, ok := take(spec, p); ok {
			t.Errorf("take %s = %v, want nothing", p, v)
		}
	}
	if len(spec) != 4 {
		t.Errorf("spec changed: %v", spec)
	}
	if v, ok := take(spec, pointer{"n"}); !ok || v != nil {
		t.Errorf("take /n = %v, %v: a null is a value", v, ok)
	}
}

func TestPut(t *testing.T) {
	spec := map[string]any{"s": "str", "l": []any{}, "n": nil, "m": map[string]any{"k": 1}, "nilmap": map[string]any(nil)}
	for _, p := range []pointer{{"s", "k"}, {"l", "k"}, {"n", "k"}, {"m", "k", "j"}, {"nilmap", "k"}} {
		if free(spec, p) {
			t.Errorf("free %s, want blocked", p)
		}
		if put(spec, p, 2) {
			t.Errorf("put %s succeeded, want blocked", p)
		}
	}
	if free(spec, pointer{"m", "k"}) {
		t.Error("free /m/k, want taken")
	}
	for _, p := range []pointer{{"new"}, {"m", "new"}, {"a", "b", "c"}} {
		if !free(spec, p) || !put(spec, p, 2) {
			t.Errorf("put %s failed", p)
		}
	}
	want := map[string]any{
		"s": "str", "l": []any{}, "n": nil, "nilmap": map[string]any(nil),
		"m":   map[string]any{"k": 1, "new": 2},
		"new": 2,
		"a":   map[string]any{"b": map[string]any{"c": 2}},
	}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("spec = %v, want %v", spec, want)
	}
}
