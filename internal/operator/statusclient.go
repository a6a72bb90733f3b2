package operator

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/readiness"
)

// statusKeepingClient is the client the helm reconcilers use. It differs from the manager's
// client in one call: a status update of a CR becomes a server-side apply of the
// helm-operator's own part of the status, under the field manager warpdrive-helm.
//
// Why: the reconciler builds the status from its own struct and sends it with a full status
// update, which drops every field it does not know: the sidecar's replica counts and
// RolledOut condition, the manager's observedGeneration and Ready. An apply of just its own
// conditions (the conditions list is a map keyed by type) and deployedRelease leaves the
// others alone, needs no resourceVersion (so it cannot conflict with the other writers) and
// still sets or removes each field the reconciler manages.
type statusKeepingClient struct {
	client.Client
}

func (c statusKeepingClient) Status() client.SubResourceWriter {
	return statusKeepingWriter{SubResourceWriter: c.Client.Status()}
}

type statusKeepingWriter struct {
	client.SubResourceWriter
}

// Update applies the helm-operator's part of the status of an unstructured CR; other objects
// are updated as usual.
func (w statusKeepingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || len(opts) > 0 {
		return w.SubResourceWriter.Update(ctx, obj, opts...)
	}
	apply, err := helmStatusApply(u)
	if err != nil {
		return err
	}
	err = w.SubResourceWriter.Patch(ctx, apply, client.Apply,
		client.FieldOwner(readiness.HelmFieldManager), client.ForceOwnership)
	if err == nil {
		u.SetResourceVersion(apply.GetResourceVersion())
	}
	return err
}

// notHelmConditions are the condition types written by others: the manager's readiness
// controller and the sidecar (readiness.StatusOwners).
var notHelmConditions = readiness.ConditionsOwnedByOthers(readiness.HelmFieldManager)

// helmStatusApply is the apply configuration that makes the helm-operator's part of the CR's
// status equal to that of u: its conditions (every type but the others') and deployedRelease.
func helmStatusApply(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	status, _, err := unstructured.NestedMap(u.Object, "status")
	if err != nil {
		return nil, fmt.Errorf("status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	list, _ := status["conditions"].([]any)
	conds := make([]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && !notHelmConditions[fmt.Sprint(m["type"])] {
			conds = append(conds, m)
		}
	}
	boundMessages(conds)
	fields := map[string]any{"conditions": conds}
	for _, f := range readiness.HelmStatus.Fields { // deployedRelease
		if v, ok := status[f]; ok && v != nil {
			fields[f] = v
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(),
		"kind":       u.GetKind(),
		"metadata":   map[string]any{"name": u.GetName(), "namespace": u.GetNamespace()},
		"status":     fields,
	}}, nil
}

func boundMessages(conditions []any) {
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok {
			if msg, ok := m["message"].(string); ok {
				m["message"] = truncate(msg, maxConditionMessage)
			}
		}
	}
}
