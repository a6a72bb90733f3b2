package trustedconfig

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// releasesAnnotation, set on the key's Secret by an administrator, names releases
// (<namespace>/<release>, comma-separated) whose records the manager takes over, once, at its
// next start: the way back after a person's `helm upgrade`, `helm rollback` or other write
// to a release's records. Helm rewrites the operator's own records as it goes (the deployed
// revision becomes superseded), so that they fail verification, and the release can no
// longer be reconciled. Only who may update Secrets in the operator's namespace can set it:
// never a namespace editor. The manager removes it and records the outcome in
// releasesTakenOverAnnotation.
const (
	releasesAnnotation          = "warpdrive.transwarp.io/take-over-records-of"
	releasesTakenOverAnnotation = "warpdrive.transwarp.io/records-of-releases-taken-over"
)

// takeOverReleases signs with the current key, once, when an administrator asked for it
// (releasesAnnotation), the records of the releases named that no key the manager holds
// verifies: unsigned, changed, or of another key. Which of them a person wrote with the helm
// CLI and which a namespace editor forged cannot be told, so a record is taken over only by
// the rules of the take-over of an earlier version's records (mayTakeOver: it decodes, is
// stored under its own name, its CR exists, of a kind whose chart it names, its manifest
// and hooks are confined to the namespace and the chart's cluster-scoped kinds). Whatever a
// taken-over record says, the release operations stay confined.
func (t *Configs) takeOverReleases(ctx context.Context, keys releasesign.Keys, keySecret *corev1.Secret) error {
	asked, ok := keySecret.Annotations[releasesAnnotation]
	if !ok {
		return nil
	}
	log := ctrl.Log.WithName("release-takeover")
	// A mistyped name takes nothing over, and fails nothing else: every CR's reconcile waits
	// for the keys this runs under.
	named := map[types.NamespacedName]bool{}
	for _, r := range strings.Split(asked, ",") {
		ns, name, ok := strings.Cut(strings.TrimSpace(r), "/")
		if !ok || ns == "" || name == "" {
			log.Error(fmt.Errorf("%q is not <namespace>/<release>", r), "ignoring a release the key's Secret names for a take-over",
				"annotation", releasesAnnotation)
			continue
		}
		named[types.NamespacedName{Namespace: ns, Name: name}] = true
	}
	ofNamed := func(s *corev1.Secret) bool {
		return s.Type == "helm.sh/release.v1" && named[types.NamespacedName{Namespace: s.Namespace, Name: s.Labels["name"]}]
	}
	unverified := func(s *corev1.Secret) bool { return ofNamed(s) && keys.Verify(s.Namespace, s) != nil }
	signed, refused, err := t.takeOverRecords(ctx, ofNamed, unverified, keys.Sign,
		"not taking over release record of a release named for a take-over: it stays refused")
	if err != nil {
		return err
	}
	if err := t.answerTakeOver(ctx, keySecret, releasesAnnotation, releasesTakenOverAnnotation, signed, refused); err != nil {
		return fmt.Errorf("recording the take-over of the records of %s: %w", asked, err)
	}
	log.Info("took over the records of the releases the key's Secret named",
		"releases", asked, "signed", signed, "refused", refused)
	return nil
}
