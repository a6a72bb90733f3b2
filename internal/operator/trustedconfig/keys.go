package trustedconfig

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// refusedRecords counts the release records the signed storage refused, once per record and
// reconcile, by releasesign.Reason: "other_key" is what every record looks like once the
// signing key was lost or replaced (docs/security.md, "Key lifecycle: rotation, loss,
// restore"), and what a namespace editor's record naming a made-up key looks like; the Events
// on the CRs name the Secrets.
var refusedRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "warpdrive_release_records_refused_total",
	Help: "Release records the operator refused, once per record and reconcile, by reason: unsigned, changed " +
		"(a key the operator holds does not verify it), other_key (signed by a key the operator does not hold: " +
		"a lost or rotated-out signing key), no_key_id (a signature without key id that no key verifies).",
}, []string{"reason"})

// keyMissing is 1 while the manager refuses to create a signing key in place of a missing
// one (mayCreateKey), 0 otherwise.
var keyMissing = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "warpdrive_release_signing_key_missing",
	Help: "1 while the release signing key's Secret is missing where the operator signed release records before: " +
		"no key is created and no release is reconciled until the Secret is restored, or created by an " +
		"administrator (docs/security.md, 'Key lifecycle: rotation, loss, restore').",
})

func init() {
	metrics.Registry.MustRegister(refusedRecords, keyMissing)
}

// KeyMissingError: the key's Secret is missing where the operator signed records before, and
// the manager does not create a key in its place, whose first use would refuse every one of
// those records (and, later restored, the old key would refuse the records the new one made
// meanwhile). Every reconcile fails with it until the Secret is there again.
type KeyMissingError struct {
	Secret  string // namespace/name
	Records int    // records signed by keys the operator no longer holds
	KeyIDs  string // some of their key ids
}

func (e *KeyMissingError) Error() string {
	ids := ""
	if e.KeyIDs != "" {
		ids = " (key ids " + e.KeyIDs + ")"
	}
	return fmt.Sprintf("the release signing key's Secret %s is missing, and %d release records are signed by keys "+
		"this operator used before%s: no new key is created, which would refuse them all; restore the Secret from a "+
		"backup, or, if the key is lost for good, create the Secret with a new key and the annotation %s=true to take "+
		"the records over (see %s)", e.Secret, e.Records, ids, otherKeysAnnotation, releasesign.KeyDocs)
}

// mayCreateKey says whether the manager may create a signing key, its Secret being missing:
// not where it has used a key before (the records' state ConfigMap beside the key exists: only
// the manager and administrators write the operator's namespace) and release records signed
// by a key are in the cache. A namespace editor can label Secrets as signed records, so
// records alone do not stop the first key of a cluster; and where both the key and its state
// are gone (the operator's namespace recreated) the key is created, and reportKeys says so.
func (t *Configs) mayCreateKey(ctx context.Context) error {
	_, err := t.secrets.CoreV1().ConfigMaps(t.keySecret.Namespace).Get(ctx, t.keySecret.Name+StateSuffix, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the state of the release records: %w", err)
	}
	c, err := t.keyCensus(ctx, releasesign.Keys{})
	if err != nil {
		return err
	}
	signed := c.otherTotal + c.noID
	for _, n := range c.held {
		signed += n
	}
	if signed == 0 {
		return nil
	}
	missing := &KeyMissingError{Secret: t.keySecret.String(), Records: signed, KeyIDs: c.otherIDs()}
	keyMissing.Set(1)
	if !t.keyMissingLogged {
		t.keyMissingLogged = true
		ctrl.Log.WithName("release-signing-key").Error(missing, "refusing to create a release signing key",
			"secret", missing.Secret, "records", signed, "namespaces", len(c.otherNS))
	}
	return missing
}

// otherKeysAnnotation, set on the key's Secret by an administrator, asks the manager to take
// over, once, at its next start, the records signed by keys it does not hold: the way back
// after a key lost for good. Only who may update Secrets in the operator's namespace can set
// it: never a namespace editor. The manager removes it and records the outcome in
// otherKeysTakenOverAnnotation.
const (
	otherKeysAnnotation          = "warpdrive.transwarp.io/take-over-records-of-other-keys"
	otherKeysTakenOverAnnotation = "warpdrive.transwarp.io/records-of-other-keys-taken-over"
)

// maxIDsLogged bounds the key ids a log line names: anyone who writes a record writes its
// key id.
const maxIDsLogged = 5

// keyCensus is what the manager's cache says of the signed records, by the key their
// signatures name (the cache holds their metadata, so this reads no record's data).
type keyCensus struct {
	held       map[string]int // by key id, for the keys of the Secret
	other      map[string]int // by key id, at most maxIDsLogged ids
	otherTotal int
	otherNS    map[string]bool
	noID       int // signatures without key id: which key made them takes their data to tell
}

func (t *Configs) keyCensus(ctx context.Context, keys releasesign.Keys) (*keyCensus, error) {
	list, err := t.cachedRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing release records: %w", err)
	}
	c := &keyCensus{held: map[string]int{}, other: map[string]int{}, otherNS: map[string]bool{}}
	for i := range list {
		s := &list[i]
		if _, signed := s.Annotations[releasesign.SignatureAnnotation]; !signed {
			continue
		}
		switch id := releasesign.SignatureKeyID(s); {
		case id == "":
			c.noID++
		case keys.Holds(id):
			c.held[id]++
		default:
			c.otherTotal++
			c.otherNS[s.Namespace] = true
			if _, ok := c.other[id]; ok || len(c.other) < maxIDsLogged {
				c.other[id]++
			}
		}
	}
	return c, nil
}

func (c *keyCensus) otherIDs() string {
	ids := make([]string, 0, len(c.other))
	for id := range c.other {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if c.otherTotal > 0 && len(ids) == maxIDsLogged {
		ids = append(ids, "…")
	}
	return strings.Join(ids, ", ")
}

// errKeyLost is what the log says when the manager creates a key where records signed by an
// earlier one exist.
var errKeyLost = errors.New("the release signing key was lost: a new one was created")

// reportKeys logs the keys loaded and what the records say of them. A key created where
// records are signed (mayCreateKey let it: the records' state was gone with the key, as when
// the operator's namespace is recreated) is an Error: every such record is refused from now
// on, so no release that has one is reconciled until the key is restored (or, lost for good,
// its records are taken over: otherKeysAnnotation). So are records naming keys it does not
// hold.
func (t *Configs) reportKeys(ctx context.Context, keys releasesign.Keys, created bool) error {
	log := ctrl.Log.WithName("release-signing-key")
	c, err := t.keyCensus(ctx, keys)
	if err != nil {
		return err
	}
	current, previous := keys.IDs()
	secret := t.keySecret.String()
	switch {
	case created && (c.otherTotal > 0 || c.noID > 0):
		log.Error(errKeyLost, "the release signing key's Secret was missing, so the manager created a new key; "+
			"the release records signed before are refused from now on, and their CRs fail ('release: already exists') "+
			"until the key is restored: restore the Secret from a backup and restart the manager, or see "+releasesign.KeyDocs,
			"secret", secret, "newKeyID", current, "recordsOfOtherKeys", c.otherTotal, "otherKeyIDs", c.otherIDs(),
			"namespaces", len(c.otherNS), "recordsWithoutKeyID", c.noID)
	case created:
		log.Info("created the release signing key: back its Secret up (docs/deploying.md)", "secret", secret, "keyID", current)
	default:
		log.Info("loaded the release signing keys", "secret", secret, "keyID", current, "previousKeyIDs", previous,
			"recordsByKeyID", c.held, "recordsWithoutKeyID", c.noID)
	}
	if !created && c.otherTotal > 0 {
		log.Error(errors.New("release records signed by keys this operator does not hold"),
			"these records are refused: if the key that signed them was lost or replaced, restore it from a backup "+
				"(as the current or a previous- key), or see "+releasesign.KeyDocs+"; a namespace editor's record naming a "+
				"made-up key looks the same, and the Events of the CRs name the Secrets",
			"secret", secret, "records", c.otherTotal, "otherKeyIDs", c.otherIDs(), "namespaces", len(c.otherNS))
	}
	return nil
}

// takeOverOtherKeys signs with the current key, once, when an administrator asked for it
// (otherKeysAnnotation), the records signed by keys the manager does not hold: after a key was
// lost for good, the way to re-adopt the existing releases.
//
// Which of them the operator wrote cannot be proven: a namespace editor may have written one
// naming a made-up key. So a record is taken over only by the rules of the take-over of an
// earlier version's unsigned records (mayTakeOver: it decodes, is stored under its own name,
// its CR exists, of a kind whose chart it names, its manifest and hooks are confined to the
// namespace and the chart's cluster-scoped kinds), and only one whose signature names a key
// not held, or has no key id and verifies under no key: a record naming a key the manager
// holds that fails was changed, and an unsigned one was never signed by the operator; both
// stay refused. Whatever a taken-over record says, the release operations stay confined.
func (t *Configs) takeOverOtherKeys(ctx context.Context, keys releasesign.Keys, keySecret *corev1.Secret) error {
	if _, asked := keySecret.Annotations[otherKeysAnnotation]; !asked {
		return nil
	}
	// Only a record whose signature names a key not held, or that has no key id and verifies
	// under no key: one that fails under a key the manager holds was changed.
	ofLostKey := func(s *corev1.Secret) bool {
		if !ofOtherKey(s, keys) {
			return false
		}
		err := keys.Verify(s.Namespace, s)
		return errors.Is(err, releasesign.ErrUnknownKey) || errors.Is(err, releasesign.ErrNoKeyVerifies)
	}
	isOfOtherKey := func(s *corev1.Secret) bool { return ofOtherKey(s, keys) }
	signed, refused, err := t.takeOverRecords(ctx, isOfOtherKey, ofLostKey, keys.Sign,
		"not taking over release record of another key: it stays refused")
	if err != nil {
		return err
	}
	if err := t.answerTakeOver(ctx, keySecret, otherKeysAnnotation, otherKeysTakenOverAnnotation, signed, refused); err != nil {
		return fmt.Errorf("recording the take-over of records of other keys: %w", err)
	}
	ctrl.Log.WithName("release-takeover").Info("took over the release records of other keys, as the key's Secret asked",
		"signed", signed, "refused", refused)
	return nil
}

// answerTakeOver answers, once, an administrator's request for a take-over (the annotation
// request of the key's Secret): it reads the Secret again (an earlier take-over may have
// annotated it since it was loaded), drops the request and records the outcome in the
// annotation outcome.
func (t *Configs) answerTakeOver(ctx context.Context, keySecret *corev1.Secret, request, outcome string, signed, refused int) error {
	fresh, err := t.secrets.CoreV1().Secrets(keySecret.Namespace).Get(ctx, keySecret.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	delete(fresh.Annotations, request)
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	fresh.Annotations[outcome] = fmt.Sprintf("%s: %d signed, %d refused", time.Now().UTC().Format(time.RFC3339), signed, refused)
	_, err = t.secrets.CoreV1().Secrets(fresh.Namespace).Update(ctx, fresh, metav1.UpdateOptions{})
	return err
}

// ofOtherKey reports whether s, by its metadata, is a Helm record whose signature names a key
// not in keys or names none (a signature without key id may be of any key: Verify tells).
func ofOtherKey(s *corev1.Secret, keys releasesign.Keys) bool {
	if _, signed := s.Annotations[releasesign.SignatureAnnotation]; !signed || s.Type != "helm.sh/release.v1" {
		return false
	}
	id := releasesign.SignatureKeyID(s)
	return id == "" || !keys.Holds(id)
}
