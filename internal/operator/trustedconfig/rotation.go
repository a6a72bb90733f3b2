package trustedconfig

import (
	"context"
	"encoding/json"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// recordsOfPreviousKeys is how many release records each previous key of the key Secret
// still signs, after the last pass of the re-signing (resignPrevious): 0 says the key can be
// dropped from the Secret. Its label values are ids of the administrator's keys, never an id
// a record names.
var recordsOfPreviousKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "warpdrive_release_records_of_previous_key",
	Help: "Release records whose signature a previous key of the key Secret still makes, by key id, after the " +
		"manager's last pass re-signing them with the current key: 0 means the previous key signs no record " +
		"and can be dropped from the Secret (docs/security.md, 'Key lifecycle: rotation, loss, restore').",
}, []string{"key_id"})

func init() {
	metrics.Registry.MustRegister(recordsOfPreviousKeys)
}

// The pace of the re-signing of records of previous keys: one record at a time, resignPace
// apart, so that a rotation on a cluster of thousands of releases costs the API server a
// trickle of small writes; a pass that left records (one Helm was writing meanwhile) is
// followed by another after resignRetry.
var (
	resignPace  = 50 * time.Millisecond
	resignRetry = time.Minute
)

// resignPrevious re-signs with the current key, in the background, the release records whose
// signature a previous key makes, so that the previous key can be retired; and says when no
// record needs it any more (a log line naming the key's field, and recordsOfPreviousKeys).
// A record is otherwise re-signed only when Helm next writes it, and a release nobody edits
// would keep its records on the previous key for ever.
//
// It is confined as the re-signing of legacy records is (resignLegacy): candidates come from
// the manager's cache of the records' metadata, a record is re-signed only if its signature
// holds on that metadata under a previous key, and from the metadata alone (Keys.Resign): no
// record is read whole, and the digest the new signature signs is the one the previous key
// signed, still checked against the data at every read. A record that does not verify stays
// as it is, refused. Each record is patched with the version the cache saw as a
// precondition: one Helm rewrote since (signed with the current key) is left to it.
//
// It runs on the leader (a manager.Runnable that needs leader election), once the first
// reconcile has loaded the keys, and ends when no record of a previous key is left.
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=patch
func (t *Configs) resignPrevious(ctx context.Context) error {
	select {
	case <-t.loaded:
	case <-ctx.Done():
		return nil
	}
	t.mu.Lock()
	keys, fields := t.key, t.previousFields
	t.mu.Unlock()
	if len(keys.Previous) == 0 {
		return nil
	}
	log := ctrl.Log.WithName("release-signing")
	reported := map[string]bool{}
	for {
		left, resigned, err := t.resignPreviousPass(ctx, keys)
		if err != nil {
			log.Error(err, "re-signing the release records of previous keys")
		}
		if ctx.Err() != nil {
			return nil
		}
		if resigned > 0 {
			log.Info("re-signed release records of previous keys with the current key", "records", resigned)
		}
		for _, k := range keys.Previous {
			id := k.ID()
			recordsOfPreviousKeys.WithLabelValues(id).Set(float64(left[id]))
			if left[id] == 0 && err == nil && !reported[id] {
				reported[id] = true
				log.Info("no release record is signed by a previous key any more: drop its field from the key Secret "+
					"(see "+releasesign.KeyDocs+")", "secret", t.keySecret.String(), "field", fields[id], "keyID", id)
			}
		}
		if len(reported) == len(keys.Previous) {
			return nil
		}
		select {
		case <-time.After(resignRetry):
		case <-ctx.Done():
			return nil
		}
	}
}

// resignPreviousPass re-signs, one at a time, the records of the cache whose signature holds
// under a previous key; left counts, by previous key, those it could not re-sign.
func (t *Configs) resignPreviousPass(ctx context.Context, keys releasesign.Keys) (left map[string]int, resigned int, err error) {
	left = map[string]int{}
	candidates, err := t.cachedRecords(ctx)
	if err != nil {
		return left, 0, err
	}
	for i := range candidates {
		c := &candidates[i]
		id := releasesign.SignatureKeyID(c)
		if id == "" || id == keys.Current.ID() || !keys.Holds(id) {
			continue
		}
		sig, verr := keys.Resign(c.Namespace, c)
		if verr != nil {
			continue // refused at every read: nothing relies on the previous key for it
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": c.ResourceVersion,
			"annotations": map[string]string{releasesign.SignatureAnnotation: sig}}})
		_, perr := t.secrets.CoreV1().Secrets(c.Namespace).Patch(ctx, c.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		switch {
		case perr == nil:
			resigned++
		case apierrors.IsNotFound(perr):
			// Gone: nothing to re-sign.
		case apierrors.IsConflict(perr):
			left[id]++ // changed since the cache saw it: the next pass looks again
		default:
			left[id]++
			err = perr
		}
		select {
		case <-time.After(resignPace):
		case <-ctx.Done():
			return left, resigned, err
		}
	}
	return left, resigned, err
}
