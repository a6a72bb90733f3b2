package drift

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
)

// The HPA default: a HorizontalPodAutoscaler owns the replicas of what it scales, and a repair
// that set them back to the chart's value would undo each of its decisions within seconds.
//
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch

// replicasPath is the field an HPA owns in the object it scales.
var replicasPath = []string{"spec", "replicas"}

// Policy is one CR kind's Setting at work: which fields of a rendered object are
// none of the operator's business. The drift filter (drift.go) and the drift layer ask it.
type Policy struct {
	Setting
	// hpas reads the HorizontalPodAutoscalers of a namespace (the API server: they are read
	// only when an object's replicas drifted, or at a repair of a release that sets some);
	// nil reads none.
	hpas client.Reader
}

// NewPolicy is setting at work; hpas reads the HorizontalPodAutoscalers (the API server), nil
// none.
func NewPolicy(setting Setting, hpas client.Reader) Policy {
	return Policy{Setting: setting, hpas: hpas}
}

// scaleTarget is an object that an HPA scales.
type scaleTarget struct {
	group, kind, name string
}

// scaleTargets are the objects the HPAs of namespace scale. A cluster that does not serve
// autoscaling/v2 has none.
func (p Policy) scaleTargets(ctx context.Context, namespace string) (map[scaleTarget]bool, error) {
	out := map[scaleTarget]bool{}
	if p.hpas == nil {
		return out, nil
	}
	var list autoscalingv2.HorizontalPodAutoscalerList
	if err := p.hpas.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return out, nil
		}
		return nil, fmt.Errorf("listing the HorizontalPodAutoscalers of %s: %w", namespace, err)
	}
	for _, h := range list.Items {
		ref := h.Spec.ScaleTargetRef
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil {
			continue
		}
		out[scaleTarget{gv.Group, ref.Kind, ref.Name}] = true
	}
	return out, nil
}

// ignored are the paths of obj (a rendered object) under which changes are neither repaired
// nor reported: the rules for its kind, and its replicas if an HPA scales it (scaled, from
// scaleTargets; nil when obj sets no replicas).
func (p Policy) ignored(obj *unstructured.Unstructured, scaled map[scaleTarget]bool) [][]string {
	var paths [][]string
	for _, ig := range p.Ignore {
		if ig.Kind == "*" || ig.Kind == obj.GetKind() {
			paths = append(paths, ig.tokens())
		}
	}
	if scaled[scaleTarget{obj.GroupVersionKind().Group, obj.GetKind(), obj.GetName()}] {
		paths = append(paths, replicasPath)
	}
	return paths
}

// setsReplicas reports whether a rendered object sets the field an HPA would own.
func setsReplicas(obj map[string]any) bool {
	_, found, _ := unstructured.NestedFieldNoCopy(obj, replicasPath...)
	return found
}

// without is a copy of obj with paths removed; obj is left as it is. A path that leads
// nowhere removes nothing; a path may go through a list by index, and ends at a field.
func without(obj map[string]any, paths [][]string) map[string]any {
	out, _ := withoutPaths(obj, paths)
	return out
}

// withoutPaths is without, and whether any path removed something.
func withoutPaths(obj map[string]any, paths [][]string) (map[string]any, bool) {
	out, removed := runtime.DeepCopyJSON(obj), false
	for _, path := range paths {
		removed = removePath(out, path) || removed
	}
	return out, removed
}

func removePath(v any, path []string) bool {
	for len(path) > 1 {
		switch c := v.(type) {
		case map[string]any:
			v = c[path[0]]
		case []any:
			i, err := strconv.Atoi(path[0])
			if err != nil || i < 0 || i >= len(c) {
				return false
			}
			v = c[i]
		default:
			return false
		}
		path = path[1:]
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if _, found := m[path[0]]; !found {
		return false
	}
	delete(m, path[0])
	return true
}

// manifestDoc is one object of a release manifest: its text, as the manifest has it, and the
// object, its numbers as json.Number so that a rewritten object keeps them exactly.
type manifestDoc struct {
	text string
	obj  *unstructured.Unstructured // nil: not an object (an empty document, a comment)
}

// manifestSeparator splits a release manifest into its documents, as
// internal/operator/releases.ParseManifest does.
const manifestSeparator = "\n---"

func splitManifest(manifest string) []manifestDoc {
	var docs []manifestDoc
	for _, text := range strings.Split(manifest, manifestSeparator) {
		doc := manifestDoc{text: text}
		if j, err := yaml.YAMLToJSON([]byte(text)); err == nil {
			d := json.NewDecoder(bytes.NewReader(j))
			d.UseNumber()
			var m map[string]any
			if d.Decode(&m) == nil && m != nil {
				doc.obj = &unstructured.Unstructured{Object: m}
			}
		}
		docs = append(docs, doc)
	}
	return docs
}

// StrippedManifest is the release manifest with the ignored paths removed from its objects,
// each rewritten object as JSON (a YAML document like any other), the others as they were.
// Helm's repair patches only the fields the manifest sets, so a field removed here is left as
// the cluster has it. HPAs are read only if an object sets replicas.
func (p Policy) StrippedManifest(ctx context.Context, manifest, namespace string) (string, error) {
	docs := splitManifest(manifest)
	scaled, err := p.scaleTargetsFor(ctx, docs, namespace)
	if err != nil {
		return "", err
	}
	changed := false
	for i, doc := range docs {
		if doc.obj == nil {
			continue
		}
		obj, removed := withoutPaths(doc.obj.Object, p.ignored(doc.obj, scaled))
		if !removed {
			continue
		}
		j, err := json.Marshal(obj)
		if err != nil {
			return "", err
		}
		docs[i].text, changed = docHeader(doc.text)+string(j)+"\n", true
	}
	if !changed {
		return manifest, nil
	}
	texts := make([]string, len(docs))
	for i, doc := range docs {
		texts[i] = doc.text
	}
	return strings.Join(texts, manifestSeparator), nil
}

// docHeader is what precedes the object in a document's text: the separator's end of line
// (or the first document's "---"), blank lines and comments, such as Helm's "# Source:".
func docHeader(text string) string {
	header := ""
	for line := range strings.Lines(text) {
		if t := strings.TrimSpace(line); t != "" && t != "---" && !strings.HasPrefix(t, "#") {
			break
		}
		header += line
	}
	return header
}

// scaleTargetsFor are the HPAs' targets in namespace if an object of docs sets replicas;
// else none, unread.
func (p Policy) scaleTargetsFor(ctx context.Context, docs []manifestDoc, namespace string) (map[scaleTarget]bool, error) {
	if !slices.ContainsFunc(docs, func(d manifestDoc) bool { return d.obj != nil && setsReplicas(d.obj.Object) }) {
		return nil, nil
	}
	return p.scaleTargets(ctx, namespace)
}

// ObjectDrift is how one object of a release differs from the manifest.
type ObjectDrift struct {
	kind, name string
	missing    bool
	paths      []string // JSON pointers of the fields that differ
}

// String names the object and the fields that differ, or says it is missing.
func (d ObjectDrift) String() string {
	if d.missing {
		return d.kind + " " + d.name + ": missing"
	}
	return d.kind + " " + d.name + ": " + strings.Join(d.paths, ", ")
}

// maxDriftPaths bounds the paths listed of one object.
const maxDriftPaths = 10

// Drift compares each object of the manifest, without its ignored paths, with the cluster's
// (live, in namespace unless it is cluster-scoped).
func (p Policy) Drift(ctx context.Context, live client.Reader, manifest, namespace string) ([]ObjectDrift, error) {
	docs := splitManifest(manifest)
	scaled, err := p.scaleTargetsFor(ctx, docs, namespace)
	if err != nil {
		return nil, err
	}
	var out []ObjectDrift
	for _, doc := range docs {
		if doc.obj == nil || doc.obj.GetKind() == "" {
			continue
		}
		want := without(doc.obj.Object, p.ignored(doc.obj, scaled))
		have := &unstructured.Unstructured{}
		have.SetGroupVersionKind(doc.obj.GroupVersionKind())
		key := types.NamespacedName{Namespace: doc.obj.GetNamespace(), Name: doc.obj.GetName()}
		if key.Namespace == "" {
			key.Namespace = namespace // the client drops it for a cluster-scoped kind
		}
		d := ObjectDrift{kind: doc.obj.GetKind(), name: doc.obj.GetName()}
		if err := live.Get(ctx, key, have); apierrors.IsNotFound(err) {
			d.missing = true
		} else if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", d.kind, d.name, err)
		} else {
			driftedPaths(want, have.Object, "", &d.paths)
		}
		if d.missing || len(d.paths) > 0 {
			out = append(out, d)
		}
	}
	return out, nil
}

// driftedPaths appends to out the JSON pointers under at of the fields that want sets and
// have does not set to the same value (the fields a repair would patch; see subset), at most
// maxDriftPaths.
func driftedPaths(want, have any, at string, out *[]string) {
	if len(*out) >= maxDriftPaths {
		return
	}
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			*out = append(*out, at)
			return
		}
		escape := strings.NewReplacer("~", "~0", "/", "~1")
		for _, k := range slices.Sorted(maps.Keys(w)) {
			driftedPaths(w[k], h[k], at+"/"+escape.Replace(k), out)
		}
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			*out = append(*out, at)
			return
		}
		for i := range w {
			driftedPaths(w[i], h[i], at+"/"+strconv.Itoa(i), out)
		}
	default:
		if !subset(plainNumber(want), plainNumber(have)) {
			*out = append(*out, at)
		}
	}
}

// plainNumber is v, or the int64 or float64 of a json.Number (splitManifest keeps numbers as
// written), which subset compares.
func plainNumber(v any) any {
	n, ok := v.(json.Number)
	if !ok {
		return v
	}
	if i, err := n.Int64(); err == nil {
		return i
	}
	if f, err := n.Float64(); err == nil {
		return f
	}
	return v
}

// OwnedManifest is the release manifest with Helm's ownership annotations on each object, the
// release's name and namespace, as Helm sets them on every object it creates or adopts (they
// are not in the manifest it records). The repair creates what is missing from the manifest
// it is given: without them, an object it re-created (one deleted by a person's helm rollback
// to a revision without it) is one the release's next upgrade refuses to import, and every
// upgrade of the CR then fails ("exists and cannot be imported into the current release").
func OwnedManifest(manifest, release, namespace string) (string, error) {
	docs := splitManifest(manifest)
	changed := false
	for i, doc := range docs {
		if doc.obj == nil {
			continue
		}
		a := doc.obj.GetAnnotations()
		if a[ownership.HelmReleaseNameAnnotation] == release && a[ownership.HelmReleaseNamespaceAnnotation] == namespace {
			continue
		}
		if a == nil {
			a = map[string]string{}
		}
		a[ownership.HelmReleaseNameAnnotation], a[ownership.HelmReleaseNamespaceAnnotation] = release, namespace
		doc.obj.SetAnnotations(a)
		j, err := json.Marshal(doc.obj.Object)
		if err != nil {
			return "", err
		}
		docs[i].text, changed = docHeader(doc.text)+string(j)+"\n", true
	}
	if !changed {
		return manifest, nil
	}
	texts := make([]string, len(docs))
	for i, doc := range docs {
		texts[i] = doc.text
	}
	return strings.Join(texts, manifestSeparator), nil
}
