package crdgen

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// Every kind's spec has valuesFrom, bounded, whose entries the apiserver checks; the status
// has the versions read.
func TestValuesFromSchema(t *testing.T) {
	dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), map[string]string{AnnotationPlural: "widgets"}, testSchema)
	crd, err := Generate(dir, widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := root.Properties["spec"]
	if _, ok := spec.Properties[valuesfrom.Field]; !ok {
		t.Fatal("spec has no valuesFrom")
	}
	status := root.Properties["status"].Properties[valuesfrom.Field]
	if status.Type != "array" || *status.MaxItems != valuesfrom.MaxRefs || *status.XListType != "atomic" ||
		strings.Join(status.Items.Schema.Required, ",") != "kind,name" || status.Items.Schema.Properties["resourceVersion"].Type != "string" {
		t.Errorf("status.valuesFrom: %+v", status)
	}
	c := loadAPIServerCRD(t, crd)

	entry := func(kv ...string) map[string]any {
		e := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			e[kv[i]] = kv[i+1]
		}
		return e
	}
	list := func(entries ...map[string]any) map[string]any {
		l := make([]any, len(entries))
		for i, e := range entries {
			l[i] = e
		}
		return map[string]any{"replicas": int64(1), valuesfrom.Field: l}
	}
	many := func(n int) map[string]any {
		entries := make([]map[string]any, n)
		for i := range entries {
			entries[i] = entry("kind", "ConfigMap", "name", fmt.Sprintf("cm-%d", i))
		}
		return list(entries...)
	}
	optional := entry("kind", "Secret", "name", "db.creds", "valuesKey", "prod_values.yaml", "targetPath", "db.password")
	optional["optional"] = true
	tests := []struct {
		name    string
		spec    map[string]any
		wantErr string // "" admitted
	}{
		{"a ConfigMap", list(entry("kind", "ConfigMap", "name", "settings")), ""},
		{"every field", list(optional), ""},
		{"16 sources", many(valuesfrom.MaxRefs), ""},
		{"17 sources", many(valuesfrom.MaxRefs + 1), "must have at most 16 items"},
		{"another kind", list(entry("kind", "Pod", "name", "x")), `Unsupported value: "Pod"`},
		{"no name", list(entry("kind", "Secret")), "spec.valuesFrom[0].name: Required value"},
		{"no kind", list(entry("name", "x")), "spec.valuesFrom[0].kind: Required value"},
		{"a name that is no DNS subdomain", list(entry("kind", "Secret", "name", "Creds")), "spec.valuesFrom[0].name"},
		{"a name too long", list(entry("kind", "Secret", "name", strings.Repeat("n", 254))), "spec.valuesFrom[0].name"},
		{"a key with a slash", list(entry("kind", "Secret", "name", "x", "valuesKey", "a/b")), "spec.valuesFrom[0].valuesKey"},
		{"an empty target path", list(entry("kind", "Secret", "name", "x", "targetPath", "")), "spec.valuesFrom[0].targetPath"},
		{"a target path too long", list(entry("kind", "Secret", "name", "x", "targetPath", strings.Repeat("a", 251))), "spec.valuesFrom[0].targetPath"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := c.admit(tt.spec)
			switch {
			case tt.wantErr == "" && errs != "":
				t.Errorf("refused: %s", errs)
			case tt.wantErr != "" && !strings.Contains(errs, tt.wantErr):
				t.Errorf("errors %q, want one containing %q", errs, tt.wantErr)
			}
		})
	}

	// A namespace is no field: sources are in the resource's namespace.
	stored, errs := c.admit(list(entry("kind", "Secret", "name", "x", "namespace", "other")))
	if errs != "" {
		t.Fatal(errs)
	}
	if got := stored[valuesfrom.Field].([]any)[0].(map[string]any); got["namespace"] != nil {
		t.Errorf("namespace kept: %v", got)
	}
}
