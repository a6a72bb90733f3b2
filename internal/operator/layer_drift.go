package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// DriftMode is what the operator does when an object of a release differs from the release's
// manifest in a field the manifest sets (docs/drift.md).
type DriftMode string

const (
	// DriftRepair patches the field back to the manifest's value: the stock helm-operator's
	// behaviour, and the default.
	DriftRepair DriftMode = "repair"
	// DriftReport leaves the object as it is, and says so on the CR: a Warning Event
	// (DriftDetected) naming the objects and the paths that drifted, and the Drifted condition.
	DriftReport DriftMode = "report"
	// DriftOff neither watches the release's objects nor repairs them; an upgrade still applies
	// the chart.
	DriftOff DriftMode = "off"
)

// The Event reason and the condition of DriftReport.
const (
	reasonDriftDetected = "DriftDetected"
	conditionDrifted    = "Drifted"
	reasonNoDrift       = "NoDrift"
)

// DriftIgnore is a field of the objects of one kind under which the operator neither repairs
// nor reports a change: a JSON pointer (RFC 6901), as Flux's helm-controller's drift
// detection takes them.
type DriftIgnore struct {
	Kind string // the objects' kind; "*" for every kind
	Path string // the JSON pointer, such as /spec/replicas
}

// tokens are the pointer's reference tokens, decoded (~1 is "/", ~0 is "~").
func (ig DriftIgnore) tokens() []string {
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	parts := strings.Split(strings.TrimPrefix(ig.Path, "/"), "/")
	for i, p := range parts {
		parts[i] = unescape.Replace(p)
	}
	return parts
}

// parseDriftIgnore reads one KIND:POINTER.
func parseDriftIgnore(s string) (DriftIgnore, error) {
	kind, path, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || kind == "" || !strings.HasPrefix(path, "/") || path == "/" {
		return DriftIgnore{}, fmt.Errorf("%q is not KIND:/json/pointer", s)
	}
	ig := DriftIgnore{Kind: kind, Path: path}
	// Helm finds each object of the manifest by these: without them nothing can be repaired.
	switch tok := ig.tokens(); {
	case len(tok) == 1 && (tok[0] == "apiVersion" || tok[0] == "kind" || tok[0] == "metadata"),
		len(tok) == 2 && tok[0] == "metadata" && (tok[1] == "name" || tok[1] == "namespace"):
		return DriftIgnore{}, fmt.Errorf("%s names the object itself and cannot be ignored", path)
	}
	return ig, nil
}

// DriftSetting is what one kind does about drift.
type DriftSetting struct {
	Mode   DriftMode
	Ignore []DriftIgnore
}

// String is the setting as ParseDriftSetting reads it.
func (s DriftSetting) String() string {
	if len(s.Ignore) == 0 {
		return string(s.Mode)
	}
	rules := make([]string, len(s.Ignore))
	for i, ig := range s.Ignore {
		rules[i] = ig.Kind + ":" + ig.Path
	}
	return string(s.Mode) + ";ignore=" + strings.Join(rules, ",")
}

// ParseDriftSetting reads MODE[;ignore=KIND:POINTER,...]: MODE is repair, report or off; each
// rule's KIND is an object kind (or * for every kind) and POINTER a JSON pointer, such as
// "repair;ignore=Deployment:/spec/replicas,ConfigMap:/data/tuning".
func ParseDriftSetting(s string) (DriftSetting, error) {
	mode, rest, _ := strings.Cut(strings.TrimSpace(s), ";")
	set := DriftSetting{Mode: DriftMode(strings.TrimSpace(mode))}
	switch set.Mode {
	case DriftRepair, DriftReport, DriftOff:
	default:
		return DriftSetting{}, fmt.Errorf("mode %q is not repair, report or off", mode)
	}
	for part := range strings.SplitSeq(rest, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		key, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		if key != "ignore" {
			return DriftSetting{}, fmt.Errorf("unknown setting %q (ignore)", key)
		}
		for rule := range strings.SplitSeq(val, ",") {
			ig, err := parseDriftIgnore(rule)
			if err != nil {
				return DriftSetting{}, err
			}
			set.Ignore = append(set.Ignore, ig)
		}
	}
	if set.Mode == DriftOff && len(set.Ignore) > 0 {
		return DriftSetting{}, errors.New("off ignores everything: no ignore rules with it")
	}
	return set, nil
}

// DriftSettings are the drift settings by CR kind, from the flag --drift=Kind=SETTING
// (repeated); a kind not named repairs, or has the setting of "*=SETTING". They live in a
// flag rather than in watches.yaml: the manager reads watches.yaml strictly (internal/watchfile),
// and the stock helm-operator, which reads the same file, knows no such key.
type DriftSettings map[string]DriftSetting

// For is kind's setting.
func (ds DriftSettings) For(kind string) DriftSetting {
	if s, ok := ds[kind]; ok {
		return s
	}
	if s, ok := ds["*"]; ok {
		return s
	}
	return DriftSetting{Mode: DriftRepair}
}

// String lists the settings, for the flag's help.
func (ds DriftSettings) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ds)) {
		parts = append(parts, k+"="+ds[k].String())
	}
	return strings.Join(parts, " ")
}

// Set reads one Kind=SETTING (flag.Value).
func (ds DriftSettings) Set(s string) error {
	kind, setting, ok := strings.Cut(s, "=")
	if !ok || kind == "" {
		return fmt.Errorf("%q is not Kind=SETTING", s)
	}
	set, err := ParseDriftSetting(setting)
	if err != nil {
		return fmt.Errorf("drift setting of %s: %w", kind, err)
	}
	ds[kind] = set
	return nil
}

// The HPA default: a HorizontalPodAutoscaler owns the replicas of what it scales, and a repair
// that set them back to the chart's value would undo each of its decisions within seconds.
//
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch

// replicasPath is the field an HPA owns in the object it scales.
var replicasPath = []string{"spec", "replicas"}

// driftPolicy is one CR kind's DriftSetting at work: which fields of a rendered object are
// none of the operator's business. The drift filter (drift.go) and the drift layer ask it.
type driftPolicy struct {
	DriftSetting
	// hpas reads the HorizontalPodAutoscalers of a namespace (the API server: they are read
	// only when an object's replicas drifted, or at a repair of a release that sets some);
	// nil reads none.
	hpas client.Reader
}

// scaleTarget is an object that an HPA scales.
type scaleTarget struct {
	group, kind, name string
}

// scaleTargets are the objects the HPAs of namespace scale. A cluster that does not serve
// autoscaling/v2 has none.
func (p driftPolicy) scaleTargets(ctx context.Context, namespace string) (map[scaleTarget]bool, error) {
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
func (p driftPolicy) ignored(obj *unstructured.Unstructured, scaled map[scaleTarget]bool) [][]string {
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

// manifestSeparator splits a release manifest into its documents, as parseManifest does.
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

// strippedManifest is the release manifest with the ignored paths removed from its objects,
// each rewritten object as JSON (a YAML document like any other), the others as they were.
// Helm's repair patches only the fields the manifest sets, so a field removed here is left as
// the cluster has it. HPAs are read only if an object sets replicas.
func (p driftPolicy) strippedManifest(ctx context.Context, manifest, namespace string) (string, error) {
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
func (p driftPolicy) scaleTargetsFor(ctx context.Context, docs []manifestDoc, namespace string) (map[scaleTarget]bool, error) {
	if !slices.ContainsFunc(docs, func(d manifestDoc) bool { return d.obj != nil && setsReplicas(d.obj.Object) }) {
		return nil, nil
	}
	return p.scaleTargets(ctx, namespace)
}

// objectDrift is how one object of a release differs from the manifest.
type objectDrift struct {
	kind, name string
	missing    bool
	paths      []string // JSON pointers of the fields that differ
}

func (d objectDrift) String() string {
	if d.missing {
		return d.kind + " " + d.name + ": missing"
	}
	return d.kind + " " + d.name + ": " + strings.Join(d.paths, ", ")
}

// maxDriftPaths bounds the paths listed of one object.
const maxDriftPaths = 10

// drift compares each object of the manifest, without its ignored paths, with the cluster's
// (live, in namespace unless it is cluster-scoped).
func (p driftPolicy) drift(ctx context.Context, live client.Reader, manifest, namespace string) ([]objectDrift, error) {
	docs := splitManifest(manifest)
	scaled, err := p.scaleTargetsFor(ctx, docs, namespace)
	if err != nil {
		return nil, err
	}
	var out []objectDrift
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
		d := objectDrift{kind: doc.obj.GetKind(), name: doc.obj.GetName()}
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

// withDrift hands out action clients whose drift repair follows the kind's drift policy.
func withDrift(getter helmclient.ActionClientGetter, policy driftPolicy, live client.Reader,
	recorder record.EventRecorder, status client.StatusClient) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, cr client.Object) (helmclient.ActionInterface, error) {
		c, err := getter.ActionClientFor(ctx, cr)
		if err != nil {
			return nil, err
		}
		return driftClient{ActionInterface: c, ctx: ctx, obj: cr, policy: policy, live: live,
			recorder: recorder, status: status}, nil
	})
}

// driftClient is the drift layer, over the orphan sweep (see pipeline.go).
//
// helm-operator-plugins' Reconcile(rel) re-applies every object of the release's manifest:
// it creates what is missing and patches each field the manifest sets back to its value. A
// field that another controller owns (an HPA's replicas) or a person changes on purpose is
// thus fought: set back within seconds of every change. driftClient hands the repair a
// manifest without the fields the policy ignores, which the patch then leaves as they are;
// in report mode it repairs nothing and reports what differs; off, it does nothing.
type driftClient struct {
	helmclient.ActionInterface
	ctx      context.Context
	obj      client.Object
	policy   driftPolicy
	live     client.Reader // the release's objects, from the API server
	recorder record.EventRecorder
	status   client.StatusClient // writes the Drifted condition
}

func (c driftClient) Reconcile(rel *release.Release) error {
	switch c.policy.Mode {
	case DriftOff:
		return nil
	case DriftReport:
		drifts, err := c.policy.drift(c.ctx, c.live, rel.Manifest, rel.Namespace)
		if err != nil {
			return err
		}
		c.report(drifts)
		return nil
	}
	manifest, err := c.policy.strippedManifest(c.ctx, rel.Manifest, rel.Namespace)
	if err != nil {
		return err
	}
	if manifest != rel.Manifest {
		stripped := *rel
		stripped.Manifest = manifest
		rel = &stripped
	}
	if err := c.ActionInterface.Reconcile(rel); err != nil {
		return err
	}
	c.report(nil) // repaired: a Drifted condition of an earlier report mode is now False
	return nil
}

// report brings the CR's Drifted condition in line with drifts, and records a Warning Event
// for drifts found. As the record report does, the condition is set on the reconciler's
// copy of the CR too, so that the status the reconciler writes at the end keeps it. A CR
// that never drifted gets no condition.
func (c driftClient) report(drifts []objectDrift) {
	u, ok := c.obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	i := conditionIndex(conds, conditionDrifted)
	if i < 0 && len(drifts) == 0 {
		return
	}
	want := map[string]any{"type": conditionDrifted, "status": string(metav1.ConditionFalse), "reason": reasonNoDrift,
		"message": "the release's objects are as its manifest renders them", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if len(drifts) > 0 {
		parts := make([]string, len(drifts))
		for j, d := range drifts {
			parts[j] = d.String()
		}
		sort.Strings(parts)
		want["status"], want["reason"] = string(metav1.ConditionTrue), reasonDriftDetected
		want["message"] = truncate("objects differ from the release's manifest, left as they are (drift mode report): "+
			strings.Join(parts, "; "), maxConditionMessage)
		c.recorder.Event(c.obj, corev1.EventTypeWarning, reasonDriftDetected, truncate(want["message"].(string), maxEventMessage))
	}
	if i >= 0 {
		old, _ := conds[i].(map[string]any)
		if old["status"] == want["status"] && old["message"] == want["message"] {
			return
		}
		if old["status"] == want["status"] {
			want["lastTransitionTime"] = old["lastTransitionTime"]
		}
		conds[i] = want
	} else {
		conds = append(conds, want)
	}
	if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
		return
	}
	if err := c.status.Status().Update(c.ctx, u.DeepCopy()); err != nil {
		ctrl.Log.WithName("drift").Error(err, "reporting drift", "namespace", u.GetNamespace(), "name", u.GetName())
	}
}
