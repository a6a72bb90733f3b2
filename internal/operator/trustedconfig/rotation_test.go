package trustedconfig

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// After a rotation the manager re-signs with the current key, in the background and from
// their metadata alone, the records a previous key signs; it leaves alone the records it
// refuses (changed, of a key it does not hold, unsigned) and its own; and once no record is
// the previous key's it says so, in the metric and the log, and stops.
func TestResignPrevious(t *testing.T) {
	defer func(p, r time.Duration) { resignPace, resignRetry = p, r }(resignPace, resignRetry)
	resignPace, resignRetry = 0, time.Millisecond
	ctx := context.Background()
	current := releasesign.Key("0123456789abcdef0123456789abcdef")
	previous := releasesign.Key("the previous key, thirty-two byt")
	lost := releasesign.Key("the lost key, of thirty-two byte")
	signedBy := func(k releasesign.Key, s *corev1.Secret) *corev1.Secret { k.Sign(s.Namespace, s); return s }
	changed := signedBy(previous, unsignedRecord("t1", "changed", "appservice", ""))
	changed.Labels["status"] = "superseded"
	records := []runtime.Object{
		signedBy(previous, unsignedRecord("t1", "a", "appservice", "")), // re-signed
		signedBy(previous, unsignedRecord("t2", "b", "appservice", "")), // re-signed
		changed, // refused: left
		signedBy(lost, unsignedRecord("t1", "lost", "appservice", "")),   // refused: left
		unsignedRecord("t1", "unsigned", "appservice", ""),               // refused: left
		signedBy(current, unsignedRecord("t1", "own", "appservice", "")), // the current key's
	}
	cs, tc, _ := takeOverFixture(t, current, nil, crs{}, records)
	tc.keySecret = types.NamespacedName{Namespace: "op", Name: "key"}
	tc.key = releasesign.Keys{Current: current, Previous: []releasesign.Key{previous}, RefuseLegacy: true}
	tc.previousFields = map[string]string{previous.ID(): "previous-2025"}
	tc.loaded = make(chan struct{})
	close(tc.loaded)
	before := map[string]*corev1.Secret{}
	for _, r := range records {
		s := r.(*corev1.Secret)
		before[s.Namespace+"/"+s.Labels["name"]] = s
	}
	cs.ClearActions()

	if err := tc.resignPrevious(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "patch" {
			t.Errorf("the re-signing made a %s of %s: it acts on metadata alone", a.GetVerb(), a.GetResource().Resource)
		}
	}
	onlyCurrent := releasesign.Keys{Current: current}
	for key, old := range before {
		ns, name, _ := strings.Cut(key, "/")
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch name {
		case "a", "b", "own":
			if err := onlyCurrent.Verify(ns, s); err != nil {
				t.Errorf("%s: %v, want it verified by the current key alone", key, err)
			}
		default:
			if s.Annotations[releasesign.SignatureAnnotation] != old.Annotations[releasesign.SignatureAnnotation] {
				t.Errorf("%s, refused, was re-signed", key)
			}
		}
	}
	if got := testutil.ToFloat64(recordsOfPreviousKeys.WithLabelValues(previous.ID())); got != 0 {
		t.Errorf("records of the previous key after the re-signing: %v, want 0", got)
	}

	// Without previous keys it does nothing.
	cs.ClearActions()
	tc.key = releasesign.Keys{Current: current}
	if err := tc.resignPrevious(ctx); err != nil || len(cs.Actions()) != 0 {
		t.Errorf("without previous keys: %v, %d requests", err, len(cs.Actions()))
	}
}
