package crdgen

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// Chart.yaml annotations that describe the kind of a chart.
const (
	AnnotationPrefix = "crd.warpdrive.transwarp.io/"
	// AnnotationPlural is the resource name, e.g. "warpdrivepools" (required).
	AnnotationPlural = AnnotationPrefix + "plural"
	// AnnotationShortNames is a comma-separated list, e.g. "wdp,wdpool".
	AnnotationShortNames = AnnotationPrefix + "shortNames"
	// AnnotationCategories is a comma-separated list, e.g. "warpdrive".
	AnnotationCategories = AnnotationPrefix + "categories"
	// AnnotationReplicasPath is the desired-replicas field, e.g. ".spec.replicas": it gets a
	// Desired column and the scale subresource.
	AnnotationReplicasPath = AnnotationPrefix + "replicasPath"
	// AnnotationPrinterColumns are extra columns, a comma-separated list of
	// Name=.spec.path or Name=.status.path, e.g. "Capacity=.spec.capacity"; each column's
	// type is its field's in the spec or status schema.
	AnnotationPrinterColumns = AnnotationPrefix + "printerColumns"
)

// StatusSchemaFile is an optional file of a chart: a JSON Schema (the same subset as
// values.schema.json) of status fields the sidecar writes for this kind only, such as a
// WarpdrivePool's status.pool. Its properties are added to the status schema, so that the
// apiserver keeps and validates them and printer columns can show them.
const StatusSchemaFile = "status.schema.json"

// MaxNameLength is the longest name of a custom resource: the helm-operator names the
// release after it, and Helm refuses release names longer than 53 characters.
const MaxNameLength = 53

// The apiserver refuses CRDs in these API groups unless they carry the approval annotation.
var protectedGroups = []string{"k8s.io", "kubernetes.io"}

const apiApprovedAnnotation = "api-approved.kubernetes.io"

// kindInfo is what Chart.yaml says about the kind.
type kindInfo struct {
	plural       string
	shortNames   []string
	categories   []string
	replicasPath string
	columns      []column
}

type column struct{ name, path string }

// Generate returns the CRD of the kind gvk, whose chart is in chartDir.
func Generate(chartDir string, gvk schema.GroupVersionKind) (*apiextv1.CustomResourceDefinition, error) {
	if err := checkGVK(gvk); err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	chrt, err := loader.LoadDir(chartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	wrap := func(err error) error { return fmt.Errorf("chart %s (kind %s): %w", chartDir, gvk.Kind, err) }
	info, err := readKindInfo(chrt.Metadata.Annotations)
	if err != nil {
		return nil, wrap(err)
	}
	spec, err := specSchema(chartDir, chrt, info)
	if err != nil {
		return nil, wrap(err)
	}
	status := statusSchema()
	for _, f := range chrt.Files {
		if f.Name != StatusSchemaFile {
			continue
		}
		extra, err := translateStatusSchema(f.Data)
		if err != nil {
			return nil, wrap(err)
		}
		for name, prop := range extra.Properties {
			if _, taken := status.Properties[name]; taken {
				return nil, wrap(fmt.Errorf("%s: status.%s is written by the helm-operator or the sidecar for every kind", StatusSchemaFile, name))
			}
			status.Properties[name] = prop
		}
	}

	newest, err := servedVersion(gvk, chrt.Name(), spec, status, info, true)
	if err != nil {
		return nil, wrap(err)
	}
	versions, conv, err := allVersions(chartDir, gvk, chrt.Name(), newest, spec, status, info)
	if err != nil {
		return nil, wrap(err)
	}

	crd := &apiextv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{
			APIVersion: apiextv1.SchemeGroupVersion.String(),
			Kind:       "CustomResourceDefinition",
		},
		ObjectMeta: metav1.ObjectMeta{Name: info.plural + "." + gvk.Group},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextv1.CustomResourceDefinitionNames{
				Plural:     info.plural,
				Singular:   strings.ToLower(gvk.Kind),
				Kind:       gvk.Kind,
				ListKind:   gvk.Kind + "List",
				ShortNames: info.shortNames,
				Categories: info.categories,
			},
			Scope:      apiextv1.NamespaceScoped,
			Versions:   versions,
			Conversion: conv,
		},
	}
	if isProtectedGroup(gvk.Group) {
		// These groups are reserved for APIs reviewed by the Kubernetes project; the
		// original controllers of these kinds used them, so the CRD says it is unapproved.
		crd.Annotations = map[string]string{apiApprovedAnnotation: "unapproved, experimental-only"}
	}
	return crd, nil
}

// specSchema is the schema of the kind's spec: its chart's values.schema.json translated, or
// without one, inferred from the values files the chart ships (see TranslateSchema and
// inferSchema). Either way it keeps the values of the chart's subcharts, and has the field
// valuesFrom, which the operator handles.
func specSchema(chartDir string, chrt *chart.Chart, info kindInfo) (*apiextv1.JSONSchemaProps, error) {
	files, err := chartValuesFiles(chartDir, chrt)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if _, taken := f.values[valuesfrom.Field]; taken {
			return nil, fmt.Errorf("%s: the top-level key %s is reserved: spec.%s lists the Secrets and ConfigMaps "+
				"the operator takes values from, and is never passed to the chart", f.name, valuesfrom.Field, valuesfrom.Field)
		}
	}
	var spec *apiextv1.JSONSchemaProps
	if chrt.Schema != nil {
		if spec, err = translateValuesSchema(chrt.Schema, chrt.Values); err != nil {
			return nil, err
		}
		if _, taken := spec.Properties[valuesfrom.Field]; taken {
			return nil, fmt.Errorf("%s: the top-level property %s is reserved: spec.%s lists the Secrets and ConfigMaps "+
				"the operator takes values from, and is never passed to the chart", ValuesSchemaFile, valuesfrom.Field, valuesfrom.Field)
		}
	} else {
		spec = inferSchema(files)
		if rest, ok := strings.CutPrefix(info.replicasPath, ".spec."); ok {
			typeReplicas(spec, strings.Split(rest, "."))
		}
	}
	for _, name := range subchartKeys(chrt) {
		if _, declared := spec.Properties[name]; !declared {
			addSpecProperty(spec, name, apiextv1.JSONSchemaProps{
				Type: "object", Nullable: true, XPreserveUnknownFields: ptr(true),
				Description: "Values of the subchart " + name + ", which its own schema checks.",
			})
		}
	}
	addSpecProperty(spec, valuesfrom.Field, valuesFromSchema())
	return spec, nil
}

// typeReplicas makes the inferred field at path an integer, if it is open: the chart's
// replicasPath annotation says it is the replica count, which the scale subresource needs
// as an integer.
func typeReplicas(s *apiextv1.JSONSchemaProps, path []string) {
	field, ok := s.Properties[path[0]]
	switch {
	case !ok:
	case len(path) > 1:
		typeReplicas(&field, path[1:]) // the properties map is shared: nothing to store
	case isOpen(&field):
		s.Properties[path[0]] = apiextv1.JSONSchemaProps{Type: "integer", Description: field.Description}
	}
}

// subchartKeys are the top-level keys of a chart's values that belong to its subcharts:
// each dependency's name (or alias), and global, shared with them all. None without
// dependencies.
func subchartKeys(chrt *chart.Chart) []string {
	keys := map[string]bool{}
	for _, d := range chrt.Metadata.Dependencies {
		if d.Alias != "" {
			keys[d.Alias] = true
		} else {
			keys[d.Name] = true
		}
	}
	for _, sub := range chrt.Dependencies() {
		keys[sub.Name()] = true
	}
	if len(keys) == 0 {
		return nil
	}
	keys[chartutil.GlobalKey] = true
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// addSpecProperty adds the property name to the spec schema. A spec that is a map (an
// "additionalProperties" schema at the root) becomes an object keeping unknown fields, as
// a structural schema cannot have both.
func addSpecProperty(spec *apiextv1.JSONSchemaProps, name string, prop apiextv1.JSONSchemaProps) {
	if spec.AdditionalProperties != nil {
		spec.AdditionalProperties = nil
		spec.XPreserveUnknownFields = ptr(true)
		// The rule on the map's keys (from propertyNames) would now apply to the fields.
		var rules apiextv1.ValidationRules
		for _, r := range spec.XValidations {
			if !strings.HasPrefix(r.Rule, "self.all(k, size(k) <= ") {
				rules = append(rules, r)
			}
		}
		spec.XValidations = rules
	}
	if spec.Properties == nil {
		spec.Properties = map[string]apiextv1.JSONSchemaProps{}
	}
	spec.Properties[name] = prop
}

// rootSchema wraps the spec schema into the schema of the whole custom resource.
func rootSchema(kind, chartName string, spec *apiextv1.JSONSchemaProps, status apiextv1.JSONSchemaProps) *apiextv1.JSONSchemaProps {
	root := &apiextv1.JSONSchemaProps{
		Type: "object",
		Description: fmt.Sprintf("A %s. The helm-operator installs the chart %s as a Helm release named after it, "+
			"with the spec as the values.", kind, chartName),
		Properties: map[string]apiextv1.JSONSchemaProps{
			"apiVersion": {Type: "string", Description: "APIVersion defines the versioned schema of this representation of an object."},
			"kind":       {Type: "string", Description: "Kind is a string value representing the REST resource this object represents."},
			"metadata":   {Type: "object"},
			"spec":       *spec,
			"status":     status,
		},
		XValidations: apiextv1.ValidationRules{{
			Rule: fmt.Sprintf("size(self.metadata.name) <= %d", MaxNameLength),
			Message: fmt.Sprintf("metadata.name must be no more than %d characters: it names the Helm release, "+
				"and Helm release names are limited to %d characters", MaxNameLength, MaxNameLength),
		}},
	}
	if len(spec.Required) > 0 {
		root.Required = []string{"spec"}
	}
	return root
}

// statusSchema is what the helm-operator writes. The sidecar adds more fields (replicas,
// selector and its bookkeeping), which the schema keeps rather than prunes.
func statusSchema() apiextv1.JSONSchemaProps {
	str := func(desc string) apiextv1.JSONSchemaProps {
		return apiextv1.JSONSchemaProps{Type: "string", Description: desc}
	}
	count := func(desc string) apiextv1.JSONSchemaProps {
		return apiextv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: ptr(0.0), Description: desc}
	}
	return apiextv1.JSONSchemaProps{
		Type:                   "object",
		Description:            "Status written by the helm-operator, the manager and the sidecar (docs/status.md).",
		XPreserveUnknownFields: ptr(true),
		Default:                &apiextv1.JSON{Raw: []byte(`{"` + statuscontract.FieldObservedGeneration + `":0}`)},
		Properties: map[string]apiextv1.JSONSchemaProps{
			// A map keyed by type: the manager's and the sidecar's server-side applies each
			// own their own conditions and cannot remove the other's (docs/status.md).
			statuscontract.FieldConditions: {
				Type: "array",
				Description: "Conditions of the resource. Ready, Reconciling and Stalled follow kstatus (docs/status.md); " +
					"Initialized, Deployed, ReleaseFailed, Irreconcilable and Paused are the helm-operator's; RolledOut is the sidecar's.",
				XListType:    ptr("map"),
				XListMapKeys: []string{"type"},
				Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"type", "status"},
					Properties: map[string]apiextv1.JSONSchemaProps{
						"type":               {Type: "string", MaxLength: ptr(int64(316)), Description: "Type of the condition."},
						"status":             {Type: "string", Enum: enumJSON("True", "False", "Unknown"), Description: "Status of the condition: True, False or Unknown."},
						"reason":             {Type: "string", MaxLength: ptr(int64(1024)), Description: "Reason of the last transition, in CamelCase."},
						"message":            {Type: "string", MaxLength: ptr(int64(32768)), Description: "Human-readable details of the last transition."},
						"observedGeneration": {Type: "integer", Format: "int64", Minimum: ptr(0.0), Description: "The generation the condition was set for."},
						"lastTransitionTime": {Type: "string", Format: "date-time", Description: "When the status last changed."},
					},
				}},
			},
			statuscontract.FieldDeployedRelease: {
				Type:        "object",
				Description: "The Helm release last deployed.",
				Properties: map[string]apiextv1.JSONSchemaProps{
					statuscontract.FieldDeployedReleaseName: str("Name of the release."),
					statuscontract.FieldDeployedReleaseRevision: {Type: "integer", Format: "int64", Minimum: ptr(1.0),
						Description: "Revision of the release (Helm's release version)."},
					statuscontract.FieldDeployedReleaseChartVersion: str("Version of the chart the release was rendered from."),
					// The stock helm-operator's shape, written only with the manager's
					// --status-release-manifest (docs/status.md).
					statuscontract.FieldDeployedReleaseManifest: str("Rendered manifest of the release; written only with the manager's --status-release-manifest."),
				},
			},
			// Written by the sidecar, summed over the release's Deployments, StatefulSets
			// and DaemonSets.
			statuscontract.FieldReplicas:          count("Replicas of the resource's workloads."),
			statuscontract.FieldReadyReplicas:     count("Ready replicas of the resource's workloads."),
			statuscontract.FieldAvailableReplicas: count("Available replicas of the resource's workloads."),
			// Written by the manager (docs/status.md). The default makes a new resource read
			// as in progress (generation 1, observed 0) before the manager's first write:
			// kstatus reads a resource without status as current.
			statuscontract.FieldObservedGeneration: {Type: "integer", Format: "int64", Default: &apiextv1.JSON{Raw: []byte("0")},
				Description: "The generation whose spec is in the deployed release, or that the manager gave up on (Stalled=True); 0 before the first."},
			statuscontract.FieldFailures: {Type: "integer", Format: "int64", Minimum: ptr(0.0),
				Description: "Failed install or upgrade attempts in a row at the current generation."},
			statuscontract.FieldLastHandledReconcileAt: {Type: "string", MaxLength: ptr(int64(1024)),
				Description: "The value of the annotation warpdrive.transwarp.io/reconcile-requested-at the last reconcile handled."},
			statuscontract.FieldSelector:   str("Label selector of the pods of the resource's primary workload (for the scale subresource)."),
			statuscontract.FieldValuesFrom: valuesFromStatusSchema(),
			// Written by the manager (docs/rollouts.md).
			statuscontract.FieldChart: {
				Type:        "object",
				Description: "The chart of the Helm release, and where the resource stands in a rollout of the chart the operator carries.",
				Properties: map[string]apiextv1.JSONSchemaProps{
					statuscontract.FieldChartVersion:      str("Version of the chart of the release."),
					statuscontract.FieldChartDigest:       str("Digest of the content of the chart of the release."),
					statuscontract.FieldChartRevision:     {Type: "integer", Format: "int64", Minimum: ptr(0.0), Description: "Revision of the release."},
					statuscontract.FieldChartLastDeployed: {Type: "string", Format: "date-time", Description: "When the release was last deployed."},
					statuscontract.FieldChartBehind:       {Type: "boolean", Description: "Whether the operator carries another chart than the release's."},
					statuscontract.FieldChartFailedDigest: str("Digest of the chart the operator carries that this resource failed on, halting its rollout."),
					statuscontract.FieldChartBaseline: {
						Type: "object",
						Description: "How the resource stood on its own chart before the rollout moved it: only a resource healthy " +
							"before its move, whose spec and sources of values have not changed since, can fail the new chart " +
							"and halt its rollout.",
						Properties: map[string]apiextv1.JSONSchemaProps{
							statuscontract.FieldBaselineDigest:     str("Digest of the chart being rolled out."),
							statuscontract.FieldBaselineGeneration: {Type: "integer", Format: "int64", Description: "The resource's generation then."},
							statuscontract.FieldBaselineInputs:     str("Digest of the versions of the sources of spec.valuesFrom its release was rendered from then."),
							statuscontract.FieldBaselineHealthy:    {Type: "boolean", Description: "Whether it was Ready and not Stalled then."},
						},
					},
				},
			},
		},
	}
}

func readKindInfo(annotations map[string]string) (kindInfo, error) {
	var info kindInfo
	for key := range annotations {
		switch key {
		case AnnotationPlural, AnnotationShortNames, AnnotationCategories, AnnotationReplicasPath, AnnotationPrinterColumns:
		default:
			if strings.HasPrefix(key, AnnotationPrefix) {
				return info, fmt.Errorf("unknown annotation %s", key)
			}
		}
	}
	info.plural = annotations[AnnotationPlural]
	if info.plural == "" {
		return info, fmt.Errorf("annotation %s is required", AnnotationPlural)
	}
	if errs := validation.IsDNS1035Label(info.plural); len(errs) > 0 {
		return info, fmt.Errorf("%s: %s", AnnotationPlural, strings.Join(errs, "; "))
	}
	info.shortNames = splitList(annotations[AnnotationShortNames])
	info.categories = splitList(annotations[AnnotationCategories])
	info.replicasPath = annotations[AnnotationReplicasPath]
	for _, entry := range splitList(annotations[AnnotationPrinterColumns]) {
		name, path, ok := strings.Cut(entry, "=")
		if !ok || name == "" {
			return info, fmt.Errorf("%s: %q is not Name=.spec.path or Name=.status.path", AnnotationPrinterColumns, entry)
		}
		info.columns = append(info.columns, column{name: name, path: path})
	}
	return info, nil
}

// specField finds the schema of a field given as a simple path such as ".spec.replicas".
func specField(spec *apiextv1.JSONSchemaProps, path string) (*apiextv1.JSONSchemaProps, error) {
	rest, ok := strings.CutPrefix(path, ".spec.")
	if !ok || rest == "" {
		return nil, fmt.Errorf("%q must be a field under .spec", path)
	}
	return walkField(spec, "spec", path, rest)
}

// columnField finds the schema of a printer column's field, under .spec or .status.
func columnField(spec, status *apiextv1.JSONSchemaProps, path string) (*apiextv1.JSONSchemaProps, error) {
	if rest, ok := strings.CutPrefix(path, ".status."); ok && rest != "" {
		return walkField(status, "status", path, rest)
	}
	if rest, ok := strings.CutPrefix(path, ".spec."); ok && rest != "" {
		return walkField(spec, "spec", path, rest)
	}
	return nil, fmt.Errorf("%q must be a field under .spec or .status", path)
}

// walkField walks the dotted path rest from schema (of the spec or the status, as which says);
// path is the whole path, for errors.
func walkField(schema *apiextv1.JSONSchemaProps, which, path, rest string) (*apiextv1.JSONSchemaProps, error) {
	field := schema
	for _, name := range strings.Split(rest, ".") {
		next, ok := field.Properties[name]
		if !ok {
			return nil, fmt.Errorf("%s is not a field of the %s schema", path, which)
		}
		field = &next
	}
	return field, nil
}

func columnType(field *apiextv1.JSONSchemaProps) string {
	switch field.Type {
	case "integer", "number", "boolean":
		return field.Type
	default:
		return "string"
	}
}

func checkGVK(gvk schema.GroupVersionKind) error {
	if !strings.Contains(gvk.Group, ".") {
		return errors.New("a CRD's group must contain a dot")
	}
	if errs := validation.IsDNS1123Subdomain(gvk.Group); len(errs) > 0 {
		return fmt.Errorf("group: %s", strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(gvk.Version); len(errs) > 0 {
		return fmt.Errorf("version: %s", strings.Join(errs, "; "))
	}
	if gvk.Kind == "" || strings.ToUpper(gvk.Kind[:1]) != gvk.Kind[:1] {
		return errors.New("kind must start with a capital letter")
	}
	return nil
}

func isProtectedGroup(group string) bool {
	for _, g := range protectedGroups {
		if group == g || strings.HasSuffix(group, "."+g) {
			return true
		}
	}
	return false
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// FileName is the name of a CRD's file in config/crd/bases, as operator-sdk names it.
func FileName(crd *apiextv1.CustomResourceDefinition) string {
	return crd.Spec.Group + "_" + crd.Spec.Names.Plural + ".yaml"
}

// Header starts every generated file; stale files are recognised by it.
const Header = "# Generated by hack/crdgen from the chart's values.schema.json and Chart.yaml.\n" +
	"# DO NOT EDIT: change the chart and run make manifests.\n"

// Marshal renders a CRD as YAML, deterministically (map keys sorted), without the empty
// status and creation timestamp that the Go types would print.
func Marshal(crd *apiextv1.CustomResourceDefinition) ([]byte, error) {
	data, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	delete(obj, "status")
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	data, err = yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return append([]byte(Header), data...), nil
}

// File is a generated file: its name in the output directory and its content.
type File struct {
	Name string
	Data []byte
}

// GenerateAll generates the CRD of every kind in a watches file, whose charts are looked up
// in chartsDir by the last element of their path (the operator resolves chart paths from
// its own working directory, which need not be the repository). Files are sorted by name.
func GenerateAll(watchesPath, chartsDir string) ([]File, error) {
	entries, err := watchfile.Load(watchesPath)
	if err != nil {
		return nil, err
	}
	// A CRD holds every version of a kind: watches.yaml names the newest, the chart's
	// conversions.yaml the older ones (see the package documentation).
	seen := map[schema.GroupKind]bool{}
	var files []File
	for _, w := range entries {
		gvk := w.GroupVersionKind()
		if seen[gvk.GroupKind()] {
			return nil, fmt.Errorf("%s: more than one version of %s is watched: watches.yaml names the newest, and the chart's %s lists the older ones (make add-version)", watchesPath, gvk.GroupKind(), conversion.FileName)
		}
		seen[gvk.GroupKind()] = true
		crd, err := Generate(ChartDir(chartsDir, w.Chart), gvk)
		if err != nil {
			return nil, err
		}
		data, err := Marshal(crd)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Name: FileName(crd), Data: data})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// ChartDir is where a watches entry's chart is inside chartsDir: the operator resolves
// the chart path from its own working directory, so only its last element is kept.
func ChartDir(chartsDir, chart string) string {
	return filepath.Join(chartsDir, path.Base(filepath.ToSlash(chart)))
}

func ptr[T any](v T) *T { return &v }

func enumJSON(values ...string) []apiextv1.JSON {
	out := make([]apiextv1.JSON, len(values))
	for i, v := range values {
		out[i] = apiextv1.JSON{Raw: []byte(strconv.Quote(v))}
	}
	return out
}
