package crdgen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// valuesFile is a values file a chart ships, parsed as Helm parses values.
type valuesFile struct {
	name   string // relative to the chart directory, e.g. ci/ha-values.yaml
	values map[string]any
}

// valuesFilePatterns are the values files a chart ships beside values.yaml: variants at its
// root (values-production.yaml, values.prod.yaml) and the inputs of chart-testing (ci/).
var valuesFilePatterns = []string{"values*.yaml", "values*.yml", "ci/*.yaml", "ci/*.yml"}

// chartValuesFiles returns values.yaml (even empty) and the other values files of the chart
// in chartDir, sorted by name after it.
func chartValuesFiles(chartDir string, chrt *chart.Chart) ([]valuesFile, error) {
	files := []valuesFile{{name: chartutil.ValuesfileName, values: chrt.Values}}
	var names []string
	for _, pattern := range valuesFilePatterns {
		matches, err := filepath.Glob(filepath.Join(chartDir, filepath.FromSlash(pattern)))
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			rel, err := filepath.Rel(chartDir, m)
			if err != nil {
				return nil, err
			}
			if rel = filepath.ToSlash(rel); rel != chartutil.ValuesfileName {
				names = append(names, rel)
			}
		}
	}
	sort.Strings(names)
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(chartDir, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		values, err := chartutil.ReadValues(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		files = append(files, valuesFile{name: name, values: values})
	}
	return files, nil
}

// inferSchema is the spec schema of a chart without values.schema.json, inferred from the
// values files it ships (values.yaml first). Every key of every file survives the
// apiserver's pruning, and every file is admitted as a spec.
//
// Such a chart accepts any value anywhere; what its templates make of a value is known only
// by rendering them. So the schema gives the shape of the values, and refuses no value a
// user could mean:
//   - A map is an object with a property for each key, that keeps the keys it does not
//     declare (x-kubernetes-preserve-unknown-fields): templates read keys that values.yaml
//     leaves out or has commented out.
//   - A list is an array, whose items are inferred from its elements when they agree (maps
//     whose keys' shapes agree, lists of such); the elements of a list are no defaults.
//   - A scalar (string, integer, number, boolean), a null, an empty map {} and an empty
//     list [] are open: any value, described by its default in values.yaml. Scalars are not
//     typed, because users write the same value in several YAML types that templates print
//     alike: a quantity as 1 or "500m" or 0.5, a port as 8080 or "http", an image tag as 8
//     or "8.1", a count as 2 or "2"; typing them after the default would refuse a spec that
//     helm install -f accepts. Empty maps and lists are open, as charts often take a
//     template string there as well (Bitnami's common.tplvalues.render).
//   - Where two files disagree on a key's shape, the key is open.
//   - Every node is nullable: a null in the spec is kept (Helm reads it as deleting the
//     default) rather than dropped by the apiserver.
//
// The schema carries no defaults (Helm applies values.yaml) and no bounds.
func inferSchema(files []valuesFile) *apiextv1.JSONSchemaProps {
	spec := &apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
	for i, f := range files {
		if len(f.values) == 0 {
			continue
		}
		s := inferValue(f.values, i == 0)
		if spec.Properties == nil {
			spec.Properties = s.Properties
			continue
		}
		spec.Properties = mergeProperties(spec.Properties, s.Properties)
	}
	return spec
}

// maxDescribedDefault is the longest default (as JSON) that a description quotes.
const maxDescribedDefault = 120

// inferValue infers the schema of a value; describe: v is a default of values.yaml.
func inferValue(v any, describe bool) *apiextv1.JSONSchemaProps {
	switch v := v.(type) {
	case map[string]any:
		if len(v) > 0 {
			out := &apiextv1.JSONSchemaProps{Type: "object", Nullable: true, XPreserveUnknownFields: ptr(true),
				Properties: make(map[string]apiextv1.JSONSchemaProps, len(v))}
			for k, x := range v {
				out.Properties[k] = *inferValue(x, describe)
			}
			return out
		}
	case []any:
		if len(v) > 0 {
			items := inferValue(v[0], false)
			for _, e := range v[1:] {
				items = mergeInferred(items, inferValue(e, false))
			}
			return &apiextv1.JSONSchemaProps{Type: "array", Nullable: true,
				Items: &apiextv1.JSONSchemaPropsOrArray{Schema: items}}
		}
	}
	out := openSchema()
	if describe {
		out.Description = describeDefault(v)
	}
	return out
}

// describeDefault says what values.yaml holds for an open node.
func describeDefault(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	if len(data) > maxDescribedDefault {
		if s, ok := v.(string); ok {
			return fmt.Sprintf("Default in values.yaml: a text of %d lines.", strings.Count(s, "\n")+1)
		}
		return ""
	}
	return "Default in values.yaml: " + string(data) + "."
}

// mergeInferred is a schema admitting what a and b admit: their shapes if they agree,
// otherwise open. a's descriptions are kept.
func mergeInferred(a, b *apiextv1.JSONSchemaProps) *apiextv1.JSONSchemaProps {
	switch {
	case isOpen(a) || isOpen(b) || a.Type != b.Type:
		out := openSchema()
		out.Description = a.Description
		if out.Description == "" {
			out.Description = b.Description
		}
		return out
	case a.Type == "object":
		out := *a
		out.Properties = mergeProperties(a.Properties, b.Properties)
		return &out
	default: // both arrays
		out := *a
		out.Items = &apiextv1.JSONSchemaPropsOrArray{Schema: mergeInferred(a.Items.Schema, b.Items.Schema)}
		return &out
	}
}

func mergeProperties(a, b map[string]apiextv1.JSONSchemaProps) map[string]apiextv1.JSONSchemaProps {
	out := make(map[string]apiextv1.JSONSchemaProps, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if prev, ok := out[k]; ok {
			out[k] = *mergeInferred(&prev, &v)
		} else {
			out[k] = v
		}
	}
	return out
}
