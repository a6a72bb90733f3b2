package releaseguard

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/postrender"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/manifest"
	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// ownershipProof is the release guard's post-renderer: it refuses a render that names an
// object which exists and which nothing proves the release's own.
//
// Why: Helm adopts an existing object into a release by its annotations alone
// (meta.helm.sh/release-name and -namespace, and the label managed-by=Helm): at a release's
// first install, and at an upgrade for each object the release did not have. The release is
// named after the CR, a name anyone who may create the CR chooses. A CR named after a release
// that the helm CLI, Flux or Argo CD installed, and whose records are gone (uninstalled with
// helm.sh/resource-policy: keep, or deleted), would take over that release's objects, and
// delete them with the CR. What proves an object the release's is what only the operator
// writes: a namespaced object's owner reference to the CR, by UID (helm-operator-plugins'
// post-renderer sets it, and a CR deleted and made again has another UID); a cluster-scoped
// object's owner annotations naming the CR (ownership.OwnedBy), which only those who may
// write that cluster-scoped object could forge; and Helm's annotations naming the release
// where they name the operator's (byAnnotations).
//
// It runs as the render's last step, before Helm writes a record or touches an object: a
// refused install leaves no record, so helm-operator-plugins' uninstall of a failed install
// finds nothing to delete; refused at Helm's apply, that uninstall would delete the very
// objects the check protects.
type ownershipProof struct {
	postrender.PostRenderer // the post-renderers before, or nil
	live                    client.Reader
	cr                      client.Object
	step                    string // "install" or "upgrade", for the message
	// byAnnotations says that Helm's annotations naming the release prove an object its own
	// (guardedClient.adoptsByAnnotations): the CR's status proves the operator deployed the
	// release, and a person's `helm upgrade` over it, rendered without helm-operator-plugins'
	// post-renderer, removed the owner references; or the CR existed when the operator first
	// ran in the cluster (restored from a backup without the records and the key).
	byAnnotations bool
	// known returns the objects the release has already (its last record's), which Helm
	// updates rather than adopts; nil for an install.
	known func() ([]manifest.Head, error)
}

// Run renders through the post-renderers before, then checks each object the release would
// adopt.
func (p ownershipProof) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	out := in
	if p.PostRenderer != nil {
		var err error
		if out, err = p.PostRenderer.Run(in); err != nil {
			return nil, err
		}
	}
	heads, err := manifest.Heads(out.String())
	if err != nil {
		return out, nil // Helm refuses a manifest it cannot read, and says why
	}
	has := map[headKey]bool{}
	if p.known != nil {
		known, err := p.known()
		if err != nil {
			return nil, fmt.Errorf("reading the objects release %s has: %w", p.cr.GetName(), err)
		}
		for _, h := range known {
			has[p.keyOf(h)] = true
		}
	}
	var unproven []string
	for _, h := range heads {
		if has[p.keyOf(h)] {
			continue
		}
		proven, named, err := p.proven(h)
		if err != nil {
			return nil, err
		}
		if !proven {
			unproven = append(unproven, named)
		}
	}
	if len(unproven) == 0 {
		return out, nil
	}
	return nil, refusal.Refuse(statuscontract.Failure{Reason: statuscontract.ReasonObjectNotOwned, Step: p.step, Message: fmt.Sprintf(
		"%s exist(s) and nothing proves them this release's (an owner reference to %s %s/%s): another tool or "+
			"person made them, and Helm would take them over by their annotations alone; the operator does not. "+
			"Delete them, or give this resource another name", listed(unproven, 3),
		p.cr.GetObjectKind().GroupVersionKind().Kind, p.cr.GetNamespace(), p.cr.GetName())})
}

// headKey names an object across API versions: a chart may move a kind to a newer version.
type headKey struct {
	kind schema.GroupKind
	key  client.ObjectKey
}

// keyOf is h's key, in the CR's namespace where the template left the namespace out.
func (p ownershipProof) keyOf(h manifest.Head) headKey {
	ns := h.Namespace
	if ns == "" {
		ns = p.cr.GetNamespace()
	}
	return headKey{kind: h.GVK.GroupKind(), key: client.ObjectKey{Namespace: ns, Name: h.Name}}
}

// proven reports whether the object h names is absent (the release creates it) or proven the
// release's own; named names the object found, for a message.
func (p ownershipProof) proven(h manifest.Head) (ok bool, named string, err error) {
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(h.GVK)
	// The reader scopes the key: a cluster-scoped object's namespace is dropped.
	err = p.live.Get(context.Background(), p.keyOf(h).key, live)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return true, "", nil // to be created; a kind the server does not serve is Helm's to report
	case err != nil:
		return false, "", fmt.Errorf("reading %s %s before the %s: %w", h.GVK.Kind, h.Name, p.step, err)
	case !p.namesRelease(live.GetAnnotations()):
		// Helm adopts only an object whose annotations give it to this release; this one it
		// refuses itself, naming the release it belongs to.
		return true, "", nil
	case p.byAnnotations:
		return true, "", nil
	case live.GetNamespace() == "":
		return ownership.OwnedBy(live.GetAnnotations(), p.cr), h.GVK.Kind + " " + live.GetName(), nil
	}
	named = fmt.Sprintf("%s %s/%s", h.GVK.Kind, live.GetNamespace(), live.GetName())
	for _, ref := range live.GetOwnerReferences() {
		if ref.UID == p.cr.GetUID() {
			return true, named, nil
		}
	}
	return false, named, nil
}

// namesRelease reports whether Helm's annotations name the CR's release (named after it, in
// its namespace).
func (p ownershipProof) namesRelease(annotations map[string]string) bool {
	return annotations[ownership.HelmReleaseNameAnnotation] == p.cr.GetName() &&
		annotations[ownership.HelmReleaseNamespaceAnnotation] == p.cr.GetNamespace()
}

// listed joins the first n of items, saying how many more there are.
func listed(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}
