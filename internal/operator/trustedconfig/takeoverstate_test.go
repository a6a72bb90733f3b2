package trustedconfig

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// The take-over's record is kept apart from the key: a take-over writes it to the ConfigMap
// beside the key's Secret; a key Secret recreated without its annotation (deleted, restored
// from a copy made before the take-over) does not run the take-over again, so an unsigned
// record forged since, which would pass its checks, stays refused; and a record kept on the
// key only, as earlier versions kept it, is copied apart.
func TestTakeOverStateOutlivesTheKey(t *testing.T) {
	ctx := context.Background()
	key := releasesign.Key("0123456789abcdef0123456789abcdef")
	forged := unsignedRecord("t1", "forged", "appservice", "")
	cs, tc, keySecret := takeOverFixture(t, key, nil, crs{"AppService t1/forged": true}, nil)

	if err := tc.takeOver(ctx, key, keySecret); err != nil {
		t.Fatal(err)
	}
	got, err := tc.recordedState(ctx, keySecret, TakeOverStateKey)
	if err != nil || !strings.HasSuffix(got, "0 signed, 0 refused") {
		t.Fatalf("take-over recorded apart from the key as %q (%v), want 0 signed and 0 refused", got, err)
	}

	// The key's Secret is recreated without its annotation; a record is forged for a CR.
	if err := cs.CoreV1().Secrets("op").Delete(ctx, keySecret.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	recreated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: keySecret.Name}, Data: keySecret.Data}
	if _, err := cs.CoreV1().Secrets("op").Create(ctx, recreated, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, tc, _ = takeOverFixture(t, key, nil, crs{"AppService t1/forged": true}, []runtime.Object{forged})
	tc.secrets = cs
	if _, err := cs.CoreV1().Secrets("t1").Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tc.takeOver(ctx, key, recreated); err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Secrets("t1").Get(ctx, forged.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, signed := s.Annotations[releasesign.SignatureAnnotation]; signed {
		t.Error("a record forged after the take-over was taken over when the key's Secret was recreated")
	}

	// Recorded on the key only, by an earlier version: copied apart, nothing taken over.
	cs, tc, keySecret = takeOverFixture(t, key, map[string]string{takenOverAnnotation: "earlier"},
		crs{"AppService t1/forged": true}, []runtime.Object{forged})
	if err := tc.takeOver(ctx, key, keySecret); err != nil {
		t.Fatal(err)
	}
	if got, err := tc.recordedState(ctx, keySecret, TakeOverStateKey); got != "earlier" || err != nil {
		t.Errorf("a take-over recorded on the key only: recorded apart as %q (%v), want it copied", got, err)
	}
	if s, _ := cs.CoreV1().Secrets("t1").Get(ctx, forged.Name, metav1.GetOptions{}); s.Annotations[releasesign.SignatureAnnotation] != "" {
		t.Error("a take-over recorded on the key ran again")
	}
}
