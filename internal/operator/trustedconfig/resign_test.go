package trustedconfig

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// legacySigned is s signed as versions before the release digest signed it.
func legacySigned(key releasesign.Key, s *corev1.Secret) *corev1.Secret {
	s = s.DeepCopy()
	key.SignLegacy(s.Namespace, s)
	return s
}

// At its first use of the key the operator re-signs its records of the legacy layouts in the
// current one and refuses those layouts from then on: a record it wrote still verifies, on
// metadata alone; a Secret forged in a legacy layout is left as it is, and refused without
// its data being read.
func TestLegacyRecordsResigned(t *testing.T) {
	ctx := context.Background()
	key := releasesign.Key("0123456789abcdef0123456789abcdef")
	ours := legacySigned(key, unsignedRecord("t1", "x", "appservice", ""))
	forged := unsignedRecord("t1", "y", "appservice", "")
	forged.Annotations = map[string]string{releasesign.SignatureAnnotation: key.ID() + ".forged"}
	cs, tc, keySecret := takeOverFixture(t, key, nil, crs{}, []runtime.Object{ours, forged})

	keys, err := tc.resignLegacy(ctx, releasesign.Keys{Current: key}, keySecret)
	if err != nil {
		t.Fatal(err)
	}
	if !keys.RefuseLegacy {
		t.Error("legacy layouts still accepted after the records were re-signed")
	}
	got, err := cs.CoreV1().Secrets("t1").Get(ctx, ours.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.VerifyMetadata("t1", got); err != nil {
		t.Errorf("the operator's record after the re-signing, on metadata: %v", err)
	}
	if err := keys.Verify("t1", got); err != nil {
		t.Errorf("the operator's record after the re-signing: %v", err)
	}
	stillForged, err := cs.CoreV1().Secrets("t1").Get(ctx, forged.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, digest := stillForged.Annotations[releasesign.DigestAnnotation]; digest {
		t.Error("a forged record was re-signed")
	}
	if err := keys.VerifyMetadata("t1", stillForged); !errors.Is(err, releasesign.ErrLegacyLayout) {
		t.Errorf("a forged record in a legacy layout, on metadata: %v, want refused", err)
	}

	// Once per set of keys: the next start reads nothing, and refuses the legacy layouts; a key
	// added (restored from a backup) runs the pass again.
	reads := func() int {
		n := 0
		for _, a := range cs.Actions() {
			if g, ok := a.(interface{ GetName() string }); ok && a.GetVerb() == "get" && g.GetName() == forged.Name {
				n++
			}
		}
		return n
	}
	before := reads()
	again, err := tc.resignLegacy(ctx, releasesign.Keys{Current: key}, keySecret)
	if err != nil {
		t.Fatal(err)
	}
	if !again.RefuseLegacy || reads() != before {
		t.Errorf("the pass ran again under the same keys: legacy refused %v, %d reads of the forged record", again.RefuseLegacy, reads()-before)
	}
	restored := releasesign.Keys{Current: key, Previous: []releasesign.Key{releasesign.Key("another key of thirty-two bytes!")}}
	if _, err := tc.resignLegacy(ctx, restored, keySecret); err != nil {
		t.Fatal(err)
	}
	if reads() == before {
		t.Error("the pass did not run again under another set of keys")
	}
}
