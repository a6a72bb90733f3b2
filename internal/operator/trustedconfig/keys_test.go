package trustedconfig

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// After a key is lost for good, the records it signed are taken over only when an
// administrator asks on the key's Secret, once, and only by the take-over's rules: a record
// changed under a key the manager holds, or never signed, stays refused.
func TestTakeOverOfOtherKeysRecords(t *testing.T) {
	ctx := context.Background()
	current := releasesign.Key("0123456789abcdef0123456789abcdef")
	lost := releasesign.Key("the lost key, of thirty-two byte")
	keys := releasesign.Keys{Current: current}
	cm := func(ns string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: " + ns + "\n"
	}
	signedBy := func(k releasesign.Key, s *corev1.Secret) *corev1.Secret { k.Sign(s.Namespace, s); return s }
	noKeyID := unsignedRecord("t1", "no-key-id", "appservice", cm("t1"))
	noKeyID.Annotations = map[string]string{releasesign.SignatureAnnotation: "a-signature-without-key-id"}
	changed := signedBy(current, unsignedRecord("t1", "changed", "appservice", cm("t1")))
	changed.Labels["status"] = "superseded"
	records := []runtime.Object{
		signedBy(lost, unsignedRecord("t1", "lost", "appservice", cm("t1"))), // taken over
		noKeyID, // taken over: may be the lost key's
		signedBy(lost, unsignedRecord("t1", "ghost", "appservice", cm("t1"))),    // no CR
		signedBy(lost, unsignedRecord("t1", "reaching", "appservice", cm("t2"))), // names another namespace
		changed, // changed under the current key
		unsignedRecord("t1", "unsigned", "appservice", cm("t1")),               // never signed
		signedBy(current, unsignedRecord("t1", "own", "appservice", cm("t1"))), // the manager's own
	}
	cs, tc, keySecret := takeOverFixture(t, current, map[string]string{takenOverAnnotation: "earlier"},
		crs{"AppService t1/lost": true, "AppService t1/no-key-id": true, "AppService t1/reaching": true,
			"AppService t1/changed": true, "AppService t1/unsigned": true, "AppService t1/own": true}, records)
	verified := func() map[string]bool {
		out := map[string]bool{}
		for _, r := range records {
			s, err := cs.CoreV1().Secrets("t1").Get(ctx, r.(*corev1.Secret).Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out[s.Labels["name"]] = keys.Verify("t1", s) == nil
		}
		return out
	}

	// Not asked: nothing is taken over.
	if err := tc.takeOverOtherKeys(ctx, keys, keySecret); err != nil {
		t.Fatal(err)
	}
	if v := verified(); v["lost"] || v["no-key-id"] {
		t.Errorf("records of another key taken over unasked: %v", v)
	}

	keySecret.Annotations[otherKeysAnnotation] = "true"
	if _, err := cs.CoreV1().Secrets("op").Update(ctx, keySecret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tc.takeOverOtherKeys(ctx, keys, keySecret); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"lost": true, "no-key-id": true, "own": true}
	for name, ok := range verified() {
		if ok != want[name] {
			t.Errorf("record %s verifies: %v, want %v", name, ok, want[name])
		}
	}
	marked, err := cs.CoreV1().Secrets("op").Get(ctx, "key", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, still := marked.Annotations[otherKeysAnnotation]; still {
		t.Error("the request is still on the key's Secret")
	}
	if got := marked.Annotations[otherKeysTakenOverAnnotation]; !strings.HasSuffix(got, "2 signed, 2 refused") {
		t.Errorf("take-over recorded as %q, want 2 signed and 2 refused", got)
	}
	if marked.Annotations[takenOverAnnotation] != "earlier" {
		t.Error("the record of the unsigned take-over changed")
	}
}

// The census reads, from the cache's metadata, which key each signature names.
func TestKeyCensus(t *testing.T) {
	current := releasesign.Key("0123456789abcdef0123456789abcdef")
	previous := releasesign.Key("the previous key, thirty-two byt")
	lost := releasesign.Key("the lost key, of thirty-two byte")
	keys := releasesign.Keys{Current: current, Previous: []releasesign.Key{previous}}
	cached := crfake.NewClientBuilder()
	for i, k := range []releasesign.Key{current, previous, previous, lost, lost, nil} {
		s := unsignedRecord("t1", "r"+string(rune('a'+i)), "appservice", "")
		if k != nil {
			k.Sign("t1", s)
		}
		s.Data = nil
		cached.WithObjects(s)
	}
	legacy := unsignedRecord("t2", "legacy", "appservice", "")
	legacy.Annotations = map[string]string{releasesign.SignatureAnnotation: "bWFj"}
	cached.WithObjects(legacy)
	tc := &Configs{records: cached.Build()}
	c, err := tc.keyCensus(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if c.held[current.ID()] != 1 || c.held[previous.ID()] != 2 || c.otherTotal != 2 || c.other[lost.ID()] != 2 ||
		c.noID != 1 || len(c.otherNS) != 1 || c.otherIDs() != lost.ID() {
		t.Errorf("census %+v", c)
	}
}

// A missing key is not made again where the manager used one before (the state ConfigMap
// beside the key exists) and records signed by a key are in the cache: every reconcile fails
// with KeyMissingError, the metric says so, and no Secret is created; once an administrator
// puts the Secret back, the next reconcile loads it, with no restart. The first key of a
// cluster is created whatever Secrets a namespace editor labels as signed records, and so is
// a key where no record is signed.
func TestKeyNotCreatedWhereRecordsWereSigned(t *testing.T) {
	ctx := context.Background()
	lost := releasesign.Key("the lost key, of thirty-two byte")
	signed := unsignedRecord("t1", "a", "appservice", "")
	lost.Sign("t1", signed)
	stateCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: "key" + StateSuffix},
		Data: map[string]string{TakeOverStateKey: "earlier"}}
	// fixture: the records in the cluster, the state ConfigMap if state, no key Secret.
	fixture := func(state bool, records ...runtime.Object) (*fake.Clientset, *Configs) {
		cs, tc, keySecret := takeOverFixture(t, lost, nil, crs{"AppService t1/a": true}, records)
		if err := cs.CoreV1().Secrets("op").Delete(ctx, keySecret.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if state {
			if _, err := cs.CoreV1().ConfigMaps("op").Create(ctx, stateCM, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		tc.keySecret = types.NamespacedName{Namespace: "op", Name: keySecret.Name}
		return cs, tc
	}

	cs, tc := fixture(true, signed)
	for range 2 {
		_, err := tc.signingKey(ctx)
		var missing *KeyMissingError
		if !errors.As(err, &missing) || missing.Records != 1 || !strings.Contains(err.Error(), lost.ID()) ||
			!strings.Contains(err.Error(), "restore the Secret from a backup") {
			t.Fatalf("the key missing where records were signed: %v", err)
		}
	}
	if _, err := cs.CoreV1().Secrets("op").Get(ctx, "key", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a key Secret was created: %v", err)
	}
	if got := testutil.ToFloat64(keyMissing); got != 1 {
		t.Errorf("warpdrive_release_signing_key_missing = %v, want 1", got)
	}
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: "key"}, Data: map[string][]byte{"key": lost}}
	if _, err := cs.CoreV1().Secrets("op").Create(ctx, restored, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keys, err := tc.signingKey(ctx)
	if err != nil || keys.Current.ID() != lost.ID() {
		t.Fatalf("the key restored: %v", err)
	}
	if got := testutil.ToFloat64(keyMissing); got != 0 {
		t.Errorf("warpdrive_release_signing_key_missing = %v after the restore, want 0", got)
	}

	for name, tc := range map[string]struct {
		state   bool
		records []runtime.Object
	}{
		"no state: the first key of the cluster": {false, []runtime.Object{signed}},
		"no signed record":                       {true, []runtime.Object{unsignedRecord("t1", "b", "appservice", "")}},
	} {
		cs, tc := fixture(tc.state, tc.records...)
		if _, err := tc.signingKey(ctx); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := cs.CoreV1().Secrets("op").Get(ctx, "key", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: no key created: %v", name, err)
		}
	}
}

// SignedRecord, which the reconcilers' filter of release Secret deletions asks, holds for a
// record signed by the loaded keys only: never before the keys are loaded, nor for a record
// whose labels changed after it was signed.
func TestSignedRecord(t *testing.T) {
	keys := releasesign.Keys{Current: releasesign.Key("0123456789abcdef0123456789abcdef")}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sh.helm.release.v1.m.v1",
		Labels: map[string]string{"owner": "helm", "name": "m", "status": "superseded", "version": "1"}},
		Type: releasesign.RecordType, Data: map[string][]byte{"release": []byte("r")}}
	keys.Sign("ns", s)
	cached := &metav1.PartialObjectMetadata{ObjectMeta: *s.ObjectMeta.DeepCopy()}
	var c Configs
	if c.SignedRecord(cached) {
		t.Error("signed before the keys are loaded")
	}
	c.loadedKey.Store(&keys)
	if !c.SignedRecord(cached) {
		t.Error("a record signed by the loaded key is not")
	}
	cached.Labels["status"] = "deployed"
	if c.SignedRecord(cached) {
		t.Error("a record relabelled after it was signed is still signed")
	}
}
