package operator

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// helmStatusFields are the status fields the helm-operator's reconciler owns. Everything else
// in a CR's status belongs to someone else (the sidecar's replica counts).
var helmStatusFields = []string{"conditions", "deployedRelease"}

// statusKeepingClient is the client the helm reconcilers use. It differs from the manager's
// client in one call: a status update of a CR becomes a JSON merge patch of the
// helm-operator's own fields.
//
// Why: the reconciler builds the status from its own struct and sends it with a full status
// update, which drops every field it does not know. The sidecar's status.availableReplicas
// vanished at every install, upgrade and failure, until the sidecar wrote it again. A merge
// patch of just these fields leaves the others alone, needs no resourceVersion (so it cannot
// conflict with the sidecar's patches) and still sets or clears each field the reconciler
// manages.
type statusKeepingClient struct {
	client.Client
}

func (c statusKeepingClient) Status() client.SubResourceWriter {
	return statusKeepingWriter{SubResourceWriter: c.Client.Status(), client: c.Client}
}

type statusKeepingWriter struct {
	client.SubResourceWriter
	client client.Client
}

// Update patches the helm-operator's status fields of an unstructured CR; other objects are
// updated as usual.
func (w statusKeepingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || len(opts) > 0 {
		return w.SubResourceWriter.Update(ctx, obj, opts...)
	}
	patch, err := helmStatusPatch(u)
	if err != nil {
		return err
	}
	return w.SubResourceWriter.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
}

// helmStatusPatch is the merge patch that makes the helm-operator's fields of the CR's status
// equal to those of u: each field set to u's value, or removed (null) where u has none.
func helmStatusPatch(u *unstructured.Unstructured) ([]byte, error) {
	status, _, err := unstructured.NestedMap(u.Object, "status")
	if err != nil {
		return nil, fmt.Errorf("status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	fields := make(map[string]any, len(helmStatusFields))
	for _, f := range helmStatusFields {
		fields[f] = status[f] // nil where absent: JSON null removes the field
	}
	boundMessages(fields["conditions"])
	return json.Marshal(map[string]any{"status": fields})
}

// maxConditionMessage bounds the message of each condition, as Kubernetes bounds those of
// metav1.Condition. Helm's errors quote the values they refuse: a spec with a 1 MiB label
// value failed with a 1 MiB message, the status patch was then too large to store, and the
// CR showed no status at all.
const maxConditionMessage = 32768

func boundMessages(conditions any) {
	list, _ := conditions.([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			if msg, ok := m["message"].(string); ok {
				m["message"] = truncate(msg, maxConditionMessage)
			}
		}
	}
}
