package storagemigration

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pageSize bounds each list of the pass, so that a kind of 10,000 objects is not one answer.
const pageSize = 500

// rewrite updates each object of gvk's kind as it is listed, so that the API server stores it
// at the storage version, and returns how many it rewrote.
func (m *Migrator) rewrite(ctx context.Context, gvk schema.GroupVersionKind) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := m.Reader.List(ctx, list, client.Limit(pageSize)); err != nil {
		return 0, err
	}
	left := int(ptrOr(list.GetRemainingItemCount(), 0)) + len(list.Items)
	remaining.WithLabelValues(gvk.Kind).Set(float64(left))
	rewritten := 0
	for {
		for i := range list.Items {
			switch err := m.Client.Update(ctx, &list.Items[i]); {
			case err == nil:
				rewritten++
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				// Written since it was listed (stored at the new version, the edit kept), or gone.
			default:
				return rewritten, fmt.Errorf("rewriting %s %s/%s: %w", gvk.Kind, list.Items[i].GetNamespace(), list.Items[i].GetName(), err)
			}
			left--
			remaining.WithLabelValues(gvk.Kind).Set(float64(left))
		}
		next := list.GetContinue()
		if next == "" {
			return rewritten, nil
		}
		list = &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := m.Reader.List(ctx, list, client.Limit(pageSize), client.Continue(next)); err != nil {
			return rewritten, err
		}
	}
}

func ptrOr(p *int64, or int64) int64 {
	if p == nil {
		return or
	}
	return *p
}
