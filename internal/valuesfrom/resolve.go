package valuesfrom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Source is the version of one source that values were read from.
type Source struct {
	Kind            string
	Name            string
	ResourceVersion string
}

// Result is what Resolve read.
type Result struct {
	// Values are the chart's values: the sources' in order, then the resource's own spec on
	// top, without Field.
	Values map[string]any
	// Sources are the versions read, in the order of the references; a skipped optional
	// source is absent.
	Sources []Source
	// Secrets redacts what was read from Secrets.
	Secrets Redactor
}

// Reasons a source cannot be used; each is an Error's Reason.
const (
	ReasonNotFound    = "NotFound"
	ReasonNotReadable = "NotReadable"
	ReasonKeyMissing  = "KeyMissing"
	ReasonTooLarge    = "TooLarge"
	ReasonInvalid     = "Invalid"
)

// Error says why a source cannot be used. Its message names the source, never its content.
type Error struct {
	Ref    Ref
	Reason string
	detail string
}

func (e *Error) Error() string { return fmt.Sprintf("spec.%s: %s: %s", Field, e.Ref, e.detail) }

// Resolver reads sources with Reader: the API server itself, not a cache, so that the
// operator holds no Secret it does not use.
type Resolver struct {
	Reader client.Reader
	// Defaults are the chart's values.yaml. The CRD's schema fills a CR's spec in with them,
	// so a value the CR holds at its default may be one nobody set: it does not hide a
	// source's value (see mergeOwn).
	Defaults map[string]any
}

// Resolve reads the sources of cr and merges its values. The spec's references are checked
// (Refs); an error about a source is an *Error.
func (r Resolver) Resolve(ctx context.Context, cr *unstructured.Unstructured) (Result, error) {
	spec, _, err := unstructured.NestedFieldNoCopy(cr.Object, "spec")
	if err != nil {
		return Result{}, err
	}
	own, _ := spec.(map[string]any)
	refs, err := Refs(cr)
	if err != nil {
		return Result{}, err
	}
	res := Result{Values: map[string]any{}}
	budget := MaxBytes
	for _, ref := range refs {
		text, version, found, err := r.read(ctx, cr.GetNamespace(), ref, &budget)
		if err != nil {
			return Result{}, err
		}
		if !found {
			continue
		}
		res.Sources = append(res.Sources, Source{Kind: ref.Kind, Name: ref.Name, ResourceVersion: version})
		vals, err := valuesOf(ref, text)
		if err != nil {
			return Result{}, err
		}
		if ref.Kind == KindSecret {
			res.Secrets.addText(text)
			res.Secrets.addValues(vals)
		}
		merge(res.Values, vals)
	}
	if len(res.Sources) == 0 {
		res.Values = Values(own)
	} else {
		mergeOwn(res.Values, Values(own), r.Defaults)
	}
	res.Secrets.done()
	return res, nil
}

// Values is spec without Field: the values a resource gives its chart itself. The maps
// below the top are shared with spec.
func Values(spec map[string]any) map[string]any {
	out := make(map[string]any, len(spec))
	for k, v := range spec {
		if k != Field {
			out[k] = v
		}
	}
	return out
}

// read returns the text of ref's key and the object's resourceVersion; found is false for a
// missing optional source. budget is what may still be read, and is reduced by the key's size.
func (r Resolver) read(ctx context.Context, namespace string, ref Ref, budget *int) (text []byte, version string, found bool, err error) {
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	fail := func(reason, format string, args ...any) ([]byte, string, bool, error) {
		return nil, "", false, &Error{Ref: ref, Reason: reason, detail: fmt.Sprintf(format, args...)}
	}
	missing := func(what string) ([]byte, string, bool, error) {
		if ref.Optional {
			return nil, "", false, nil
		}
		return fail(ReasonNotFound, "%s", what)
	}
	var data map[string][]byte
	switch ref.Kind {
	case KindSecret:
		// The label first, from the metadata alone: an unlabelled Secret's data is never read.
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(KindSecret))
		if err := r.Reader.Get(ctx, key, meta); err != nil {
			if apierrors.IsNotFound(err) {
				return missing("not found")
			}
			return nil, "", false, fmt.Errorf("reading %s: %w", ref, err)
		}
		if !Readable(meta) {
			return fail(ReasonNotReadable, "not labelled %s=true, which lets charts read it", ReadableLabel)
		}
		s := &corev1.Secret{}
		if err := r.Reader.Get(ctx, key, s); err != nil {
			if apierrors.IsNotFound(err) {
				return missing("not found")
			}
			return nil, "", false, fmt.Errorf("reading %s: %w", ref, err)
		}
		if !Readable(s) { // unlabelled since
			return fail(ReasonNotReadable, "not labelled %s=true, which lets charts read it", ReadableLabel)
		}
		data, version = s.Data, s.ResourceVersion
	case KindConfigMap:
		cm := &corev1.ConfigMap{}
		if err := r.Reader.Get(ctx, key, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return missing("not found")
			}
			return nil, "", false, fmt.Errorf("reading %s: %w", ref, err)
		}
		data, version = cm.BinaryData, cm.ResourceVersion
		if s, ok := cm.Data[ref.ValuesKey]; ok {
			data = map[string][]byte{ref.ValuesKey: []byte(s)}
		}
	}
	text, ok := data[ref.ValuesKey]
	if !ok {
		if ref.Optional {
			return nil, "", false, nil
		}
		return fail(ReasonKeyMissing, "has no key %q", ref.ValuesKey)
	}
	if *budget -= len(text); *budget < 0 {
		return fail(ReasonTooLarge, "the keys read from spec.%s hold more than %d bytes in all", Field, MaxBytes)
	}
	return text, version, true, nil
}

// Readable reports whether a Secret carries ReadableLabel "true".
func Readable(obj metav1.Object) bool { return obj.GetLabels()[ReadableLabel] == "true" }

// valuesOf is what ref's key text gives: the YAML map itself, or with a targetPath, the text
// at that path. Parse errors are not passed on: YAML's quote the text.
func valuesOf(ref Ref, text []byte) (map[string]any, error) {
	if ref.TargetPath == "" {
		vals, err := chartutil.ReadValues(text)
		if err != nil {
			return nil, &Error{Ref: ref, Reason: ReasonInvalid,
				detail: fmt.Sprintf("key %q is not a YAML map of values", ref.ValuesKey)}
		}
		return vals, nil
	}
	// The text as a JSON string, so that Helm's path syntax reads the path and nothing in
	// the text: --set-json's parser.
	quoted, err := json.Marshal(string(text))
	if err != nil {
		return nil, err
	}
	vals := map[string]any{}
	if err := strvals.ParseJSON(ref.TargetPath+"="+string(quoted), vals); err != nil {
		return nil, &Error{Ref: ref, Reason: ReasonInvalid, detail: fmt.Sprintf("targetPath %q is not a path of values", ref.TargetPath)}
	}
	return vals, nil
}

// merge merges src into dst: maps key by key, anything else replaced, as Helm merges values
// files and Flux merges valuesFrom.
func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				copied := make(map[string]any, len(dm))
				for dk, dv := range dm {
					copied[dk] = dv
				}
				merge(copied, sm)
				dst[k] = copied
				continue
			}
		}
		dst[k] = v
	}
}

// mergeOwn merges a CR's own values over what the sources gave, as merge does, except that a
// value equal to the chart's default at its path leaves a source's value in place. The
// apiserver writes the schema's defaults into every CR, so without this rule a source could
// set no value that has a default: the CR's own copy of the default would always win. The
// price: a CR that sets a value to its default on purpose still gets the source's.
func mergeOwn(dst, own, defaults map[string]any) {
	for k, v := range own {
		_, fromSource := dst[k]
		def, hasDefault := defaults[k]
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				copied := make(map[string]any, len(dm))
				for dk, dv := range dm {
					copied[dk] = dv
				}
				defs, _ := def.(map[string]any)
				mergeOwn(copied, sm, defs)
				dst[k] = copied
				continue
			}
		}
		if fromSource && hasDefault && sameJSON(v, def) {
			continue
		}
		dst[k] = v
	}
}

// sameJSON reports whether a and b are the same JSON value: a CR's integers are int64, a
// chart's float64.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// IsSourceError reports whether err is about a source (an *Error), not about reading it.
func IsSourceError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
