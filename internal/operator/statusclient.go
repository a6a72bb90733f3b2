package operator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
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
//
// deployedRelease is applied as the release's name, revision and chart version: without the
// rendered manifest that helm-operator-plugins puts there, unless releaseManifest (the
// manager's --status-release-manifest) asks for it. The manifest copies every object of the
// release into the CR, Secrets included, where the CR's readers (a namespace viewer, who may
// not read Secrets) see it, and into every cache of the CR kind. The revision names the
// signed release record that holds it (releases.Manifests reads it from there).
type statusKeepingClient struct {
	client.Client
	// current reads the CR as last seen (the manager's cache): an apply that would change
	// nothing is not sent.
	current         client.Reader
	versions        *releases.Versions
	releaseManifest bool
}

// Get reads a CR as the manager's client does, except into a CR that it already holds with
// another UID: that CR is gone, and the one of the same name on the API server is a new one.
// Get then reports it not found and leaves obj as it was.
//
// Why: once helm-operator-plugins' reconciler has uninstalled a CR's release and removed its
// finalizer, it waits for the CR to go by getting it into the same object until "not found"
// (controllerutil.WaitForDeletion), and if that takes 30 s it returns an error and writes the
// status it had prepared into that object. A user who deletes a CR and applies it again at
// once would hold a worker for those 30 s and then see the new CR's status say Deployed, with
// the revision of the release just uninstalled, before its own install began. The reconciler's
// first read of a CR is into an empty object, which this leaves alone.
func (c statusKeepingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	held, ok := obj.(*unstructured.Unstructured)
	if !ok || held.GetUID() == "" {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	fresh := &unstructured.Unstructured{}
	fresh.SetGroupVersionKind(held.GroupVersionKind())
	if err := c.Client.Get(ctx, key, fresh, opts...); err != nil {
		return err
	}
	if fresh.GetUID() != held.GetUID() {
		gvk := held.GroupVersionKind()
		return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, key.Name)
	}
	held.Object = fresh.Object
	return nil
}

func (c statusKeepingClient) Status() client.SubResourceWriter {
	return statusKeepingWriter{SubResourceWriter: c.Client.Status(), c: c}
}

type statusKeepingWriter struct {
	client.SubResourceWriter
	c statusKeepingClient
}

// Update applies the helm-operator's part of the status of an unstructured CR; other objects
// are updated as usual.
func (w statusKeepingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || len(opts) > 0 {
		return w.SubResourceWriter.Update(ctx, obj, opts...)
	}
	if goneOnceUninstalled(u) {
		return nil
	}
	apply, err := helmStatusApply(u)
	if err != nil {
		return err
	}
	w.c.shapeDeployedRelease(apply)
	if w.c.unchanged(ctx, apply) {
		return nil
	}
	err = w.SubResourceWriter.Patch(ctx, apply, client.Apply,
		client.FieldOwner(statuscontract.HelmFieldManager), client.ForceOwnership)
	if err == nil {
		u.SetResourceVersion(apply.GetResourceVersion())
	}
	return err
}

// uninstallFinalizer is the finalizer by which helm-operator-plugins' reconciler uninstalls a
// CR's release before the CR goes.
const uninstallFinalizer = "uninstall-helm-release"

// goneOnceUninstalled reports whether u is the status the reconciler writes when it has
// uninstalled the release of a CR that is being deleted and that no finalizer but its own
// holds. The reconciler then removes that finalizer, and the API server deletes the CR, status
// and all: nobody would read the write. It is one of the dozen requests of each uninstall, all
// in a row, and a wave of deletions is bound by the API server's CPU (docs/bench/delete.md).
//
// If the finalizer's removal fails, the next reconcile uninstalls again (the release is gone:
// "not found") and comes back here; meanwhile the CR's deletionTimestamp already tells
// kstatus and `kubectl wait --for=delete` that it is going. A CR that another finalizer keeps,
// or whose uninstall failed, gets its status written.
func goneOnceUninstalled(u *unstructured.Unstructured) bool {
	if u.GetDeletionTimestamp() == nil {
		return false
	}
	if f := u.GetFinalizers(); len(f) != 1 || f[0] != uninstallFinalizer {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", statuscontract.FieldConditions)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == statuscontract.Deployed {
			return m["status"] == string(metav1.ConditionFalse) && m["reason"] == statuscontract.ReasonUninstallSuccessful
		}
	}
	return false
}

// notHelmConditions are the condition types written by others: the manager's readiness
// controller and the sidecar (statuscontract.StatusOwners).
var notHelmConditions = statuscontract.ConditionsOwnedByOthers(statuscontract.HelmFieldManager)

// helmStatusApply is the apply configuration that makes the helm-operator's part of the CR's
// status equal to that of u: its conditions (every type but the others') and deployedRelease.
func helmStatusApply(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	status, _, err := unstructured.NestedMap(u.Object, "status")
	if err != nil {
		return nil, fmt.Errorf("status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	list, _ := status[statuscontract.FieldConditions].([]any)
	conds := make([]any, 0, len(list))
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && !notHelmConditions[fmt.Sprint(m["type"])] {
			conds = append(conds, m)
		}
	}
	boundMessages(conds)
	fields := map[string]any{statuscontract.FieldConditions: conds}
	for _, f := range statuscontract.HelmStatus.Fields { // deployedRelease
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

// shapeDeployedRelease completes status.deployedRelease of an apply with the release's
// revision and chart version, when the manifest is the one the action clients last handed
// out for the release, and drops the manifest unless c keeps it.
func (c statusKeepingClient) shapeDeployedRelease(apply *unstructured.Unstructured) {
	rel, ok, _ := unstructured.NestedMap(apply.Object, "status", statuscontract.FieldDeployedRelease)
	if !ok {
		return
	}
	name, _ := rel[statuscontract.FieldDeployedReleaseName].(string)
	manifest, _ := rel[statuscontract.FieldDeployedReleaseManifest].(string)
	if c.versions != nil {
		if v, ok := c.versions.Lookup(apply.GetNamespace(), name, manifest); ok {
			rel[statuscontract.FieldDeployedReleaseRevision] = int64(v.Revision)
			if v.ChartVersion != "" {
				rel[statuscontract.FieldDeployedReleaseChartVersion] = v.ChartVersion
			}
		}
	}
	if !c.releaseManifest {
		delete(rel, statuscontract.FieldDeployedReleaseManifest)
	}
	_ = unstructured.SetNestedMap(apply.Object, rel, "status", statuscontract.FieldDeployedRelease)
}

// unchanged reports whether the CR, as c.current has it, already has the helm-operator's part
// of the status that apply sets. Without the manifest in the status, the reconciler finds
// deployedRelease different from its release at every visit and writes it again: that write
// would change nothing, and is skipped. A stale cache can only cause a write that was not
// needed: the apply is skipped only when the CR seen carries exactly these fields.
func (c statusKeepingClient) unchanged(ctx context.Context, apply *unstructured.Unstructured) bool {
	if c.current == nil {
		return false
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(apply.GroupVersionKind())
	if err := c.current.Get(ctx, client.ObjectKeyFromObject(apply), cur); err != nil {
		return false
	}
	p, err := helmPart(apply)
	if err != nil {
		return false
	}
	return statuscontract.HelmStatus.Holds(cur, p)
}

// helmPart is the status of apply (helmStatusApply) as the helm reconciler's part of the
// status contract.
func helmPart(apply *unstructured.Unstructured) (statuscontract.Part, error) {
	status, _ := apply.Object["status"].(map[string]any)
	p := statuscontract.Part{Fields: map[string]any{}}
	for _, f := range statuscontract.HelmStatus.Fields {
		if v, ok := status[f]; ok {
			p.Fields[f] = v
		}
	}
	list, _ := status[statuscontract.FieldConditions].([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		var cond metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond); err != nil {
			return p, err
		}
		p.Conditions = append(p.Conditions, cond)
	}
	return p, nil
}

func boundMessages(conditions []any) {
	for _, c := range conditions {
		if m, ok := c.(map[string]any); ok {
			if msg, ok := m["message"].(string); ok {
				m["message"] = refusal.Truncate(msg, refusal.MaxConditionMessage)
			}
		}
	}
}
