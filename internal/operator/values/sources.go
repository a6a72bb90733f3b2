package values

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"transwarp.io/tos/warpdrive-operator/internal/operator/informers"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// sourcesIndex indexes the CRs of a kind by the sources they take values from, "Kind/name"
// (the cache keys the index by namespace too).
const sourcesIndex = "warpdrive.transwarp.io/valuesFrom"

// NewSourcesCache is the cache of the objects CRs take values from, as metadata only: the
// Secrets labelled chart-readable and every ConfigMap, each kept as its name and version
// (keepSourceVersion). The manager's own cache holds only the
// release Secrets (CacheOptions), and caching every Secret of the cluster, data included,
// would make the manager's memory grow with Secrets no CR uses. A source's data is read from
// the API server when a CR is rendered (valuesfrom.Resolver).
func NewSourcesCache(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: keepSourceVersion,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{valuesfrom.ReadableLabel: "true"})},
		},
	})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(leaderless{c})
}

// keepSourceVersion keeps of a cached source only what the operator reads of it: its
// namespace, name and resourceVersion (wake, changed). The cache runs on every replica and
// holds every ConfigMap of the cluster, named by a CR or not; a namespace editor may give each
// 256 KiB of annotations (2,000 of them would be 500 MiB on each replica), and labels,
// owners and finalizers are as free to write. A Secret's label that lets charts read it is
// the cache's selector, judged by the API server; the Resolver reads it again, with the data,
// from the API server. Typed objects lose their data too, should one ever be cached here.
func keepSourceVersion(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetLabels(nil)
		m.SetAnnotations(nil)
		m.SetOwnerReferences(nil)
		m.SetFinalizers(nil)
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	}
	return informers.StripUnread(obj)
}

// leaderless runs a cache on every replica, before the controllers that wait for it.
type leaderless struct{ cache.Cache }

func (leaderless) NeedLeaderElection() bool { return false }

// Sources gives the helm reconciler of one kind its values, with spec.valuesFrom
// resolved, and wakes it when a source changes.
type Sources struct {
	GVK      schema.GroupVersionKind
	Resolver valuesfrom.Resolver // reads the sources from the API server
	Cached   cache.Cache         // their metadata (NewSourcesCache)
	CRs      client.Reader       // the manager's cache of the kind, indexed by sourcesIndex
	Outcomes *outcomes.Store     // where each visit's sources and failures go
	// maxValues bounds the values merged from the spec and its sources (--max-spec-values).
	MaxValues int
	Recorder  record.EventRecorder // the reconciler's
	// wakes spaces the reconciles of each CR that its sources' changes bring, on the budget
	// its forced reconciles draw from too: a tenant who rewrites a source in a loop would
	// otherwise upgrade the CRs that name it at each version, and keep the kind's workers busy
	// for everyone.
	Wakes *informers.PerCRInterval
}

// Translate is the helm reconciler's value translator: the CR's values with its sources
// merged under them. What the visit read is recorded in outcomes: the sources' versions, for
// the status once the release is deployed, and the Secrets' strings, which the redacting
// layer (layer_redact.go) takes out of this visit's errors.
func (v *Sources) Translate(ctx context.Context, cr *unstructured.Unstructured) (chartutil.Values, error) {
	res, err := v.Resolver.Resolve(ctx, cr)
	if err != nil {
		msg := err.Error() // names the source and why, never its content
		v.Outcomes.Failed(cr, statuscontract.Failure{Reason: statuscontract.ReasonValuesFromFailed, Step: "values", Message: msg})
		v.Recorder.Event(cr, corev1.EventTypeWarning, statuscontract.ReasonValuesFromFailed, msg)
		return nil, err
	}
	if v.MaxValues > 0 && countValues(res.Values, v.MaxValues) > v.MaxValues {
		// The spec is bounded at the reconciler's first read (specbound.go); its sources are
		// bounded in bytes, and 1 MiB of YAML may hold 300,000 values.
		msg := fmt.Sprintf("the values of the spec and its %s sources hold more than %d values, the bound of this operator "+
			"(--max-spec-values): the CR is not reconciled, and its release is left as it is, until they hold fewer",
			valuesfrom.Field, v.MaxValues)
		// Terminal, as a spec over the bound (BoundClient.refuse): an edit of the CR or
		// of a source reconciles it again.
		v.Outcomes.Failed(cr, statuscontract.Failure{Reason: statuscontract.ReasonSpecTooLarge, Step: "values", Message: msg, Terminal: true})
		v.Recorder.Event(cr, corev1.EventTypeWarning, statuscontract.ReasonSpecTooLarge, msg)
		return nil, reconcile.TerminalError(errors.New(msg))
	}
	v.Outcomes.Resolved(cr, res.Sources, res.Secrets, res.Values)
	return res.Values, nil
}

// setup indexes the kind's CRs by source, to be called before the manager starts.
func (v *Sources) Setup(ctx context.Context, indexer client.FieldIndexer) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(v.GVK)
	return indexer.IndexField(ctx, cr, sourcesIndex, func(obj client.Object) []string {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		refs, _ := valuesfrom.Refs(u) // a CR whose references do not parse fails its visit
		keys := make([]string, 0, len(refs))
		for _, r := range refs {
			keys = append(keys, sourceKey(r.Kind, r.Name))
		}
		return keys
	})
}

func sourceKey(kind, name string) string { return kind + "/" + name }

// watch is the helm controller's watch of the sources: a new version of a Secret or a
// ConfigMap, or one created, labelled or deleted, reconciles the CRs that name it, each at
// most once every informers.ForcedInterval (wakes).
func (v *Sources) Watch(c reconciler.ControllerSetup) error {
	for _, kind := range []string{valuesfrom.KindSecret, valuesfrom.KindConfigMap} {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
		src := source.Kind(v.Cached, obj, v.wake(kind),
			predicate.TypedResourceVersionChangedPredicate[*metav1.PartialObjectMetadata]{})
		if err := c.Watch(src); err != nil {
			return fmt.Errorf("watching %ss for spec.valuesFrom: %w", kind, err)
		}
	}
	return nil
}

// wake is the handler of the sources of kind: it queues the CRs that name the source (crsOf)
// at once, or when their interval ends (wakes), where the queue merges them into one. That
// reconcile reads the sources as they are then, so the latest version is applied.
func (v *Sources) wake(kind string) handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request] {
	crsOf := v.crsOf(kind)
	enqueue := func(ctx context.Context, src *metav1.PartialObjectMetadata, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range crsOf(ctx, src) {
			if d := v.Wakes.Wait(req.NamespacedName, time.Now()); d > 0 {
				q.AddAfter(req, d)
			} else {
				q.Add(req)
			}
		}
	}
	// TypedFuncs queues at low priority the sources' initial list, as the map handler does.
	type obj = *metav1.PartialObjectMetadata
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.TypedFuncs[obj, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e ctrlevent.TypedCreateEvent[obj], q queue) { enqueue(ctx, e.Object, q) },
		// A source's old and new versions have the same name: the same CRs name them.
		UpdateFunc:  func(ctx context.Context, e ctrlevent.TypedUpdateEvent[obj], q queue) { enqueue(ctx, e.ObjectNew, q) },
		DeleteFunc:  func(ctx context.Context, e ctrlevent.TypedDeleteEvent[obj], q queue) { enqueue(ctx, e.Object, q) },
		GenericFunc: func(ctx context.Context, e ctrlevent.TypedGenericEvent[obj], q queue) { enqueue(ctx, e.Object, q) },
	}
}

// crsOf maps a source of kind to the CRs of its namespace that name it.
func (v *Sources) crsOf(kind string) handler.TypedMapFunc[*metav1.PartialObjectMetadata, reconcile.Request] {
	return func(ctx context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(v.GVK.GroupVersion().WithKind(v.GVK.Kind + "List"))
		if err := v.CRs.List(ctx, list, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{sourcesIndex: sourceKey(kind, obj.GetName())}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

// changed names the first source of cr's spec.valuesFrom whose version now is not the one
// the deployed release was rendered from, applied; "" if none. A source the cache does not
// hold (missing, or a Secret not labelled readable) has no version.
func (v *Sources) Changed(ctx context.Context, cr *unstructured.Unstructured, applied []valuesfrom.Source) string {
	refs, err := valuesfrom.Refs(cr)
	if err != nil {
		return "" // the visit fails, and says why
	}
	was := make(map[string]string, len(applied))
	for _, s := range applied {
		was[sourceKey(s.Kind, s.Name)] = s.ResourceVersion
	}
	for _, r := range refs {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(r.Kind))
		now := ""
		if err := v.Cached.Get(ctx, types.NamespacedName{Namespace: cr.GetNamespace(), Name: r.Name}, obj); err == nil {
			now = obj.GetResourceVersion()
		}
		if now != was[sourceKey(r.Kind, r.Name)] {
			return r.String()
		}
	}
	return ""
}

// StatusSources is status.valuesFrom for sources.
func StatusSources(sources []valuesfrom.Source) []any {
	out := make([]any, 0, len(sources))
	for _, s := range sources {
		out = append(out, map[string]any{statuscontract.FieldSourceKind: s.Kind, statuscontract.FieldSourceName: s.Name,
			statuscontract.FieldSourceResourceVersion: s.ResourceVersion})
	}
	return out
}
