package values

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// DefaultMaxSpecValues is the default of --max-spec-values: how many values (the objects,
// lists and scalars of its JSON) a CR's spec may hold for the manager to reconcile it.
//
// Why a count: a chart's CRD keeps open every part of the values its schema does not type
// (docs/security.md, "Open specs"), and there the API server admits a spec of up to etcd's
// 1.5 MB in any shape. What such a spec costs the manager depends on its shape, not its size:
// one string of 1.5 MB is 1.7 MiB of heap, the same bytes as a list of empty objects 32 MiB,
// held by the cache and copied several times by every reconcile
// (TestManagerMemoryWithLargestOpenCRs: 5 such CRs took the manager to 1,483 MiB). The
// number of values is what the heap grows with, about 64 bytes each. The largest values file
// of a widely used chart, kube-prometheus-stack's, holds 1,750; a CR made from it with every
// value set stays far below the bound, which costs at most a few MiB of heap per CR.
const DefaultMaxSpecValues = 20000

// specOverBoundAnnotation marks, in the manager's cache only, a CR whose spec the cache
// dropped because it holds more values than the bound; its value is the bound. It is never
// written to the API server: BoundClient refuses to hand such a CR to the reconciler,
// whose writes are the only ones that send a CR's metadata.
const specOverBoundAnnotation = "warpdrive.transwarp.io/spec-over-bound"

// countValues counts the values of v, a decoded JSON document: every object, list and scalar,
// nested ones included. It stops once the count passes limit, so that a tenant's spec costs
// at most limit steps.
func countValues(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		if n > limit {
			return
		}
		n++
		switch t := v.(type) {
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return n
}

// overBound reports whether the spec of cr holds more than limit values.
func overBound(cr *unstructured.Unstructured, limit int) bool {
	spec, ok := cr.Object["spec"]
	return ok && limit > 0 && countValues(spec, limit) > limit
}

// BoundSpec is a cache transform: a CR whose spec holds more than limit values is kept with
// an empty spec and specOverBoundAnnotation, so that the cache holds no more of it than of a
// small CR. The informer still decodes each version of it once, as it arrives.
//
// The mark is the manager's alone: one that the CR's author wrote is dropped from the cached
// copy. Else anyone who may edit a CR could have it refused at will, at the generation a
// chart rollout judges it on, and halt the rollout of a working chart for every CR of the kind.
func BoundSpec(obj any, limit int) {
	cr, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if a := cr.GetAnnotations(); a[specOverBoundAnnotation] != "" {
		delete(a, specOverBoundAnnotation)
		cr.SetAnnotations(a)
	}
	if !overBound(cr, limit) {
		return
	}
	cr.Object["spec"] = map[string]any{}
	a := cr.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[specOverBoundAnnotation] = strconv.Itoa(limit)
	cr.SetAnnotations(a)
}

// BoundClient is the client of one kind's helm reconciler: the statusKeepingClient,
// except that the reconciler's first read of a CR whose spec holds more values than limit
// fails, so that the reconciler neither renders it nor writes the CR (its first write adds a
// finalizer with an update of the whole CR). The failure is counted in outcomes, which makes
// the CR Stalled after MaxTries, and told in a Warning Event; the release is left as it is.
//
// A CR being deleted is read as before: its uninstall needs no values.
type BoundClient struct {
	client.Client
	Cached   client.Reader // the manager's cache, where BoundSpec marked the CRs over the bound
	Limit    int
	Outcomes *outcomes.Store
	Recorder record.EventRecorder
}

// Get refuses a CR over the bound from the cache's copy, without a request (the cache is at
// least as new as the event that queued the CR), and otherwise reads it as before and counts
// what it read: a version newer than the cache's may be over the bound too.
func (c BoundClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetUID() != "" || c.Limit <= 0 {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	cached := &unstructured.Unstructured{}
	cached.SetGroupVersionKind(u.GroupVersionKind())
	if err := c.Cached.Get(ctx, key, cached); err == nil && cached.GetDeletionTimestamp() == nil &&
		cached.GetAnnotations()[specOverBoundAnnotation] != "" {
		return c.refuse(cached)
	}
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if u.GetDeletionTimestamp() == nil && overBound(u, c.Limit) {
		err := c.refuse(u)
		u.Object = map[string]any{} // the reconciler returns on the error; drop the spec now
		return err
	}
	return nil
}

// refuse records and reports that cr is over the bound, and returns the error the reconciler
// returns: a terminal one, not retried, as only an edit of the spec can mend it, and that
// edit's event reconciles the CR again.
func (c BoundClient) refuse(cr *unstructured.Unstructured) error {
	msg := fmt.Sprintf("the spec holds more than %d values (objects, lists and scalars of its JSON), "+
		"the bound of this operator (--max-spec-values): the CR is not reconciled, and its release is "+
		"left as it is, until its spec holds fewer", c.Limit)
	c.Outcomes.Failed(cr, statuscontract.Failure{Reason: statuscontract.ReasonSpecTooLarge, Step: "values", Message: msg, Terminal: true})
	c.Recorder.Event(cr, corev1.EventTypeWarning, statuscontract.ReasonSpecTooLarge, msg)
	return reconcile.TerminalError(fmt.Errorf("%s %s: %s", cr.GetKind(), client.ObjectKeyFromObject(cr), msg))
}
