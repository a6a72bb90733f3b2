package valuesfrom

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Field is the spec field that lists the references. It is reserved: it is never passed to
// the chart (Values leaves it out), and the CRD generator refuses a chart that has a value
// of that name.
const Field = "valuesFrom"

// ReadableLabel, set to "true" on a Secret, lets the custom resources of its namespace take
// values from it. Labelling takes the right to update the Secret.
const ReadableLabel = "warpdrive.transwarp.io/chart-readable"

// Bounds of the references, which the CRD's schema states too (internal/gen/crdgen).
const (
	// MaxRefs is the most references a resource may list.
	MaxRefs = 16
	// MaxBytes bounds the keys read from all the sources of one resource together.
	MaxBytes = 1 << 20
	// maxTargetPath bounds a targetPath.
	maxTargetPath = 250
)

// DefaultValuesKey is the key read when a reference names none.
const DefaultValuesKey = "values.yaml"

// Source kinds.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// Ref is one entry of spec.valuesFrom.
type Ref struct {
	// Kind is KindSecret or KindConfigMap.
	Kind string
	// Name is the object's name, in the resource's namespace.
	Name string
	// ValuesKey is the data key read: a YAML map of values, or with TargetPath one value's text.
	ValuesKey string
	// TargetPath, if set, is where the key's text goes, in Helm's --set path syntax
	// ("auth.password", "hosts[0]"); the text is set as a string.
	TargetPath string
	// Optional: a missing object or key is skipped rather than an error.
	Optional bool
}

// String names the source as messages do: Secret "db-credentials".
func (r Ref) String() string { return fmt.Sprintf("%s %q", r.Kind, r.Name) }

// keyPattern is what a Secret's or a ConfigMap's data key may be.
var keyPattern = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Refs reads spec.valuesFrom of cr. The CRD's schema refuses what this refuses; it is checked
// again here because the field reaches the operator however the CRD was made.
func Refs(cr *unstructured.Unstructured) ([]Ref, error) {
	raw, found, err := unstructured.NestedFieldNoCopy(cr.Object, "spec", Field)
	if err != nil || !found || raw == nil {
		return nil, err
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("spec.%s must be a list", Field)
	}
	if len(list) > MaxRefs {
		return nil, fmt.Errorf("spec.%s lists %d sources, at most %d are allowed", Field, len(list), MaxRefs)
	}
	refs := make([]Ref, 0, len(list))
	for i, item := range list {
		at := fmt.Sprintf("spec.%s[%d]", Field, i)
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s must be an object", at)
		}
		var r Ref
		for field, into := range map[string]*string{"kind": &r.Kind, "name": &r.Name,
			"valuesKey": &r.ValuesKey, "targetPath": &r.TargetPath} {
			if v, found := m[field]; found {
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("%s.%s must be a string", at, field)
				}
				*into = s
			}
		}
		if v, found := m["optional"]; found {
			if r.Optional, ok = v.(bool); !ok {
				return nil, fmt.Errorf("%s.optional must be a boolean", at)
			}
		}
		if r.ValuesKey == "" {
			r.ValuesKey = DefaultValuesKey
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		refs = append(refs, r)
	}
	return refs, nil
}

func (r Ref) check() error {
	switch {
	case r.Kind != KindSecret && r.Kind != KindConfigMap:
		return fmt.Errorf("kind must be %s or %s", KindSecret, KindConfigMap)
	case len(validation.IsDNS1123Subdomain(r.Name)) > 0:
		return fmt.Errorf("name %.64q is not the name of an object", r.Name)
	case len(r.ValuesKey) > validation.DNS1123SubdomainMaxLength || !keyPattern.MatchString(r.ValuesKey):
		return fmt.Errorf("valuesKey %.64q is not a data key", r.ValuesKey)
	case len(r.TargetPath) > maxTargetPath:
		return fmt.Errorf("targetPath is longer than %d characters", maxTargetPath)
	}
	return nil
}
