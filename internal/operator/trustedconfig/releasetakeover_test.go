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

// After a person's helm upgrade rewrote a release's records (the operator's own one changed,
// the person's unsigned), an administrator names the release on the key's Secret: its records
// are taken over, once, by the take-over's rules; another release's stay refused.
func TestTakeOverOfNamedReleases(t *testing.T) {
	ctx := context.Background()
	key := releasesign.Key("0123456789abcdef0123456789abcdef")
	keys := releasesign.Keys{Current: key}
	cm := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: t1\n"
	record := func(release string, version int) *corev1.Secret {
		return unsignedRecordAt("t1", release, "appservice", cm, version)
	}
	// The operator's revision 1, signed, then superseded by helm upgrade: changed.
	superseded := record("mc", 1)
	key.Sign("t1", superseded)
	superseded.Labels["status"] = "superseded"
	records := []runtime.Object{
		superseded,
		record("mc", 2),    // the person's upgrade: unsigned
		record("other", 1), // another release's unsigned record
		unsignedRecord("t1", "ghost", "appservice", cm), // named, but no CR
	}
	cs, tc, keySecret := takeOverFixture(t, key,
		map[string]string{takenOverAnnotation: "earlier", releasesAnnotation: "t1/mc, t1/ghost, not-a-name"},
		crs{"AppService t1/mc": true, "AppService t1/other": true}, records)
	if err := tc.takeOverReleases(ctx, keys, keySecret); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"sh.helm.release.v1.mc.v1": true, "sh.helm.release.v1.mc.v2": true}
	for _, r := range records {
		s, err := cs.CoreV1().Secrets("t1").Get(ctx, r.(*corev1.Secret).Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := keys.Verify("t1", s) == nil; got != want[s.Name] {
			t.Errorf("record %s verifies: %v, want %v", s.Name, got, want[s.Name])
		}
	}
	marked, err := cs.CoreV1().Secrets("op").Get(ctx, "key", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, still := marked.Annotations[releasesAnnotation]; still {
		t.Error("the request is still on the key's Secret")
	}
	if got := marked.Annotations[releasesTakenOverAnnotation]; !strings.HasSuffix(got, "2 signed, 1 refused") {
		t.Errorf("take-over recorded as %q, want 2 signed and 1 refused", got)
	}
	// Once: the request answered, nothing more is taken over.
	late := record("mc", 3)
	if _, err := cs.CoreV1().Secrets("t1").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tc.takeOverReleases(ctx, keys, marked); err != nil {
		t.Fatal(err)
	}
	if s, _ := cs.CoreV1().Secrets("t1").Get(ctx, late.Name, metav1.GetOptions{}); keys.Verify("t1", s) == nil {
		t.Error("a record written after the answered request was signed")
	}
}
