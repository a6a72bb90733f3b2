package valuesfrom

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const canary = "canary-7f3a9c"

func secret(name string, readable bool, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name}, Data: map[string][]byte{}}
	if readable {
		s.Labels = map[string]string{ReadableLabel: "true"}
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name}, Data: data}
}

func cr(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetNamespace("tenant")
	u.SetName("app")
	return u
}

func refs(rs ...map[string]any) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// recordingReader records what it was asked to read, by type.
type recordingReader struct {
	client.Reader
	gets []string
}

func (r *recordingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets = append(r.gets, fmt.Sprintf("%T %s", obj, key.Name))
	return r.Reader.Get(ctx, key, obj, opts...)
}

func resolver(objs ...client.Object) (Resolver, *recordingReader) {
	rec := &recordingReader{Reader: fake.NewClientBuilder().WithObjects(objs...).Build()}
	return Resolver{Reader: rec}, rec
}

func TestResolveMergesInOrderThenOwnValues(t *testing.T) {
	r, _ := resolver(
		configMap("defaults", map[string]string{"values.yaml": "image:\n  tag: v1\n  pullPolicy: Always\nreplicas: 1\n"}),
		secret("db", true, map[string]string{"creds.yaml": "auth:\n  password: " + canary + "\nreplicas: 2\n", "token": "a,b={c}\n"}),
	)
	res, err := r.Resolve(context.Background(), cr(map[string]any{
		"valuesFrom": refs(
			map[string]any{"kind": "ConfigMap", "name": "defaults"},
			map[string]any{"kind": "Secret", "name": "db", "valuesKey": "creds.yaml"},
			map[string]any{"kind": "Secret", "name": "db", "valuesKey": "token", "targetPath": "api.tokens[1]"},
		),
		"image": map[string]any{"tag": "v2"},
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"image":    map[string]any{"tag": "v2", "pullPolicy": "Always"}, // own values on top, maps merged
		"replicas": float64(2),                                          // the later source wins
		"auth":     map[string]any{"password": canary},
		"api":      map[string]any{"tokens": []any{nil, "a,b={c}\n"}}, // the text as it is, at the path
	}
	if !reflect.DeepEqual(res.Values, want) {
		t.Errorf("values:\n got %#v\nwant %#v", res.Values, want)
	}
	if len(res.Sources) != 3 || res.Sources[0].Kind != KindConfigMap || res.Sources[1].Name != "db" ||
		res.Sources[1].ResourceVersion == "" {
		t.Errorf("sources: %+v", res.Sources)
	}
	if got := res.Secrets.Redact("error calling fail: " + canary + " / " + "YWJj"); strings.Contains(got, canary) {
		t.Errorf("not redacted: %s", got)
	}
}

func TestResolveWithoutSources(t *testing.T) {
	r, rec := resolver()
	res, err := r.Resolve(context.Background(), cr(map[string]any{"size": int64(3)}))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Values, map[string]any{"size": int64(3)}) || len(res.Sources) != 0 || !res.Secrets.Empty() {
		t.Errorf("got %+v", res)
	}
	if len(rec.gets) != 0 {
		t.Errorf("read %v for a CR without references", rec.gets)
	}
}

// An unlabelled Secret is refused from its metadata: its data is never read.
func TestResolveRefusesUnlabelledSecretWithoutReadingIt(t *testing.T) {
	r, rec := resolver(secret("other", false, map[string]string{"values.yaml": "x: " + canary}))
	_, err := r.Resolve(context.Background(), cr(map[string]any{
		"valuesFrom": refs(map[string]any{"kind": "Secret", "name": "other"})}))
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonNotReadable {
		t.Fatalf("got %v, want a NotReadable error", err)
	}
	if !strings.Contains(err.Error(), `Secret "other"`) || !strings.Contains(err.Error(), ReadableLabel) {
		t.Errorf("message does not name the Secret and the label: %s", err)
	}
	for _, g := range rec.gets {
		if strings.HasPrefix(g, "*v1.Secret") {
			t.Errorf("read the unlabelled Secret's data: %v", rec.gets)
		}
	}
}

func TestResolveErrorsNameTheSourceNeverItsContent(t *testing.T) {
	big := strings.Repeat("x", MaxBytes/2+1)
	r, _ := resolver(
		secret("notyaml", true, map[string]string{"values.yaml": "- " + canary + "\n- is a list"}),
		secret("big1", true, map[string]string{"values.yaml": "a: " + big}),
		secret("big2", true, map[string]string{"values.yaml": "b: " + big}),
		configMap("cm", map[string]string{"other": "x: 1"}),
	)
	for _, c := range []struct {
		name   string
		refs   []any
		reason string
		says   string
	}{
		{"missing", refs(map[string]any{"kind": "Secret", "name": "gone"}), ReasonNotFound, `Secret "gone": not found`},
		{"missing ConfigMap", refs(map[string]any{"kind": "ConfigMap", "name": "gone"}), ReasonNotFound, `ConfigMap "gone": not found`},
		{"no key", refs(map[string]any{"kind": "ConfigMap", "name": "cm"}), ReasonKeyMissing, `has no key "values.yaml"`},
		{"not a map", refs(map[string]any{"kind": "Secret", "name": "notyaml"}), ReasonInvalid, "is not a YAML map"},
		{"over 1 MiB in all", refs(map[string]any{"kind": "Secret", "name": "big1"}, map[string]any{"kind": "Secret", "name": "big2"}),
			ReasonTooLarge, "more than 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Resolve(context.Background(), cr(map[string]any{"valuesFrom": c.refs}))
			var e *Error
			if !errors.As(err, &e) || e.Reason != c.reason {
				t.Fatalf("got %v, want reason %s", err, c.reason)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Errorf("%q does not say %q", err, c.says)
			}
			if strings.Contains(err.Error(), canary) || strings.Contains(err.Error(), "xxxx") {
				t.Errorf("the message quotes the content: %.200s", err)
			}
		})
	}
}

func TestResolveOptionalSkipsWhatIsMissing(t *testing.T) {
	r, _ := resolver(configMap("cm", map[string]string{"values.yaml": "a: 1"}))
	res, err := r.Resolve(context.Background(), cr(map[string]any{"valuesFrom": refs(
		map[string]any{"kind": "Secret", "name": "gone", "optional": true},
		map[string]any{"kind": "ConfigMap", "name": "cm", "valuesKey": "nokey", "optional": true},
		map[string]any{"kind": "ConfigMap", "name": "cm"},
	)}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sources) != 1 || !reflect.DeepEqual(res.Values, map[string]any{"a": float64(1)}) {
		t.Errorf("got %+v", res)
	}
}

func TestRefsRefusesWhatTheSchemaRefuses(t *testing.T) {
	many := make([]any, MaxRefs+1)
	for i := range many {
		many[i] = map[string]any{"kind": "ConfigMap", "name": fmt.Sprint("cm", i)}
	}
	for name, list := range map[string]any{
		"too many":       many,
		"other kind":     refs(map[string]any{"kind": "ServiceAccount", "name": "x"}),
		"a namespace":    refs(map[string]any{"kind": "Secret", "name": "other-ns/x"}),
		"bad key":        refs(map[string]any{"kind": "Secret", "name": "x", "valuesKey": "../x"}),
		"long path":      refs(map[string]any{"kind": "Secret", "name": "x", "targetPath": strings.Repeat("a", 251)}),
		"not a list":     "Secret/x",
		"optional typed": refs(map[string]any{"kind": "Secret", "name": "x", "optional": "yes"}),
	} {
		if _, err := Refs(cr(map[string]any{"valuesFrom": list})); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRedactorKeepsErrorsComparable(t *testing.T) {
	var r Redactor
	r.add(canary)
	r.done()
	base := errors.New("boom")
	err := r.Error(fmt.Errorf("render: %s: %w", canary, base))
	if strings.Contains(err.Error(), canary) || !strings.Contains(err.Error(), Redacted) || !errors.Is(err, base) {
		t.Errorf("got %v", err)
	}
	if plain := errors.New("nothing secret"); r.Error(plain) != plain {
		t.Error("an error quoting nothing was changed")
	}
}

// The apiserver fills a CR's spec in with the schema's defaults: a value left at the chart's
// default does not hide a source's, one set to anything else does.
func TestResolveDefaultsDoNotHideSources(t *testing.T) {
	r, _ := resolver(configMap("cm", map[string]string{"values.yaml": "image: from-source\nresources:\n  limits:\n    cpu: 2\nsize: 5\n"}))
	r.Defaults = map[string]any{"image": "chart-default", "size": float64(1),
		"resources": map[string]any{"limits": map[string]any{"cpu": "100m"}}}
	res, err := r.Resolve(context.Background(), cr(map[string]any{
		"valuesFrom": refs(map[string]any{"kind": "ConfigMap", "name": "cm"}),
		"image":      "chart-default",                                         // defaulted by the schema
		"resources":  map[string]any{"limits": map[string]any{"cpu": "100m"}}, // likewise, nested
		"size":       int64(3),                                                // set by the user
		"extra":      true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"image": "from-source", "size": int64(3), "extra": true,
		"resources": map[string]any{"limits": map[string]any{"cpu": float64(2)}}}
	if !reflect.DeepEqual(res.Values, want) {
		t.Errorf("values:\n got %#v\nwant %#v", res.Values, want)
	}
}
