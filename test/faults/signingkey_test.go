package faults

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestSigningKeyLossRestoreAndRotation: the release signing key's lifecycle
// (docs/security.md, "Key lifecycle: rotation, loss, restore"), on a key of the test's own.
//
//   - Loss: with releases deployed, the key's Secret is deleted and the manager restarted. It
//     creates no key in its place, which would refuse every record, and says so in an Error
//     log line; every CR fails and is not Ready, and its Irreconcilable condition and a
//     Warning Event ReleaseSigningKeyMissing name the cause (the missing Secret, the old key's
//     id) and the way back; a metric says the key is missing. An edit does not apply, and no
//     workload or record is lost.
//   - Restore: the Secret is put back from the copy taken before the loss, the manager left
//     running: every CR reconciles again, the edit applies.
//   - Rotation: a new current key is added and the old one kept as previous: the CRs stay
//     Ready, and with no edit of any CR the manager re-signs every record with the new key
//     and reports the previous keys unused (a metric of 0 records each, a log line); dropped
//     from the Secret, the manager restarted, every CR stays Ready and an edit applies.
func TestSigningKeyLossRestoreAndRotation(t *testing.T) {
	if stock {
		t.Skip("the signing key is this operator's")
	}
	ctx := context.Background()
	const n = 3
	name := func(i int) string { return fmt.Sprintf("app-%d", i) }
	f := newFaultFixture(t, fixtureOptions{kind: appService, n: n, name: name})
	ns, keyRef, startManager, m := f.ns, f.keyRef, f.startManager, f.manager
	backup, old := keysOf(t, keyRef)
	oldID := old.Current.ID()
	t.Logf("releases deployed, signed by key %s; the key's Secret copied", oldID)

	// Loss.
	m.Stop()
	if err := env.Client.Delete(ctx, backup.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	m = startManager()
	framework.Eventually(t, 2*time.Minute, func(context.Context) error {
		out, err := m.Output()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "refusing to create a release signing key") {
				if !strings.Contains(strings.ToLower(line), "error") {
					return fmt.Errorf("the loss is logged, not as an error: %s", line)
				}
				t.Logf("the manager logs: %s", line)
				return nil
			}
		}
		return fmt.Errorf("the manager does not log the loss of the key")
	})
	edited := appService.newCR(ns, name(0), 1)
	if err := appService.setReplicas(ctx, edited, 2); err != nil {
		t.Fatal(err)
	}
	wantCause := "the release signing key's Secret " + keyRef.String() + " is missing"
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		for i := range n {
			cr := appService.newCR(ns, name(i), 0)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
				return err
			}
			if s, _, msg := framework.Condition(cr, "Irreconcilable"); s != "True" ||
				!strings.Contains(msg, wantCause) || !strings.Contains(msg, oldID) || !strings.Contains(msg, "restore the Secret from a backup") {
				return fmt.Errorf("%s: Irreconcilable=%q: %s", cr.GetName(), s, msg)
			}
			if s, _, _ := framework.Condition(cr, "Ready"); s == "True" {
				return fmt.Errorf("%s: Ready=True", cr.GetName())
			}
			evs, err := events(ctx, ns, cr.GetName(), "ReleaseSigningKeyMissing")
			if err != nil {
				return err
			}
			if !anyEventSays(evs, wantCause) {
				return fmt.Errorf("%s: no ReleaseSigningKeyMissing Event says %q", cr.GetName(), wantCause)
			}
		}
		if v, err := framework.Metric(m.metrics, "warpdrive_release_signing_key_missing"); err != nil || v != 1 {
			return fmt.Errorf("warpdrive_release_signing_key_missing = %v (%v), want 1", v, err)
		}
		return nil
	})
	cr := appService.newCR(ns, name(0), 0)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
		t.Fatal(err)
	}
	_, _, msg := framework.Condition(cr, "Irreconcilable")
	t.Logf("with the key lost, %s says: %s", name(0), msg)
	if err := env.Client.Get(ctx, keyRef, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("with the key lost, its Secret: %v; want none created", err)
	}
	s, err := snapshot(ctx, ns, appService)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		wkind, wname := appService.workload(appService.newCR(ns, name(i), 0))
		w, ok := s.workloads[wkind+"/"+wname]
		if !ok || w.replicas != 1 {
			t.Errorf("with the key lost, %s %s: present %v, %d replicas; want it as it was (1)", wkind, wname, ok, w.replicas)
		}
		revs := s.releases[name(i)]
		if len(revs) != 1 {
			t.Errorf("with the key lost, release %s has %d records, want its 1", name(i), len(revs))
		}
		for _, r := range revs {
			if err := old.Verify(ns, &r.secret); err != nil {
				t.Errorf("with the key lost, record %s: %v; want it as the lost key signed it", r.secret.Name, err)
			}
		}
	}

	// Restore, from the copy, with the manager running: the CRs' next reconcile loads the
	// key, and every CR reconciles again.
	restored := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: backup.Namespace, Name: backup.Name,
		Labels: backup.Labels, Annotations: backup.Annotations}, Type: backup.Type, Data: backup.Data}
	if err := env.Client.Create(ctx, restored); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns)
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		if v, err := framework.Metric(m.metrics, "warpdrive_release_signing_key_missing"); err != nil || v != 0 {
			return fmt.Errorf("warpdrive_release_signing_key_missing = %v (%v), want 0", v, err)
		}
		return noRefusals(ctx, ns, n, name)
	})
	t.Logf("the key restored, the manager not restarted: every CR reconciled again, the edit applied")

	// Rotation: a new current key, the old one kept as previous.
	m.Stop()
	newKey := make([]byte, releasesign.MinKeySize)
	if _, err := rand.Read(newKey); err != nil {
		t.Fatal(err)
	}
	rotated := &corev1.Secret{}
	if err := env.Client.Get(ctx, keyRef, rotated); err != nil {
		t.Fatal(err)
	}
	rotated.Data["previous-"+oldID] = rotated.Data["key"]
	rotated.Data["key"] = newKey
	if err := env.Client.Update(ctx, rotated); err != nil {
		t.Fatal(err)
	}
	keys, err := releasesign.ParseKeys(rotated.Data)
	if err != nil {
		t.Fatal(err)
	}
	newID := keys.Current.ID()
	m = startManager()
	// The CRs stay Ready through the manager's first pass over them.
	framework.Eventually(t, 2*time.Minute, func(context.Context) error {
		if r, err := m.reconciles(); err != nil || r < n {
			return fmt.Errorf("%v reconciles (%v)", r, err)
		}
		return nil
	})
	waitReady(t, ns)
	if err := noRefusals(ctx, ns, n, name); err != nil {
		t.Fatalf("after the rotation: %v", err)
	}
	// With no edit of any CR, the manager re-signs the records of the previous keys with the
	// new one, and says when no record is a previous key's: in the metric, and in its log,
	// which names the field to drop.
	_, previousIDs := keys.IDs()
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		s, err := snapshot(ctx, ns, appService)
		if err != nil {
			return err
		}
		for i := range n {
			for _, r := range s.releases[name(i)] {
				if id := releasesign.SignatureKeyID(&r.secret); id != newID {
					return fmt.Errorf("record %s (%s) is signed by key %q, want the new key %q", r.secret.Name, r.status, id, newID)
				}
				if err := keys.Verify(ns, &r.secret); err != nil {
					return fmt.Errorf("record %s does not verify after the re-signing: %v", r.secret.Name, err)
				}
			}
		}
		out, err := m.Output()
		if err != nil {
			return err
		}
		for _, id := range previousIDs {
			v, err := framework.Metric(m.metrics, "warpdrive_release_records_of_previous_key", `key_id="`+id+`"`)
			if err != nil || v != 0 {
				return fmt.Errorf("warpdrive_release_records_of_previous_key{key_id=%s} = %v (%v), want 0", id, v, err)
			}
			if !logSays(out, "no release record is signed by a previous key any more", id) {
				return fmt.Errorf("the manager does not log that previous key %s is unused", id)
			}
		}
		return nil
	})
	t.Logf("rotated to key %s: every record re-signed by it with no CR edit, previous keys %v reported unused", newID, previousIDs)

	// The administrator drops the previous keys, as the log says, and restarts the manager:
	// every CR stays Ready, and an edit applies.
	m.Stop()
	if err := env.Client.Get(ctx, keyRef, rotated); err != nil {
		t.Fatal(err)
	}
	for f := range rotated.Data {
		if strings.HasPrefix(f, "previous-") {
			delete(rotated.Data, f)
		}
	}
	if err := env.Client.Update(ctx, rotated); err != nil {
		t.Fatal(err)
	}
	m = startManager()
	framework.Eventually(t, 2*time.Minute, func(context.Context) error {
		if r, err := m.reconciles(); err != nil || r < n {
			return fmt.Errorf("%v reconciles (%v)", r, err)
		}
		return nil
	})
	waitReady(t, ns)
	if err := noRefusals(ctx, ns, n, name); err != nil {
		t.Fatalf("after the previous keys were dropped: %v", err)
	}
	if err := appService.setReplicas(ctx, appService.newCR(ns, name(1), 0), 2); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns)
	if err := noRefusals(ctx, ns, n, name); err != nil {
		t.Error(err)
	}
	t.Logf("previous keys dropped: every CR Ready, the edit applied")
}

// logSays reports whether a line of the log out holds every one of parts.
func logSays(out string, parts ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// ownSigningKey names a release signing key Secret of the test's own, deleted when the test
// ends, and returns it with startManager, which starts a manager of op that signs with it and
// waits until it leads. These tests delete, restore or annotate the key's Secret: with a key
// of their own, that touches no key another test's manager signs with.
func ownSigningKey(t *testing.T, op *operator) (keyRef client.ObjectKey, startManager func() *proc) {
	t.Helper()
	keyRef = client.ObjectKey{Namespace: env.LeaseNamespace, Name: "faults-signing-key-" + utilrand.String(5)}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyRef.Namespace, Name: keyRef.Name}})
		// The state of the records the manager keeps beside its key (trustedconfig).
		_ = env.Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: keyRef.Namespace,
			Name: keyRef.Name + "-take-over"}})
	})
	startManager = func() *proc {
		t.Helper()
		p := op.start("manager", framework.ProcessOptions{Flags: []string{"--release-signing-key=" + keyRef.String()}})
		waitLeader(t, p)
		return p
	}
	return keyRef, startManager
}

// keysOf reads the signing key Secret keyRef and parses the keys it holds.
func keysOf(t *testing.T, keyRef client.ObjectKey) (*corev1.Secret, releasesign.Keys) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), keyRef, secret); err != nil {
		t.Fatal(err)
	}
	keys, err := releasesign.ParseKeys(secret.Data)
	if err != nil {
		t.Fatal(err)
	}
	return secret, keys
}

// waitReady waits until every AppService of ns is at its spec (release, workload, the
// sidecar's status) and Ready.
func waitReady(t testing.TB, ns string) *state {
	t.Helper()
	return waitKindReady(t, ns, appService)
}

// noRefusals says which of the n CRs named by name report a refused record.
func noRefusals(ctx context.Context, ns string, n int, name func(int) string) error {
	for i := range n {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(appService.gvk)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, cr); err != nil {
			return err
		}
		if s, _, msg := framework.Condition(cr, "ReleaseRecordRefused"); s == "True" {
			return fmt.Errorf("%s: ReleaseRecordRefused=True: %s", name(i), msg)
		}
	}
	return nil
}

func anyEventSays(evs []corev1.Event, s string) bool {
	for _, e := range evs {
		if strings.Contains(e.Message, s) {
			return true
		}
	}
	return false
}

// TestSigningKeyLostForGood: the key's Secret deleted, the manager creates none in its place
// and the CRs say it is missing; without a copy of the key, the administrator creates the
// Secret with a new key and the request to take the records over, and the manager, not
// restarted, takes the records of the lost key over, once, by the take-over's rules: the CRs
// reconcile again, under the new key; a record naming a made-up key for a CR that does not
// exist (as a namespace editor could plant) is not taken over.
func TestSigningKeyLostForGood(t *testing.T) {
	if stock {
		t.Skip("the signing key is this operator's")
	}
	ctx := context.Background()
	const n = 2
	name := func(i int) string { return fmt.Sprintf("app-%d", i) }
	f := newFaultFixture(t, fixtureOptions{kind: appService, n: n, name: name})
	ns, keyRef, startManager, m, s := f.ns, f.keyRef, f.startManager, f.manager, f.ready
	// A record planted for a CR that does not exist, naming a made-up key: a copy of app-0's,
	// renamed.
	planted := s.releases[name(0)][0].secret.DeepCopy()
	planted.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "sh.helm.release.v1.ghost.v1", Labels: planted.Labels,
		Annotations: map[string]string{releasesign.SignatureAnnotation: "0123456789ab.bWFj"}}
	planted.Labels["name"] = "ghost"
	if err := env.Client.Create(ctx, planted); err != nil {
		t.Fatal(err)
	}

	m.Stop()
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyRef.Namespace, Name: keyRef.Name}}); err != nil {
		t.Fatal(err)
	}
	startManager()
	if err := appService.setReplicas(ctx, appService.newCR(ns, name(0), 0), 2); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		return keyMissing(ctx, ns, name(0), keyRef)
	})

	// No copy: the administrator creates the key's Secret with a new key and the request to
	// take the records over, as docs/security.md says, and leaves the manager running.
	newKey := make([]byte, releasesign.MinKeySize)
	if _, err := rand.Read(newKey); err != nil {
		t.Fatal(err)
	}
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyRef.Namespace, Name: keyRef.Name,
		Annotations: map[string]string{"warpdrive.transwarp.io/take-over-records-of-other-keys": "true"}},
		Data: map[string][]byte{"key": newKey}}
	if err := env.Client.Create(ctx, key); err != nil {
		t.Fatal(err)
	}
	keys := releasesign.Keys{Current: newKey}
	s = waitReady(t, ns)
	if err := noRefusals(ctx, ns, n, name); err != nil {
		t.Error(err)
	}
	for i := range n {
		for _, r := range s.releases[name(i)] {
			if err := keys.Verify(ns, &r.secret); err != nil {
				t.Errorf("record %s after the take-over: %v", r.secret.Name, err)
			}
		}
	}
	ghost := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(planted), ghost); err != nil {
		t.Fatal(err)
	}
	if keys.Verify(ns, ghost) == nil {
		t.Error("the planted record was taken over")
	}
	if err := env.Client.Get(ctx, keyRef, key); err != nil {
		t.Fatal(err)
	}
	if _, still := key.Annotations["warpdrive.transwarp.io/take-over-records-of-other-keys"]; still {
		t.Error("the take-over request is still on the key's Secret")
	}
	// The outcome counts every record of the cluster it considered, other tests' included.
	got := key.Annotations["warpdrive.transwarp.io/records-of-other-keys-taken-over"]
	if !strings.Contains(got, "signed") {
		t.Errorf("the key's Secret records the take-over as %q", got)
	}
	t.Logf("taken over: %s; the planted record stays refused", got)
}

// keyMissing says why the CR ns/name does not report the signing key's Secret keyRef missing.
func keyMissing(ctx context.Context, ns, name string, keyRef client.ObjectKey) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(appService.gvk)
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cr); err != nil {
		return err
	}
	want := "the release signing key's Secret " + keyRef.String() + " is missing"
	if s, _, msg := framework.Condition(cr, "Irreconcilable"); s != "True" || !strings.Contains(msg, want) {
		return fmt.Errorf("%s: Irreconcilable=%q: %s", name, s, msg)
	}
	return nil
}
