package pipeline

import (
	"errors"
	"slices"
	"strings"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
)

// hookCleanupFailed is the reason of the Warning Event on a CR whose uninstalled release's
// hooks could not all be deleted.
const hookCleanupFailed = "HookCleanupFailed"

// Helm does not count a hook's objects as the release's: one that no delete policy removes
// (a pre-install Job kept by before-hook-creation, Helm's default policy) outlives the
// release (https://helm.sh/docs/topics/charts_hooks/#hook-resources-are-not-managed-with-corresponding-releases).
// With `helm uninstall` a person sees them and cleans up; a tenant who deletes a CR expects
// everything of it gone, and a hook Job left in every namespace a CR passed through piles up.
// So once a CR's release is uninstalled, the objects of its last revision's hooks that are
// still there are deleted, through the release's confined Kubernetes client (only its
// namespace and the chart's declared cluster-scoped kinds).
func withHookCleanup(getter helmclient.ActionClientGetter, recorder record.EventRecorder) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(ac helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return hookCleanupClient{ActionInterface: ac, cr: cr, recorder: recorder}
	})
}

// hookCleanupClient is the hook cleanup layer (see pipeline.go).
type hookCleanupClient struct {
	helmclient.ActionInterface
	cr       client.Object
	recorder record.EventRecorder
}

func (c hookCleanupClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	rel, getErr := c.Get(name)
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if err != nil || getErr != nil || rel == nil {
		return resp, err
	}
	// A failed cleanup leaves the hooks as Helm would, and says so: the release is gone, so a
	// retry would not know them.
	if err := c.deleteHooks(rel); err != nil {
		c.recorder.Event(c.cr, corev1.EventTypeWarning, hookCleanupFailed,
			refusal.Truncate("deleting the objects of the uninstalled release's hooks: "+err.Error(), refusal.MaxEventMessage))
	}
	return resp, nil
}

// deleteHooks deletes the objects of rel's hooks that exist, but for helm test's, which Helm
// runs only on request and leaves for their logs.
func (c hookCleanupClient) deleteHooks(rel *release.Release) error {
	hooks := slices.DeleteFunc(slices.Clone(rel.Hooks), func(h *release.Hook) bool {
		return slices.Contains(h.Events, release.HookTest)
	})
	if len(hooks) == 0 {
		return nil
	}
	cfg := c.Config()
	if cfg == nil || cfg.KubeClient == nil {
		return errors.New("no Kubernetes client for the release")
	}
	var errs []error
	for _, h := range hooks {
		objs, err := cfg.KubeClient.Build(strings.NewReader(h.Manifest), false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, delErrs := cfg.KubeClient.Delete(objs); len(delErrs) > 0 {
			for _, e := range delErrs {
				if !apierrors.IsNotFound(e) {
					errs = append(errs, e)
				}
			}
		}
	}
	return errors.Join(errs...)
}
