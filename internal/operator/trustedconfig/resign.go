package trustedconfig

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"transwarp.io/tos/warpdrive-operator/internal/releaserecords"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// resignLegacy re-signs in the current layout, once per process and before any record is read
// for Helm, each record this operator signed in a legacy layout (a MAC of the whole release,
// written by versions before the release digest): such a signature can only be checked on
// the record's data, so as long as it is accepted, a Secret a namespace editor labels as a
// record with a signature of that shape is read whole before it is refused. Once they are
// re-signed, keys refuse the legacy layouts on metadata (releasesign.Keys.RefuseLegacy).
//
// Candidates come from the manager's cache of records' metadata, and are read one at a time;
// one naming a key the operator does not hold cannot verify and is not read. A record that
// does not verify is left as it is: it was refused before and stays refused. The pass runs
// once per set of keys (resignedStateKey): Secrets a namespace editor shapes as legacy
// records are read at most then, not at every start, and a key restored from a backup
// re-signs the records it made.
func (t *Configs) resignLegacy(ctx context.Context, keys releasesign.Keys, keySecret *corev1.Secret) (releasesign.Keys, error) {
	if t.records == nil {
		return keys, nil
	}
	under := keyIDs(keys)
	done, err := t.recordedState(ctx, keySecret, resignedStateKey)
	if err != nil {
		return keys, err
	}
	if done == under {
		keys.RefuseLegacy = true
		return keys, nil
	}
	candidates, err := t.cachedRecords(ctx)
	if err != nil {
		return keys, fmt.Errorf("listing release records to re-sign: %w", err)
	}
	resigned := 0
	for i := range candidates {
		c := &candidates[i]
		if !errors.Is(keys.VerifyMetadata(c.Namespace, c), releasesign.ErrNeedsData) {
			continue
		}
		if id := releasesign.SignatureKeyID(c); id != "" && !keys.Holds(id) {
			continue
		}
		s, err := t.secrets.CoreV1().Secrets(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return keys, fmt.Errorf("reading release record %s/%s to re-sign: %w", c.Namespace, c.Name, err)
		}
		if keys.Verify(s.Namespace, s) != nil {
			continue
		}
		keys.Sign(s.Namespace, s)
		_, err = t.secrets.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		switch {
		case err == nil:
			resigned++
		case apierrors.IsNotFound(err), refusedForGood(err):
			// Gone, or too large to take the digest: the record stays in the legacy layout
			// and is refused from now on, as a record the API server would not store signed.
		default:
			return keys, fmt.Errorf("re-signing release record %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	if resigned > 0 {
		ctrl.Log.WithName("release-signing").Info("re-signed release records of an earlier version in the current layout",
			"records", resigned)
	}
	if err := t.recordState(ctx, keySecret, resignedStateKey, under); err != nil {
		return keys, err
	}
	keys.RefuseLegacy = true
	return keys, nil
}

// resignedStateKey records, in the records' state ConfigMap, the keys under which the legacy
// records were last re-signed (keyIDs).
const resignedStateKey = "legacy-records-resigned-under"

// keyIDs are the ids of keys, sorted and joined.
func keyIDs(keys releasesign.Keys) string {
	var ids []string
	for _, k := range keys.All() {
		ids = append(ids, k.ID())
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// recordSecrets is the Secrets client of namespace ns under the signed storage: it reads a
// release's records by name where that costs the API server less, and reads whole only
// records whose signature holds on their metadata, reporting the others to refuse.
func (t *Configs) recordSecrets(ns string, keys releasesign.Keys, refuse releasesign.RefusalFunc) corev1client.SecretInterface {
	var records corev1client.SecretInterface = t.secrets.CoreV1().Secrets(ns)
	if t.records == nil {
		return records
	}
	c := releaserecords.New(records, t.records, t.census, ns)
	if t.metaSecrets == nil {
		return c
	}
	return c.MetadataFirst(t.metaSecrets.Namespace(ns), func(m metav1.Object) releaserecords.Verdict {
		switch err := keys.VerifyMetadata(ns, m); {
		case err == nil:
			return releaserecords.Vouched
		case errors.Is(err, releasesign.ErrNeedsData):
			return releaserecords.Read
		default:
			refuse(m.GetName(), err)
			return releaserecords.Skip
		}
	})
}
