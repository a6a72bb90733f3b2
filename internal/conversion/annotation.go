package conversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Annotation carries, from a conversion to the conversion back, the values that have no
// place in the version converted to. Its value is a JSON object keyed by the version the
// values came from, the version whose conversion back puts them in again; each maps JSON
// pointers into that version's spec to the value to put there. For example
//
//	{"v1alpha1": {"/legacyPort": 8080}}
//
// is on a v1 object converted from a v1alpha1 one with a legacyPort that v1 dropped.
const Annotation = "conversion.warpdrive.transwarp.io/unconverted"

// MaxAnnotationBytes bounds the annotation's value. The API server refuses an object whose
// annotations take more than 256 KiB together, so a larger annotation could not be stored
// anyway; and dropping values to make it fit would lose a tenant's data without a word,
// which is worse than a conversion that fails for that one object, visibly, and leaves it
// as it is.
const MaxAnnotationBytes = 256 << 10

// unconverted is the annotation's content: version -> pointer -> value.
type unconverted map[string]map[string]any

// readUnconverted decodes the annotation of obj. A missing annotation, or one that does not
// decode (nobody but this package should write it), holds nothing; an entry that is not an
// object is skipped. Numbers decode as the API server decodes an object's (int64 where
// whole, float64 otherwise), so that a value comes back as it went.
func readUnconverted(obj map[string]any) unconverted {
	u := unconverted{}
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	value, _ := annotations[Annotation].(string)
	if value == "" {
		return u
	}
	var raw map[string]any
	if err := utiljson.Unmarshal([]byte(value), &raw); err != nil {
		return u
	}
	for version, entries := range raw {
		if m, ok := entries.(map[string]any); ok && len(m) > 0 {
			u[version] = m
		}
	}
	return u
}

// writeUnconverted sets the annotation of obj to u, or removes it when u holds nothing, with
// the annotations map (and metadata) if that leaves them empty: an object without them
// converted and back then has none again. It fails when u exceeds MaxAnnotationBytes, or
// when obj's metadata or annotations are not objects, which the API server never sends.
func writeUnconverted(obj map[string]any, u unconverted) error {
	if len(u) == 0 {
		meta, _ := obj["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		if _, ok := annotations[Annotation]; !ok {
			return nil
		}
		delete(annotations, Annotation)
		if len(annotations) == 0 {
			delete(meta, "annotations")
			if len(meta) == 0 {
				delete(obj, "metadata")
			}
		}
		return nil
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // people read the annotation; "<" is clearer than "\u003c"
	if err := enc.Encode(u); err != nil {
		return fmt.Errorf("values kept for the conversion back do not encode as JSON: %w", err)
	}
	value := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(value) > MaxAnnotationBytes {
		return fmt.Errorf("values without a place in the target version take %d bytes, more than the %d the %s annotation may hold: converting would lose them",
			len(value), MaxAnnotationBytes, Annotation)
	}

	meta, err := object(obj, "metadata")
	if err != nil {
		return err
	}
	annotations, err := object(meta, "annotations")
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	annotations[Annotation] = string(value)
	return nil
}

// object returns the object at key of m, creating it if it is missing.
func object(m map[string]any, key string) (map[string]any, error) {
	v, ok := m[key]
	if !ok {
		o := map[string]any{}
		m[key] = o
		return o, nil
	}
	o, ok := v.(map[string]any)
	if !ok || o == nil {
		return nil, errors.New(key + " is not an object")
	}
	return o, nil
}
