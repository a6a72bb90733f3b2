// Package releasesign makes Helm's release records trustworthy when they live where a
// namespace editor can write: in the release's own namespace, as Secrets of type
// helm.sh/release.v1.
//
// Helm acts on whatever its storage returns: a record's manifest says which objects an
// upgrade or uninstall deletes, its hooks are applied as they are. A namespace editor may
// create Secrets in their namespace, so without this package they could forge a record that
// makes the operator, with its cluster-wide rights, delete or create objects anywhere.
//
// Every record the operator writes is signed: an HMAC-SHA256, under a key only the operator
// can read, of the Secret's namespace, name, type, Helm's labels and the SHA-256 of the
// encoded release. The signature and the digest are annotations of the Secret, so the record
// stays an ordinary Helm record that the helm CLI reads, and its signature is checked on its
// metadata alone: a Secret that a namespace editor labelled as a record is refused before its
// data, up to 1 MiB, is ever read (VerifyMetadata). Records whose signature is missing or
// wrong are hidden from Helm: a Get finds nothing, a List leaves them out, and the caller is
// told which were refused.
package releasesign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SignatureAnnotation holds a record's signature: "<key id>.<MAC>" since key ids, a bare MAC
// before (see Keys.Verify).
const SignatureAnnotation = "warpdrive.transwarp.io/release-signature"

// DigestAnnotation holds the SHA-256 of a record's encoded release (base64url), which its
// signature signs in place of the release itself: the signature is then checked on the
// record's metadata, and the digest on its data once the signature holds.
const DigestAnnotation = "warpdrive.transwarp.io/release-digest"

// signatureVersion prefixes the signed bytes, so that a change of what is signed can never
// make an old signature valid for a new layout. v1 is the layout of signatures without a key
// id; v2 adds the key id to what is signed; v3, the layout written now, signs the release's
// digest instead of the release. v1 and v2 are the legacy layouts: they are verified only
// until the operator has re-signed its records in v3 (Keys.RefuseLegacy).
const (
	signatureVersion   = "warpdrive.transwarp.io/release-signature/v1"
	signatureVersionV2 = "warpdrive.transwarp.io/release-signature/v2"
	signatureVersionV3 = "warpdrive.transwarp.io/release-signature/v3"
)

// RecordType is the type of Helm's release records, which the signature covers.
const RecordType corev1.SecretType = "helm.sh/release.v1"

// helmLabels are the labels Helm queries records by (name, status) and derives from the
// record (owner, version): a record with a signed body but a relabelled status would
// otherwise be found as "deployed" while it says "superseded".
var helmLabels = []string{"owner", "name", "status", "version"}

// MinKeySize is the shortest key accepted: an HMAC-SHA256 key of 32 bytes.
const MinKeySize = 32

// KeyDocs is where people read what to do about a record signed by a key the operator does not
// hold: docs/security.md's section on the key's lifecycle.
const KeyDocs = "docs/security.md#key-lifecycle-rotation-loss-restore"

// Key signs and verifies release records.
type Key []byte

// keyIDLen is how many hex digits of a key's SHA-256 its id is.
const keyIDLen = 12

// ID names the key in the signatures it makes: the first 12 hex digits of the SHA-256 of the
// key, which an administrator computes with
// `base64 -d | sha256sum | cut -c1-12` from the Secret's field. It tells a record signed by a
// key the operator does not hold (one that was lost, or rotated out) from one that changed.
// It reveals nothing usable about the key: a namespace editor who reads a record already
// holds a MAC under it, which is as good a test of a guessed key as 48 bits of its hash.
func (k Key) ID() string {
	sum := sha256.Sum256(k)
	return hex.EncodeToString(sum[:])[:keyIDLen]
}

// Derive is a key for another purpose than signing records, made from k: another holder of
// it learns nothing of k, and the same k and purpose give the same key on every replica
// and after a restart.
func (k Key) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte("warpdrive.transwarp.io/derived-key/" + purpose))
	return m.Sum(nil)
}

// validKeyID reports whether id has the shape of a key id: only then is it repeated in a
// refusal (it is written by whoever wrote the record, and ends up in Events and logs).
func validKeyID(id string) bool {
	if len(id) != keyIDLen {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Refusals: why a record was refused. ErrChanged and ErrNoKeyVerifies are ErrBadSignature;
// an *UnknownKeyError is ErrUnknownKey.
var (
	ErrUnsigned     = errors.New("not signed by this operator")
	ErrBadSignature = errors.New("signature does not match its content (changed after the operator wrote it, or signed with another key)")
	// ErrChanged: the record names a key the operator holds, and does not verify under it.
	ErrChanged error = &badSignature{"signature does not match its content: the record changed after the operator wrote it"}
	// ErrNoKeyVerifies: a signature without a key id (written before key ids) that no key the
	// operator holds verifies. A changed record and one signed by a lost key look the same.
	ErrNoKeyVerifies error = &badSignature{"signature without key id (written before key ids) that no key of this " +
		"operator verifies: the record changed after the operator wrote it, or was signed by a key this operator no " +
		"longer holds; if the signing key was lost or replaced, restore it from a backup, or see " + KeyDocs}
	ErrUnknownKey = errors.New("signed by a key this operator does not hold")
	// ErrLegacyLayout: a signature in a layout of an earlier version (v1 or v2) once the
	// operator has re-signed every record it wrote in the current one: not its own.
	ErrLegacyLayout error = &badSignature{"signature in the layout of an earlier version, whose records this " +
		"operator has re-signed: the record was not written by it"}
	// ErrNeedsData: VerifyMetadata cannot decide on a signature of a legacy layout, which
	// signs the release itself; Verify decides on the whole Secret.
	ErrNeedsData = errors.New("a legacy signature is checked on the record's data")
)

// badSignature is a more precise ErrBadSignature.
type badSignature struct{ msg string }

func (e *badSignature) Error() string        { return e.msg }
func (e *badSignature) Is(target error) bool { return target == ErrBadSignature }

// UnknownKeyError: the record's signature names a key the operator does not hold. That is
// what every record looks like after the key was lost or replaced, and what a namespace
// editor's record with a made-up key id looks like: either way it is refused.
type UnknownKeyError struct{ ID string }

func (e *UnknownKeyError) Error() string {
	return fmt.Sprintf("signed by another key (id %s), which this operator does not hold: restore the signing key "+
		"from a backup, or see %s", e.ID, KeyDocs)
}

func (e *UnknownKeyError) Is(target error) bool { return target == ErrUnknownKey }

// Reason is a refusal's class, as the metric of refused records labels it: "unsigned",
// "changed" (a key the operator holds does not verify it), "other_key" (signed by a key it
// does not hold), "no_key_id" (a signature without key id that no key verifies).
func Reason(err error) string {
	switch {
	case errors.Is(err, ErrUnsigned):
		return "unsigned"
	case errors.Is(err, ErrUnknownKey):
		return "other_key"
	case errors.Is(err, ErrNoKeyVerifies):
		return "no_key_id"
	default:
		return "changed"
	}
}

// field writes b to h prefixed by its length, so that no two lists of fields hash alike.
func field(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// signedMAC is the MAC of a record of type typ named name, with labels, as if stored in
// namespace ns, after the layout's leading fields (version, key id) and ending with body:
// the release in the legacy layouts, its digest in v3.
func (k Key) signedMAC(lead []string, ns, name string, typ corev1.SecretType, labels map[string]string, body []byte) string {
	mac := hmac.New(sha256.New, k)
	for _, f := range lead {
		field(mac, []byte(f))
	}
	field(mac, []byte(ns))
	field(mac, []byte(name))
	field(mac, []byte(typ))
	for _, l := range helmLabels {
		field(mac, []byte(labels[l]))
	}
	field(mac, body)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// mac computes the MAC of s in a legacy layout, as if it were stored in namespace ns: v1 with
// id "", v2, which signs the key id too, otherwise.
func (k Key) mac(ns, id string, s *corev1.Secret) string {
	lead := []string{signatureVersion}
	if id != "" {
		lead = []string{signatureVersionV2, id}
	}
	return k.signedMAC(lead, ns, s.Name, s.Type, s.Labels, s.Data["release"])
}

// macV3 computes the MAC of the record m of type typ in the current layout, from its metadata:
// the digest is its annotation, checked against the data by Verify.
func (k Key) macV3(ns, id string, m metav1.Object, typ corev1.SecretType) string {
	return k.signedMAC([]string{signatureVersionV3, id}, ns, m.GetName(), typ, m.GetLabels(),
		[]byte(m.GetAnnotations()[DigestAnnotation]))
}

// SignLegacy signs s as versions before the release digest did (the v2 layout, a MAC of the
// whole release): what the operator re-signs when it starts (trustedconfig), and what its
// tests of that start need.
func (k Key) SignLegacy(ns string, s *corev1.Secret) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	delete(s.Annotations, DigestAnnotation)
	s.Annotations[SignatureAnnotation] = k.ID() + "." + k.mac(ns, k.ID(), s)
}

// Digest is the value of DigestAnnotation for an encoded release.
func Digest(release []byte) string {
	sum := sha256.Sum256(release)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Sign sets the signature of s, a record about to be written to namespace ns, in the current
// layout: the release's digest, and the key's id and the MAC, so that a record signed by a key
// the operator no longer holds can be told apart.
func (k Key) Sign(ns string, s *corev1.Secret) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	id := k.ID()
	s.Annotations[DigestAnnotation] = Digest(s.Data["release"])
	s.Annotations[SignatureAnnotation] = id + "." + k.macV3(ns, id, s, s.Type)
}

// Verify returns nil if s, read from namespace ns, carries a valid signature of k.
func (k Key) Verify(ns string, s *corev1.Secret) error { return Keys{Current: k}.Verify(ns, s) }

// Keys are the keys of the key Secret: the current one signs, the previous ones (rotated out)
// only verify, so that a release not written since a rotation keeps its records.
type Keys struct {
	Current  Key
	Previous []Key
	// RefuseLegacy refuses signatures of the legacy layouts, which can only be checked on a
	// record's whole data: set once the operator has re-signed its own records in the current
	// layout, so that no Secret a namespace editor labels as a record is read whole.
	RefuseLegacy bool
}

// All is the current key and then the previous ones.
func (ks Keys) All() []Key { return append([]Key{ks.Current}, ks.Previous...) }

// Holds reports whether id is the id of one of ks.
func (ks Keys) Holds(id string) bool {
	for _, k := range ks.All() {
		if k.ID() == id {
			return true
		}
	}
	return false
}

// Sign signs s with the current key.
func (ks Keys) Sign(ns string, s *corev1.Secret) { ks.Current.Sign(ns, s) }

// Resign is the signature, under the current key, of the record m read from namespace ns,
// whose signature holds on its metadata under a previous key: after a rotation, a record is
// re-signed from its metadata alone. The digest it signs stays the record's, and is checked
// against its data at every read, as before; a record whose signature does not hold is not
// re-signed (the error says why).
func (ks Keys) Resign(ns string, m metav1.Object) (string, error) {
	if SignatureKeyID(m) == ks.Current.ID() {
		return "", errors.New("signed by the current key")
	}
	if err := ks.VerifyMetadata(ns, m); err != nil {
		return "", err
	}
	current := ks.Current.ID()
	return current + "." + ks.Current.macV3(ns, current, m, RecordType), nil
}

// SignatureKeyID is the key id a record's signature names, "" for an unsigned record or a
// signature without key id (the record's metadata tells it: the manager's cache has it).
func SignatureKeyID(m metav1.Object) string {
	id, _, ok := strings.Cut(m.GetAnnotations()[SignatureAnnotation], ".")
	if !ok {
		return ""
	}
	return id
}

// VerifyMetadata checks the signature of the record m, read from namespace ns, on its metadata
// alone, as a record of Helm's type: nil if it holds, and then Verify only has its digest left
// to check on the data; ErrNeedsData for a signature of a legacy layout, which only Verify can
// check; a refusal otherwise. A Secret refused here need never be read whole.
func (ks Keys) VerifyMetadata(ns string, m metav1.Object) error {
	return ks.verifyMetadata(ns, m, RecordType)
}

func (ks Keys) verifyMetadata(ns string, m metav1.Object, typ corev1.SecretType) error {
	got, ok := m.GetAnnotations()[SignatureAnnotation]
	if !ok {
		return ErrUnsigned
	}
	if _, v3 := m.GetAnnotations()[DigestAnnotation]; !v3 {
		if ks.RefuseLegacy {
			return ks.legacyRefusal(got)
		}
		return ErrNeedsData
	}
	id, _, withID := strings.Cut(got, ".")
	if !withID || !validKeyID(id) {
		return ErrBadSignature
	}
	for _, k := range ks.All() {
		if k.ID() != id {
			continue
		}
		if !hmac.Equal([]byte(got), []byte(id+"."+k.macV3(ns, id, m, typ))) {
			return ErrChanged
		}
		return nil
	}
	return &UnknownKeyError{ID: id}
}

// legacyRefusal says why a signature got of a legacy layout is refused once the operator has
// re-signed its own: the operator holds no key that made it (so it says what it says of any
// record of a key it does not hold: restore the key), or it does and the record is not its own.
func (ks Keys) legacyRefusal(got string) error {
	id, _, withID := strings.Cut(got, ".")
	switch {
	case !withID:
		return ErrNoKeyVerifies
	case !validKeyID(id):
		return ErrBadSignature
	case !ks.Holds(id):
		return &UnknownKeyError{ID: id}
	}
	return ErrLegacyLayout
}

// Verify returns nil if s, read from namespace ns, carries a valid signature of one of ks.
// A signature names its key: it is checked under that key only, and one naming a key not in
// ks is an *UnknownKeyError. A signature without key id (before key ids) is checked under
// every key. Nothing is accepted that no key of ks signed.
func (ks Keys) Verify(ns string, s *corev1.Secret) error {
	switch err := ks.verifyMetadata(ns, s, s.Type); {
	case err == nil:
		if !hmac.Equal([]byte(s.Annotations[DigestAnnotation]), []byte(Digest(s.Data["release"]))) {
			return ErrChanged
		}
		return nil
	case !errors.Is(err, ErrNeedsData):
		return err
	}
	return ks.verifyLegacy(ns, s)
}

// verifyLegacy checks a signature of a legacy layout, a MAC of the whole record.
func (ks Keys) verifyLegacy(ns string, s *corev1.Secret) error {
	got := s.Annotations[SignatureAnnotation]
	if id, _, withID := strings.Cut(got, "."); withID {
		if !validKeyID(id) {
			return ErrBadSignature
		}
		for _, k := range ks.All() {
			if k.ID() != id {
				continue
			}
			if !hmac.Equal([]byte(got), []byte(id+"."+k.mac(ns, id, s))) {
				return ErrChanged
			}
			return nil
		}
		return &UnknownKeyError{ID: id}
	}
	for _, k := range ks.All() {
		if hmac.Equal([]byte(got), []byte(k.mac(ns, "", s))) {
			return nil
		}
	}
	return ErrNoKeyVerifies
}
