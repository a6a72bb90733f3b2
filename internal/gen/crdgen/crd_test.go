package crdgen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

const testSchema = `{"type": "object", "properties": {
	"replicas": {"type": "integer", "default": 1},
	"size": {"type": "string", "description": "The size."}}}`

// writeChart makes a minimal chart whose Chart.yaml carries the given annotations.
func writeChart(t *testing.T, dir string, annotations map[string]string, schemaJSON string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v2\nname: " + filepath.Base(dir) + "\nversion: 0.1.0\nannotations:\n")
	for k, v := range annotations {
		b.WriteString("  " + k + ": " + `"` + v + `"` + "\n")
	}
	files := map[string]string{"Chart.yaml": b.String(), "values.yaml": "replicas: 1\n"}
	if schemaJSON != "" {
		files["values.schema.json"] = schemaJSON
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var widgetGVK = schema.GroupVersionKind{Group: "example.transwarp.io", Version: "v1", Kind: "Widget"}

func TestGenerate(t *testing.T) {
	dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), map[string]string{
		AnnotationPlural:         "widgets",
		AnnotationShortNames:     "wg, wdg",
		AnnotationCategories:     "warpdrive",
		AnnotationReplicasPath:   ".spec.replicas",
		AnnotationPrinterColumns: "Size=.spec.size",
	}, testSchema)
	crd, err := Generate(dir, widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	if crd.Name != "widgets.example.transwarp.io" || FileName(crd) != "example.transwarp.io_widgets.yaml" {
		t.Errorf("name %q, file %q", crd.Name, FileName(crd))
	}
	names := crd.Spec.Names
	if names.Kind != "Widget" || names.ListKind != "WidgetList" || names.Singular != "widget" ||
		strings.Join(names.ShortNames, ",") != "wg,wdg" || strings.Join(names.Categories, ",") != "warpdrive" {
		t.Errorf("names: %+v", names)
	}
	if len(crd.Annotations) != 0 {
		t.Errorf("a group outside k8s.io needs no approval annotation, got %v", crd.Annotations)
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1" || !v.Served || !v.Storage || v.Subresources.Status == nil {
		t.Errorf("version: %+v", v)
	}
	if s := v.Subresources.Scale; s == nil || s.SpecReplicasPath != ".spec.replicas" ||
		s.StatusReplicasPath != ".status.replicas" || *s.LabelSelectorPath != ".status.selector" {
		t.Errorf("scale subresource: %+v", s)
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+":"+c.Type+":"+c.JSONPath)
	}
	want := []string{"Desired:integer:.spec.replicas", "Available:integer:.status.availableReplicas", "Size:string:.spec.size",
		"Chart:string:.status.chart.version", `Rollout:string:.status.conditions[?(@.type=="ChartRollout")].reason`,
		`Ready:string:.status.conditions[?(@.type=="Ready")].status`, `Reason:string:.status.conditions[?(@.type=="Ready")].reason`,
		"Age:date:.metadata.creationTimestamp"}
	if strings.Join(cols, " ") != strings.Join(want, " ") {
		t.Errorf("columns:\n got %v\nwant %v", cols, want)
	}
	root := v.Schema.OpenAPIV3Schema
	if len(root.XValidations) != 1 || root.XValidations[0].Rule != "size(self.metadata.name) <= 53" {
		t.Errorf("root rules: %+v", root.XValidations)
	}
	if root.Required != nil {
		t.Errorf("a spec without required fields must not make spec required, got %v", root.Required)
	}
	status := root.Properties["status"]
	if status.XPreserveUnknownFields == nil || !*status.XPreserveUnknownFields {
		t.Error("status must preserve unknown fields for the sidecar")
	}
	for _, f := range []string{"conditions", "deployedRelease"} {
		if _, ok := status.Properties[f]; !ok {
			t.Errorf("status has no %s", f)
		}
	}

	// Output is deterministic and carries neither status nor creationTimestamp.
	a, err := Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Generate(dir, widgetGVK)
	b, _ := Marshal(again)
	if !bytes.Equal(a, b) {
		t.Error("two generations differ")
	}
	if !bytes.HasPrefix(a, []byte(Header)) || bytes.Contains(a, []byte("creationTimestamp: null")) ||
		bytes.Contains(a, []byte("\nstatus:")) {
		t.Errorf("unexpected output:\n%s", a)
	}
}

func TestGenerateProtectedGroupAndNoReplicas(t *testing.T) {
	dir := writeChart(t, filepath.Join(t.TempDir(), "gadget"), map[string]string{AnnotationPlural: "gadgets"}, testSchema)
	for _, group := range []string{"apps.k8s.io", "k8s.io", "x.kubernetes.io"} {
		crd, err := Generate(dir, schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Gadget"})
		if err != nil {
			t.Fatal(err)
		}
		if got := crd.Annotations["api-approved.kubernetes.io"]; got != "unapproved, experimental-only" {
			t.Errorf("%s: approval annotation %q", group, got)
		}
		v := crd.Spec.Versions[0]
		if v.Subresources.Scale != nil || len(v.AdditionalPrinterColumns) != 5 {
			t.Errorf("without replicasPath: scale %+v, columns %+v", v.Subresources.Scale, v.AdditionalPrinterColumns)
		}
	}
	// Only a group ending in .k8s.io is protected, not one that merely contains it.
	crd, err := Generate(dir, schema.GroupVersionKind{Group: "k8s.io.example.com", Version: "v1", Kind: "Gadget"})
	if err != nil || len(crd.Annotations) != 0 {
		t.Errorf("k8s.io.example.com: %v %v", err, crd.Annotations)
	}
}

func TestGenerateRejects(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		schema      string
		gvk         schema.GroupVersionKind
		wantErr     string
	}{
		{"no plural", map[string]string{}, testSchema, widgetGVK, "annotation crd.warpdrive.transwarp.io/plural is required"},
		{"misspelt annotation", map[string]string{AnnotationPlural: "widgets", AnnotationPrefix + "shortname": "w"}, testSchema, widgetGVK,
			"unknown annotation crd.warpdrive.transwarp.io/shortname"},
		{"replicas path not in spec", map[string]string{AnnotationPlural: "widgets", AnnotationReplicasPath: ".spec.count"}, testSchema, widgetGVK,
			".spec.count is not a field of the spec schema"},
		{"replicas path not an integer", map[string]string{AnnotationPlural: "widgets", AnnotationReplicasPath: ".spec.size"}, testSchema, widgetGVK,
			".spec.size must be an integer"},
		{"replicas path outside spec", map[string]string{AnnotationPlural: "widgets", AnnotationReplicasPath: ".status.replicas"}, testSchema, widgetGVK,
			"must be a field under .spec"},
		{"bad column", map[string]string{AnnotationPlural: "widgets", AnnotationPrinterColumns: "Size"}, testSchema, widgetGVK,
			`"Size" is not Name=.spec.path`},
		{"column of unknown field", map[string]string{AnnotationPlural: "widgets", AnnotationPrinterColumns: "Color=.spec.color"}, testSchema, widgetGVK,
			"column Color: .spec.color is not a field"},
		{"bad schema", map[string]string{AnnotationPlural: "widgets"}, `{"type": "object", "properties": {"a": {"type": "string", "pattern": "(("}}}`, widgetGVK,
			`values.schema.json#/properties/a: "pattern": error parsing regexp`},
		{"schema declaring valuesFrom", map[string]string{AnnotationPlural: "widgets"}, `{"type": "object", "properties": {"valuesFrom": {"type": "string"}}}`, widgetGVK,
			"values.schema.json: the top-level property valuesFrom is reserved"},
		{"group without a dot", map[string]string{AnnotationPlural: "widgets"}, testSchema,
			schema.GroupVersionKind{Group: "example", Version: "v1", Kind: "Widget"}, "must contain a dot"},
		{"lowercase kind", map[string]string{AnnotationPlural: "widgets"}, testSchema,
			schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "widget"}, "capital letter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), tt.annotations, tt.schema)
			_, err := Generate(dir, tt.gvk)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestGenerateAll(t *testing.T) {
	dir := t.TempDir()
	writeChart(t, filepath.Join(dir, "charts", "widget"), map[string]string{AnnotationPlural: "widgets"}, testSchema)
	watches := filepath.Join(dir, "watches.yaml")
	write := func(s string) {
		if err := os.WriteFile(watches, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The chart is found in the charts directory by the base name of its watches path.
	write("- group: example.transwarp.io\n  version: v1\n  kind: Widget\n  chart: /opt/helm/helm-charts/widget\n  reconcilePeriod: 1m\n")
	files, err := GenerateAll(watches, filepath.Join(dir, "charts"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Name != "example.transwarp.io_widgets.yaml" {
		t.Errorf("files: %v", files)
	}

	write("- group: example.transwarp.io\n  version: v1\n  kind: Widget\n  chart: widget\n" +
		"- group: example.transwarp.io\n  version: v2\n  kind: Widget\n  chart: widget\n")
	if _, err := GenerateAll(watches, filepath.Join(dir, "charts")); err == nil || !strings.Contains(err.Error(), "more than one version") {
		t.Errorf("two versions of a kind: %v", err)
	}
	write("- group: example.transwarp.io\n  kind: Widget\n  chart: widget\n")
	if _, err := GenerateAll(watches, filepath.Join(dir, "charts")); err == nil || !strings.Contains(err.Error(), "version must not be empty") {
		t.Errorf("entry without version: %v", err)
	}
	write("[]\n")
	if _, err := GenerateAll(watches, filepath.Join(dir, "charts")); err == nil || !strings.Contains(err.Error(), "no watches") {
		t.Errorf("empty watches: %v", err)
	}
}

// A chart's status.schema.json adds status fields to the CRD, and printer columns may show
// them, typed from that schema; the fields every kind has cannot be redefined.
func TestGenerateStatusSchema(t *testing.T) {
	const statusJSON = `{"type": "object", "properties": {"books": {"type": "object", "properties": {
		"used": {"type": "string", "description": "Used bytes."},
		"claims": {"type": "integer", "minimum": 0}}}}}`
	chart := func(t *testing.T, columns, status string) string {
		dir := writeChart(t, filepath.Join(t.TempDir(), "widget"),
			map[string]string{AnnotationPlural: "widgets", AnnotationPrinterColumns: columns}, testSchema)
		if err := os.WriteFile(filepath.Join(dir, StatusSchemaFile), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	crd, err := Generate(chart(t, "Size=.spec.size,Used=.status.books.used,Claims=.status.books.claims,ReadyReplicas=.status.readyReplicas", statusJSON), widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	v := crd.Spec.Versions[0]
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name+":"+c.Type+":"+c.JSONPath+":"+c.Description)
	}
	want := []string{"Size:string:.spec.size:The size.", "Used:string:.status.books.used:Used bytes.",
		"Claims:integer:.status.books.claims:", "ReadyReplicas:integer:.status.readyReplicas:Ready replicas of the resource's workloads.",
		"Chart:string:.status.chart.version:Version of the chart of the resource's Helm release (docs/rollouts.md).",
		`Rollout:string:.status.conditions[?(@.type=="ChartRollout")].reason:Where the resource stands in the rollout of the chart the operator carries: Upgraded, Waiting, Upgrading, RolloutHalted, RolloutFailed.`,
		`Ready:string:.status.conditions[?(@.type=="Ready")].status:Whether the spec of this generation is deployed and its workloads have rolled out.`,
		`Reason:string:.status.conditions[?(@.type=="Ready")].reason:Why the resource is or is not ready; the Ready condition's message says more.`,
		"Age:date:.metadata.creationTimestamp:"}
	if strings.Join(cols, "\n") != strings.Join(want, "\n") {
		t.Errorf("columns:\n got %q\nwant %q", cols, want)
	}
	status := v.Schema.OpenAPIV3Schema.Properties["status"]
	books := status.Properties["books"]
	if books.Type != "object" || books.Properties["claims"].Minimum == nil || status.Properties["conditions"].Type != "array" {
		t.Errorf("status schema: %+v", status)
	}

	for _, tc := range []struct{ columns, status, wantErr string }{
		{"Used=.status.books.free", statusJSON, ".status.books.free is not a field of the status schema"},
		{"Used=.metadata.name", statusJSON, `".metadata.name" must be a field under .spec or .status`},
		{"", `{"type": "object", "properties": {"replicas": {"type": "string"}}}`, "status.replicas is written by the helm-operator or the sidecar"},
		{"", `{"type": "object", "properties": {"a": {"type": "string", "format": "date"}}}`, `status.schema.json#/properties/a: "format"`},
		{"", `{"type": "string"}`, `status.schema.json#: the root must have "type": "object" (it is the status)`},
	} {
		if _, err := Generate(chart(t, tc.columns, tc.status), widgetGVK); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("columns %q, status %s: error %v, want one containing %q", tc.columns, tc.status, err, tc.wantErr)
		}
	}
}

// A chart without values.schema.json gets a spec inferred from its values files; its
// replicasPath field is an integer for the scale subresource.
func TestGenerateWithoutSchema(t *testing.T) {
	dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), map[string]string{
		AnnotationPlural: "widgets", AnnotationReplicasPath: ".spec.replicas", AnnotationPrinterColumns: "Size=.spec.size",
	}, "")
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("replicas: 1\nsize: small\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	crd, err := Generate(dir, widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	v := crd.Spec.Versions[0]
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if spec.Type != "object" || spec.XPreserveUnknownFields == nil || spec.Properties["replicas"].Type != "integer" {
		t.Errorf("spec: %+v", spec)
	}
	if _, ok := spec.Properties[valuesfrom.Field]; !ok {
		t.Error("spec has no valuesFrom")
	}
	if v.Subresources.Scale == nil || v.AdditionalPrinterColumns[2].Name != "Size" || v.AdditionalPrinterColumns[2].Type != "string" {
		t.Errorf("scale %+v, columns %+v", v.Subresources.Scale, v.AdditionalPrinterColumns)
	}
}

// A values file with a top-level valuesFrom is refused, naming the chart and the file.
func TestGenerateRefusesValuesFromInValues(t *testing.T) {
	for _, file := range []string{"values.yaml", "values-prod.yaml", "ci/test-values.yaml"} {
		dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), map[string]string{AnnotationPlural: "widgets"}, "")
		if err := os.MkdirAll(filepath.Join(dir, "ci"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte("valuesFrom: [a]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Generate(dir, widgetGVK)
		want := "chart " + dir + " (kind Widget): " + file + ": the top-level key valuesFrom is reserved"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", file, err, want)
		}
	}
}

// The values of a chart's subcharts (by name or alias) and the global values are kept,
// whether or not values.yaml or the schema declares them.
func TestGenerateKeepsSubchartValues(t *testing.T) {
	crd, err := Generate(filepath.Join("testdata", "charts", "stackapp"), testChartGVK("stackapp"))
	if err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for _, key := range []string{"cache", "common", "global"} {
		p, ok := spec.Properties[key]
		if !ok || p.Type != "object" || p.XPreserveUnknownFields == nil {
			t.Errorf("%s: %+v", key, p)
		}
	}
	if _, ok := spec.Properties["kvstore"]; !ok {
		t.Error("the subchart's own name is not kept")
	}

	dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), map[string]string{AnnotationPlural: "widgets"},
		`{"type": "object", "additionalProperties": false, "properties": {"replicas": {"type": "integer"}}}`)
	chartYAML, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chartYAML = append(chartYAML, "dependencies:\n  - name: db\n    version: 1.0.0\n    repository: https://charts.example.com\n"...)
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), chartYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	crd, err = Generate(dir, widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	spec = crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for _, key := range []string{"db", "global"} {
		if p, ok := spec.Properties[key]; !ok || p.XPreserveUnknownFields == nil {
			t.Errorf("%s: %+v", key, p)
		}
	}
}
