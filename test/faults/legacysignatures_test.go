package faults

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestRecordsOfEarlierVersionsResigned: the operator is upgraded from a version whose
// signatures signed the whole release (the records are rewritten as that version signed
// them), and a tenant has planted a record in that layout under the key's id. The new manager
// re-signs its own records in the current layout at start, so the CRs go on from their
// releases: an edit applies. The planted record is left as it is, and refused on its metadata
// from then on.
func TestRecordsOfEarlierVersionsResigned(t *testing.T) {
	if stock {
		t.Skip("the signed records are this operator's")
	}
	ctx := context.Background()
	const name = "app-0"
	f := newFaultFixture(t, fixtureOptions{kind: appService, n: 1, name: func(int) string { return name }})
	ns, keyRef, startManager, m := f.ns, f.keyRef, f.startManager, f.manager

	m.Stop()
	// An earlier version kept no state of its records beside the key.
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: keyRef.Namespace, Name: keyRef.Name + "-take-over"}}
	if err := env.Client.Delete(ctx, state); err != nil {
		t.Fatal(err)
	}
	_, keys := keysOf(t, keyRef)
	records := &corev1.SecretList{}
	if err := env.Client.List(ctx, records, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	for i := range records.Items {
		keys.Current.SignLegacy(ns, &records.Items[i])
		if err := env.Client.Update(ctx, &records.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	planted := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sh.helm.release.v1." + name + ".v50",
			Labels:      map[string]string{"owner": "helm", "name": name, "status": "deployed", "version": "50"},
			Annotations: map[string]string{releasesign.SignatureAnnotation: keys.Current.ID() + ".bWFj"}},
		Type: releasesign.RecordType,
		Data: map[string][]byte{"release": []byte(strings.Repeat("x", 100<<10))},
	}
	env.Create(t, planted)

	m = startManager()
	if err := appService.setReplicas(ctx, appService.newCR(ns, name, 0), 2); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-app"}, d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
			return errors.New("the edit has not applied: the Deployment does not ask for 2 replicas")
		}
		return nil
	})

	if err := env.Client.List(ctx, records, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	keys.RefuseLegacy = true
	for i := range records.Items {
		r := &records.Items[i]
		err := keys.VerifyMetadata(ns, r)
		switch {
		case r.Name == planted.Name && !errors.Is(err, releasesign.ErrLegacyLayout):
			t.Errorf("the planted record: %v, want refused for its layout", err)
		case r.Name != planted.Name && err != nil:
			t.Errorf("record %s after the upgrade, on metadata: %v", r.Name, err)
		}
	}
	out, _ := m.Output()
	if !strings.Contains(out, "re-signed release records of an earlier version") {
		t.Error("the manager did not log the records it re-signed")
	}
}
