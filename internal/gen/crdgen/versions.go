package crdgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

// DeprecatedFile, in conversion.VersionsDir, maps older versions to the warning the API server gives a
// client of a deprecated version; an empty warning gives the API server's own.
//
//	v1alpha1: "v1alpha1 is deprecated: use v1beta1"
const DeprecatedFile = "deprecated.yaml"

// SchemaFile is the file of conversion.VersionsDir that holds the spec schema of the older version
// version, as the CRD's openAPIV3Schema.properties.spec had it when version was the newest.
func SchemaFile(version string) string {
	return version + ".schema.json"
}

// allVersions is every version of the kind, oldest first, and the CRD's conversion: the
// versions of the chart's conversions.yaml, whose newest must be newest (the version
// watches.yaml names, which the chart renders and the API server stores), each older one
// served with the spec schema of its file in conversion.VersionsDir. A chart without conversions.yaml
// has one version, and no conversion (the API server's default, None), as before versions.
func allVersions(chartDir string, gvk schema.GroupVersionKind, chartName string, newest apiextv1.CustomResourceDefinitionVersion,
	spec *apiextv1.JSONSchemaProps, status apiextv1.JSONSchemaProps, info kindInfo) ([]apiextv1.CustomResourceDefinitionVersion, *apiextv1.CustomResourceConversion, error) {
	dir := filepath.Join(chartDir, conversion.VersionsDir)
	files, err := schemaFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	chain, err := conversion.Load(chartDir)
	if errors.Is(err, fs.ErrNotExist) {
		if len(files) > 0 {
			return nil, nil, fmt.Errorf("%s/%s is there but %s is not: it lists the versions and the conversions between them",
				conversion.VersionsDir, files[0], conversion.FileName)
		}
		return []apiextv1.CustomResourceDefinitionVersion{newest}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	names := chain.Versions()
	if last := names[len(names)-1]; last != gvk.Version {
		return nil, nil, fmt.Errorf("the newest version of %s is %s, but watches.yaml names %s: the chart and watches.yaml are of the newest version",
			conversion.FileName, last, gvk.Version)
	}
	older := names[:len(names)-1]
	for _, f := range files {
		if !slices.Contains(older, strings.TrimSuffix(f, SchemaFile(""))) {
			return nil, nil, fmt.Errorf("%s/%s is of no older version of %s (%s)", conversion.VersionsDir, f, conversion.FileName, strings.Join(older, ", "))
		}
	}
	deprecated, err := readDeprecated(dir, older)
	if err != nil {
		return nil, nil, err
	}

	same := chain.Identity()
	var versions []apiextv1.CustomResourceDefinitionVersion
	for _, name := range older {
		old, err := readSpecSchema(filepath.Join(dir, SchemaFile(name)))
		if err != nil {
			return nil, nil, err
		}
		same = same && equalSchemas(old, spec)
		v, err := servedVersion(schema.GroupVersionKind{Group: gvk.Group, Version: name, Kind: gvk.Kind}, chartName, old, status, info, false)
		if err != nil {
			return nil, nil, err
		}
		if warning, ok := deprecated[name]; ok {
			v.Deprecated = true
			if warning != "" {
				v.DeprecationWarning = ptr(warning)
			}
		}
		versions = append(versions, v)
	}
	versions = append(versions, newest)
	if same {
		return versions, &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter}, nil
	}
	return versions, webhookConversion(), nil
}

// schemaFiles lists the schema files in dir, a chart's conversion.VersionsDir, if any.
func schemaFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), SchemaFile("")) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// readSpecSchema reads a SchemaFile, refusing fields a schema does not have: the file is
// written by make add-version, and a field the CRD would silently lose is a mistake.
func readSpecSchema(path string) (*apiextv1.JSONSchemaProps, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing: make add-version writes the schema of the version it makes older", path)
	}
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s apiextv1.JSONSchemaProps
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// MarshalSpecSchema is the content of a SchemaFile for spec, indented for review in diffs.
func MarshalSpecSchema(spec *apiextv1.JSONSchemaProps) ([]byte, error) {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// readDeprecated reads the DeprecatedFile of dir, if any; only older versions may be
// deprecated, since clients must be able to move to the newest.
func readDeprecated(dir string, older []string) (map[string]string, error) {
	path := filepath.Join(dir, DeprecatedFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return nil, fmt.Errorf("%s: want a map of versions to warnings: %w", path, err)
	}
	for v := range m {
		if !slices.Contains(older, v) {
			return nil, fmt.Errorf("%s: %s is not an older version (%s)", path, v, strings.Join(older, ", "))
		}
	}
	return m, nil
}

// equalSchemas reports whether two spec schemas are the same, as their JSON says.
func equalSchemas(a, b *apiextv1.JSONSchemaProps) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// SpecSchemaMap is spec as the untyped map conversion.Infer reads.
func SpecSchemaMap(spec *apiextv1.JSONSchemaProps) (map[string]any, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = json.Unmarshal(data, &m)
	return m, err
}
