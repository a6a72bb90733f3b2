package pipeline

import (
	"context"
	"sort"
	"strings"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// withDrift hands out action clients whose drift repair follows the kind's drift policy.
func withDrift(getter helmclient.ActionClientGetter, policy drift.Policy, live client.Reader,
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
	policy   drift.Policy
	live     client.Reader // the release's objects, from the API server
	recorder record.EventRecorder
	status   client.StatusClient // writes the Drifted condition
}

func (c driftClient) Reconcile(rel *release.Release) error {
	switch c.policy.Mode {
	case drift.Off:
		return nil
	case drift.Report:
		drifts, err := c.policy.Drift(c.ctx, c.live, rel.Manifest, rel.Namespace)
		if err != nil {
			return err
		}
		c.report(drifts)
		return nil
	}
	manifest, err := c.policy.StrippedManifest(c.ctx, rel.Manifest, rel.Namespace)
	if err != nil {
		return err
	}
	if manifest, err = drift.OwnedManifest(manifest, rel.Name, rel.Namespace); err != nil {
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
func (c driftClient) report(drifts []drift.ObjectDrift) {
	u, ok := c.obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", statuscontract.FieldConditions)
	i := conditionIndex(conds, statuscontract.Drifted)
	if i < 0 && len(drifts) == 0 {
		return
	}
	want := map[string]any{"type": statuscontract.Drifted, "status": string(metav1.ConditionFalse), "reason": statuscontract.ReasonNoDrift,
		"message": "the release's objects are as its manifest renders them", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if len(drifts) > 0 {
		parts := make([]string, len(drifts))
		for j, d := range drifts {
			parts[j] = d.String()
		}
		sort.Strings(parts)
		want["status"], want["reason"] = string(metav1.ConditionTrue), statuscontract.ReasonDriftDetected
		want["message"] = refusal.Truncate("objects differ from the release's manifest, left as they are (drift mode report): "+
			strings.Join(parts, "; "), refusal.MaxConditionMessage)
		c.recorder.Event(c.obj, corev1.EventTypeWarning, statuscontract.ReasonDriftDetected, refusal.Truncate(want["message"].(string), refusal.MaxEventMessage))
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
	if err := unstructured.SetNestedSlice(u.Object, conds, "status", statuscontract.FieldConditions); err != nil {
		return
	}
	if err := c.status.Status().Update(c.ctx, u.DeepCopy()); err != nil {
		ctrl.Log.WithName("drift").Error(err, "reporting drift", "namespace", u.GetNamespace(), "name", u.GetName())
	}
}
