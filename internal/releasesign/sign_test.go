package releasesign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var testKey = Key("0123456789abcdef0123456789abcdef")

// record is a release record as Helm's Secrets driver writes it.
func record(name, status, version string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + name + ".v" + version,
			Labels: map[string]string{"owner": "helm", "name": name, "status": status, "version": version}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte("H4sIAAAAAAAC/6pWKkktLlGyUlAqS8wpTVWqBQQAAP//")},
	}
}

func TestVerifyRefusesEveryChange(t *testing.T) {
	signed := record("x", "deployed", "2")
	testKey.Sign("t1", signed)
	if err := testKey.Verify("t1", signed); err != nil {
		t.Fatalf("a record as signed: %v", err)
	}
	changes := map[string]func(s *corev1.Secret) (ns string){
		"unsigned":               func(s *corev1.Secret) string { delete(s.Annotations, SignatureAnnotation); return "t1" },
		"another namespace":      func(*corev1.Secret) string { return "t2" },
		"renamed":                func(s *corev1.Secret) string { s.Name = "sh.helm.release.v1.x.v3"; return "t1" },
		"relabelled status":      func(s *corev1.Secret) string { s.Labels["status"] = "superseded"; return "t1" },
		"relabelled version":     func(s *corev1.Secret) string { s.Labels["version"] = "9"; return "t1" },
		"relabelled name":        func(s *corev1.Secret) string { s.Labels["name"] = "y"; return "t1" },
		"release data changed":   func(s *corev1.Secret) string { s.Data["release"] = append(s.Data["release"], 'A'); return "t1" },
		"type changed":           func(s *corev1.Secret) string { s.Type = corev1.SecretTypeOpaque; return "t1" },
		"signature of other key": func(s *corev1.Secret) string { Key("another key of thirty-two bytes!").Sign("t1", s); return "t1" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s := signed.DeepCopy()
			ns := change(s)
			err := testKey.Verify(ns, s)
			if err == nil {
				t.Fatal("verified, want refused")
			}
			want := ErrBadSignature
			switch name {
			case "unsigned":
				want = ErrUnsigned
			case "signature of other key":
				want = ErrUnknownKey
			}
			if !errors.Is(err, want) {
				t.Errorf("error %v, want %v", err, want)
			}
		})
	}
	// Labels Helm does not query by may change (Helm's own custom labels, modifiedAt).
	s := signed.DeepCopy()
	s.Labels["modifiedAt"] = "1700000000"
	if err := testKey.Verify("t1", s); err != nil {
		t.Errorf("a record with another label: %v", err)
	}
}

func TestLoadOrCreateKeys(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	k1, _, created, err := LoadOrCreateKeys(ctx, cs, "op", "key", nil)
	if err != nil || len(k1.Current) != MinKeySize || !created || len(k1.Previous) != 0 {
		t.Fatalf("first load: %d bytes, created %v, %v", len(k1.Current), created, err)
	}
	k2, _, created, err := LoadOrCreateKeys(ctx, cs, "op", "key", nil)
	if err != nil || string(k1.Current) != string(k2.Current) || created {
		t.Fatalf("second load returned another key, or created one (%v, %v)", created, err)
	}
	// A key the caller does not let it create is not created, and the caller's error says why.
	refused := errors.New("records of another key exist")
	none := fake.NewClientset()
	if _, _, created, err := LoadOrCreateKeys(ctx, none, "op", "key", func(context.Context) error { return refused }); !errors.Is(err, refused) || created {
		t.Errorf("a key created against the caller's refusal: created %v, %v", created, err)
	}
	if _, err := none.CoreV1().Secrets("op").Get(ctx, "key", metav1.GetOptions{}); err == nil {
		t.Error("the refused key's Secret exists")
	}
	if _, _, created, err := LoadOrCreateKeys(ctx, cs, "op", "key", func(context.Context) error { return refused }); err != nil || created {
		t.Errorf("an existing key, with creation refused: created %v, %v; want it loaded", created, err)
	}
	for name, data := range map[string]map[string][]byte{
		"a 5-byte key":          {"key": []byte("short")},
		"a 5-byte previous key": {"key": testKey, "previous-1": []byte("short")},
		"a mistyped field":      {"key": testKey, "previus-1": otherKey},
		"no current key":        {"previous-1": otherKey},
	} {
		bad := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: "key"}, Data: data})
		if _, _, _, err := LoadOrCreateKeys(ctx, bad, "op", "key", nil); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
}

var otherKey = Key("another key of thirty-two bytes!")

// A key id is a short hash of the key, as the docs tell administrators to compute it, and a
// signature names it.
func TestKeyIDs(t *testing.T) {
	sum := sha256.Sum256(testKey)
	if got, want := testKey.ID(), hex.EncodeToString(sum[:])[:12]; got != want {
		t.Errorf("key id %q, want %q (sha256sum | cut -c1-12)", got, want)
	}
	if testKey.ID() == otherKey.ID() {
		t.Error("two keys with one id")
	}
	s := record("x", "deployed", "1")
	testKey.Sign("t1", s)
	if got := SignatureKeyID(s); got != testKey.ID() || !strings.HasPrefix(s.Annotations[SignatureAnnotation], testKey.ID()+".") {
		t.Errorf("signature %q names key %q, want %q", s.Annotations[SignatureAnnotation], got, testKey.ID())
	}
	// The key id is signed: moving a MAC under another id does not verify.
	forged := s.DeepCopy()
	_, mac, _ := strings.Cut(s.Annotations[SignatureAnnotation], ".")
	forged.Annotations[SignatureAnnotation] = otherKey.ID() + "." + mac
	if err := (Keys{Current: testKey, Previous: []Key{otherKey}}).Verify("t1", forged); !errors.Is(err, ErrChanged) {
		t.Errorf("a MAC under another key's id: %v, want changed", err)
	}
}

// legacySign signs as the version before key ids did: a bare MAC of the v1 layout.
func legacySign(k Key, ns string, s *corev1.Secret) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[SignatureAnnotation] = k.mac(ns, "", s)
}

// What a refusal says: unsigned, changed under a key the operator holds, signed by a key it
// does not hold (named by its id), or a signature without key id that no key verifies.
func TestRefusalsTellAnotherKeyFromAChange(t *testing.T) {
	keys := Keys{Current: testKey}
	byOther := record("x", "deployed", "1")
	otherKey.Sign("t1", byOther)
	err := keys.Verify("t1", byOther)
	var unknown *UnknownKeyError
	if !errors.As(err, &unknown) || unknown.ID != otherKey.ID() || Reason(err) != "other_key" {
		t.Fatalf("a record of another key: %v (%s)", err, Reason(err))
	}
	for _, want := range []string{"signed by another key (id " + otherKey.ID() + ")", "restore the signing key from a backup", KeyDocs} {
		if !strings.Contains(Describe(byOther.Name, err), want) {
			t.Errorf("refusal %q does not say %q", Describe(byOther.Name, err), want)
		}
	}

	changed := record("x", "deployed", "1")
	testKey.Sign("t1", changed)
	changed.Labels["status"] = "superseded"
	if err := keys.Verify("t1", changed); !errors.Is(err, ErrChanged) || !errors.Is(err, ErrBadSignature) || Reason(err) != "changed" {
		t.Errorf("a changed record: %v (%s)", err, Reason(err))
	}

	legacyOther := record("x", "deployed", "1")
	legacySign(otherKey, "t1", legacyOther)
	if err := keys.Verify("t1", legacyOther); !errors.Is(err, ErrNoKeyVerifies) || !errors.Is(err, ErrBadSignature) ||
		Reason(err) != "no_key_id" || !strings.Contains(err.Error(), KeyDocs) {
		t.Errorf("a record of another key without key id: %v (%s)", err, Reason(err))
	}
	if err := keys.Verify("t1", record("x", "deployed", "1")); Reason(err) != "unsigned" {
		t.Errorf("an unsigned record: %v (%s)", err, Reason(err))
	}

	// A key id is repeated in a refusal only if it has the shape of one: whoever wrote the
	// record wrote it, and refusals end up in Events and logs.
	for _, id := range []string{"", "ABCDEF012345", "0123456789abc", "0123\n5678ab", strings.Repeat("a", 4096)} {
		s := record("x", "deployed", "1")
		s.Annotations = map[string]string{SignatureAnnotation: id + ".bWFj"}
		if err := keys.Verify("t1", s); errors.As(err, &unknown) || !errors.Is(err, ErrBadSignature) {
			t.Errorf("signature naming key %.20q: %v, want a bad signature", id, err)
		}
	}
}

// Rotation: after a new current key is added and the old one kept as previous, every record
// the old key signed still verifies, with or without key id; what is written from then on is
// signed by the new key; a record of neither is still refused; with the old key dropped, its
// records are refused as signed by another key.
func TestRotation(t *testing.T) {
	ctx := context.Background()
	old, current := testKey, otherKey
	oldRecord := record("x", "superseded", "1")
	old.Sign("t1", oldRecord)
	legacyRecord := record("y", "deployed", "1")
	legacySign(old, "t1", legacyRecord)
	for _, s := range []*corev1.Secret{oldRecord, legacyRecord} {
		s.Namespace = "t1"
	}
	cs := fake.NewClientset(oldRecord, legacyRecord)

	keys, err := ParseKeys(map[string][]byte{"key": current, "previous-" + old.ID(): old})
	if err != nil {
		t.Fatal(err)
	}
	if got, prev := keys.IDs(); got != current.ID() || len(prev) != 1 || prev[0] != old.ID() {
		t.Fatalf("keys %s, previous %v; want %s, [%s]", got, prev, current.ID(), old.ID())
	}
	c := NewSecretClient(cs.CoreV1().Secrets("t1"), "t1", keys, func(s string, err error) { t.Errorf("refused %s: %v", s, err) })
	for _, name := range []string{oldRecord.Name, legacyRecord.Name} {
		if _, err := c.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("a record of the previous key: %v", err)
		}
	}
	// An upgrade writes a new record and updates the last one: both signed by the new key.
	if _, err := c.Create(ctx, record("x", "deployed", "2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	up, _ := c.Get(ctx, oldRecord.Name, metav1.GetOptions{})
	up = up.DeepCopy()
	up.Labels["status"] = "superseded"
	if _, err := c.Update(ctx, up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sh.helm.release.v1.x.v2", oldRecord.Name} {
		s, err := cs.CoreV1().Secrets("t1").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if SignatureKeyID(s) != current.ID() || current.Verify("t1", s) != nil {
			t.Errorf("%s written after the rotation is signed by key %q, want %q", name, SignatureKeyID(s), current.ID())
		}
	}
	// The previous key verifies; it does not make anything else verify.
	third := Key("a third key, of thirty-two bytes")
	forged := record("x", "deployed", "3")
	third.Sign("t1", forged)
	if err := keys.Verify("t1", forged); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a record of a third key: %v", err)
	}
	legacyForged := record("x", "deployed", "3")
	legacySign(third, "t1", legacyForged)
	if err := keys.Verify("t1", legacyForged); !errors.Is(err, ErrNoKeyVerifies) {
		t.Errorf("a record of a third key without key id: %v", err)
	}
	relabelled := legacyRecord.DeepCopy()
	relabelled.Labels["status"] = "superseded"
	if err := keys.Verify("t1", relabelled); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a relabelled record of the previous key without key id: %v", err)
	}
	// The previous key dropped: its records are another key's.
	if err := (Keys{Current: current}).Verify("t1", legacyRecord); !errors.Is(err, ErrNoKeyVerifies) {
		t.Errorf("a record of a dropped key without key id: %v", err)
	}
	if err := (Keys{Current: current}).Verify("t1", oldRecord); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a record of a dropped key: %v", err)
	}
}

// metadataOf is what a LIST of metadata returns of s: no type, no data.
func metadataOf(s *corev1.Secret) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: *s.ObjectMeta.DeepCopy()}
}

// A signature is checked on metadata alone: it holds for the record's metadata, and fails for
// a signature copied to a Secret of another name, or moved to another namespace, with no data
// read; the data is then held to the signed digest. A legacy signature needs the data until
// the legacy layouts are refused.
func TestSignatureVerifiesOnMetadata(t *testing.T) {
	keys := Keys{Current: testKey}
	s := record("x", "deployed", "1")
	testKey.Sign("t1", s)
	if err := keys.VerifyMetadata("t1", metadataOf(s)); err != nil {
		t.Fatalf("a signed record's metadata: %v", err)
	}
	if err := keys.Verify("t1", s); err != nil {
		t.Fatalf("a signed record: %v", err)
	}

	copied := record("x", "superseded", "100")
	copied.Annotations = map[string]string{SignatureAnnotation: s.Annotations[SignatureAnnotation],
		DigestAnnotation: s.Annotations[DigestAnnotation]}
	if err := keys.VerifyMetadata("t1", metadataOf(copied)); !errors.Is(err, ErrChanged) {
		t.Errorf("a signature copied to another record: %v, want changed", err)
	}
	if err := keys.VerifyMetadata("t2", metadataOf(s)); !errors.Is(err, ErrChanged) {
		t.Errorf("a record moved to another namespace: %v, want changed", err)
	}
	redigested := s.DeepCopy()
	redigested.Annotations[DigestAnnotation] = Digest([]byte("another release"))
	if err := keys.VerifyMetadata("t1", metadataOf(redigested)); !errors.Is(err, ErrChanged) {
		t.Errorf("a record with another digest: %v, want changed", err)
	}
	replaced := s.DeepCopy()
	replaced.Data["release"] = []byte("another release")
	if err := keys.VerifyMetadata("t1", metadataOf(replaced)); err != nil {
		t.Errorf("metadata of a record whose data was replaced: %v (the data is checked by Verify)", err)
	}
	if err := keys.Verify("t1", replaced); !errors.Is(err, ErrChanged) {
		t.Errorf("a record whose data was replaced: %v, want changed", err)
	}
	retyped := s.DeepCopy()
	retyped.Type = corev1.SecretTypeOpaque
	if err := keys.Verify("t1", retyped); !errors.Is(err, ErrChanged) {
		t.Errorf("a record of another type: %v, want changed", err)
	}
	if err := keys.VerifyMetadata("t1", metadataOf(record("x", "deployed", "2"))); !errors.Is(err, ErrUnsigned) {
		t.Errorf("an unsigned record's metadata: %v, want unsigned", err)
	}

	v1, v2 := record("y", "deployed", "1"), record("z", "deployed", "1")
	legacySign(testKey, "t1", v1)
	testKey.SignLegacy("t1", v2)
	for _, legacy := range []*corev1.Secret{v1, v2} {
		if err := keys.VerifyMetadata("t1", metadataOf(legacy)); !errors.Is(err, ErrNeedsData) {
			t.Errorf("%s in a legacy layout, on metadata: %v, want needs data", legacy.Name, err)
		}
		if err := keys.Verify("t1", legacy); err != nil {
			t.Errorf("%s in a legacy layout: %v", legacy.Name, err)
		}
	}
	// Once the operator re-signed its own, a legacy signature is refused for what it is: one
	// without key id as no key's, one naming a key the operator holds as not its own, one
	// naming a key it does not hold as that key's, so that a lost key's records still say
	// to restore it.
	refusing := Keys{Current: testKey, RefuseLegacy: true}
	byLostKey := record("w", "deployed", "1")
	otherKey.SignLegacy("t1", byLostKey)
	for _, c := range []struct {
		s    *corev1.Secret
		want error
	}{{v1, ErrNoKeyVerifies}, {v2, ErrLegacyLayout}, {byLostKey, ErrUnknownKey}} {
		if err := refusing.VerifyMetadata("t1", metadataOf(c.s)); !errors.Is(err, c.want) || !errors.Is(err, ErrBadSignature) && c.want != ErrUnknownKey {
			t.Errorf("%s in a legacy layout, refused on metadata: %v, want %v", c.s.Name, err, c.want)
		}
		if err := refusing.Verify("t1", c.s); !errors.Is(err, c.want) {
			t.Errorf("%s in a legacy layout, refused: %v, want %v", c.s.Name, err, c.want)
		}
	}
}

// After a rotation a record of the previous key is re-signed by the current key from its
// metadata: it then verifies with the current key alone, and its data is still held to the
// digest it was signed with. A record the previous key does not verify (changed), of the
// current key, of a key not held, unsigned or in a legacy layout is not re-signed.
func TestResign(t *testing.T) {
	old, current := testKey, otherKey
	keys := Keys{Current: current, Previous: []Key{old}}
	ofOld := record("x", "superseded", "1")
	old.Sign("t1", ofOld)

	sig, err := keys.Resign("t1", metadataOf(ofOld))
	if err != nil {
		t.Fatal(err)
	}
	resigned := ofOld.DeepCopy()
	resigned.Annotations[SignatureAnnotation] = sig
	if err := (Keys{Current: current}).Verify("t1", resigned); err != nil || SignatureKeyID(resigned) != current.ID() {
		t.Errorf("re-signed: signed by %q, verified by the current key alone: %v", SignatureKeyID(resigned), err)
	}
	changedData := resigned.DeepCopy()
	changedData.Data["release"] = append(changedData.Data["release"], 'A')
	if err := keys.Verify("t1", changedData); !errors.Is(err, ErrChanged) {
		t.Errorf("re-signed, then its data changed: %v, want refused as changed", err)
	}

	relabelled := ofOld.DeepCopy()
	relabelled.Labels["status"] = "deployed"
	ofCurrent := record("x", "deployed", "2")
	current.Sign("t1", ofCurrent)
	ofThird := record("x", "deployed", "3")
	Key("a third key, of thirty-two bytes").Sign("t1", ofThird)
	legacy := record("y", "deployed", "1")
	legacySign(old, "t1", legacy)
	for name, s := range map[string]*corev1.Secret{"changed": relabelled, "of the current key": ofCurrent,
		"of a key not held": ofThird, "unsigned": record("z", "deployed", "1"), "legacy layout": legacy} {
		if sig, err := keys.Resign("t1", metadataOf(s)); err == nil {
			t.Errorf("%s: re-signed as %s", name, sig)
		}
	}
	if _, err := keys.Resign("t2", metadataOf(ofOld)); err == nil {
		t.Error("re-signed as if it were in another namespace")
	}
}

// A derived key is the same for the same key and purpose, another for another purpose or
// key, and never the key itself.
func TestDerive(t *testing.T) {
	k, other := Key(bytes.Repeat([]byte{1}, MinKeySize)), Key(bytes.Repeat([]byte{2}, MinKeySize))
	a := k.Derive("rollout-order")
	switch {
	case !bytes.Equal(a, k.Derive("rollout-order")):
		t.Error("the same key and purpose derived two keys")
	case bytes.Equal(a, k.Derive("another")), bytes.Equal(a, other.Derive("rollout-order")):
		t.Error("another purpose or key derived the same key")
	case bytes.Equal(a, k):
		t.Error("the derived key is the key")
	}
}
