package security

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// Upgrading from a version that did not sign its records: the releases it made are taken
// over, once, when the new version first runs; a record that no CR accounts for is not, and
// is refused from then on. The earlier version is played by the stock helm-operator, whose
// records are the same (helm-operator-plugins' Secrets driver, unsigned).
func TestTakeOverOfUnsignedRecords(t *testing.T) {
	if stock {
		t.Skip("the take-over is this operator's")
	}
	tn := newTenant(t)
	vns, vcm := victim(t)
	ctx := context.Background()

	// The earlier version runs, instead of the suite's manager.
	manager.Stop()
	t.Cleanup(func() {
		if err := startManager(); err != nil {
			t.Fatal(err)
		}
	})
	lease := "security-takeover-" + rand.String(5)
	stockOptions := processOptions("security-takeover-stock", lease)
	stockOptions.Stock = true
	earlier, err := env.StartManager(stockOptions)
	if err != nil {
		t.Fatal(err)
	}
	kept := appService(tn.ns, "kept", "kept-app", 1)
	if err := tn.client.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if _, err := deployed(kept, 1); err != nil {
		t.Fatal(err)
	}
	earlier.Stop()

	// Before the upgrade, the tenant plants a record for a CR that does not exist yet.
	ghost := forged{name: "ghost", chart: "appservice", version: 3, status: release.StatusDeployed, manifest: configMapYAML(vns, vcm)}.secret(tn.ns)
	if err := tn.client.Create(ctx, ghost); err != nil {
		t.Fatal(err)
	}
	// And records that decompress and decode into far more than they weigh: 60 MiB of values
	// (a few KiB of gzip) and 15 MiB of them, each {} a map once decoded.
	bombs := map[string]int{"bomb-large": 60 << 20, "bomb-wide": 15 << 20}
	for name, size := range bombs {
		if err := tn.client.Create(ctx, bombRecord(tn.ns, name, size)); err != nil {
			t.Fatal(err)
		}
	}
	before := outside(t, tn.ns)

	// The new version, with a key of its own: the first run of this version in a cluster.
	keyName := "takeover-key-" + rand.String(5)
	upgraded, err := env.StartManager(processOptions("security-takeover-manager", lease,
		"--release-signing-key="+env.LeaseNamespace+"/"+keyName))
	if err != nil {
		t.Fatal(err)
	}
	defer upgraded.Stop()

	// The earlier release is the operator's now: an edit upgrades it to revision 2.
	tn.setReplicas(t, kept, 2)
	if _, err := deployed(kept, 2); err != nil {
		t.Fatalf("the taken-over release was not upgraded: %v", err)
	}
	if err := deploymentReplicas(tn.ns, "kept-app", 2); err != nil {
		t.Fatal(err)
	}
	key := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.LeaseNamespace, Name: keyName}, key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), key) })
	if got := key.Annotations["warpdrive.transwarp.io/unsigned-records-taken-over"]; !strings.Contains(got, "signed") {
		t.Errorf("the key does not record the take-over: %q", got)
	}
	rec := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "sh.helm.release.v1.kept.v1"}, rec); err != nil {
		t.Fatal(err)
	}
	if err := releasesign.Key(key.Data["key"]).Verify(tn.ns, rec); err != nil {
		t.Errorf("the earlier version's record of kept was not signed: %v", err)
	}
	for name := range bombs {
		bomb := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "sh.helm.release.v1." + name + ".v1"}, bomb); err != nil {
			t.Fatal(err)
		}
		if _, signed := bomb.Annotations[releasesign.SignatureAnnotation]; signed {
			t.Errorf("the record %s was taken over", name)
		}
	}
	if upgraded.Exited() {
		t.Fatal("the manager exited during the take-over")
	}
	if peak := peakRSS(t, upgraded.Pid()); peak > maxTakeOverPeak {
		t.Errorf("the manager's peak RSS through the take-over of the bombs: %.0f MiB, want at most %d", peak, maxTakeOverPeak)
	} else {
		t.Logf("the manager's peak RSS through the take-over of the bombs: %.0f MiB", peak)
	}

	// The planted record is not: when its CR comes, the operator refuses the record and, as
	// with a release another tool made under that name, installs nothing over it (Stalled
	// ReleaseNameTaken) until the record is gone.
	ghostCR := appService(tn.ns, "ghost", "ghost-app", 1)
	if err := tn.client.Create(ctx, ghostCR); err != nil {
		t.Fatal(err)
	}
	if err := refusedEvent(ghostCR, ghost.Name); err != nil {
		t.Error(err)
	}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		got := ghostCR.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ghostCR), got); err != nil {
			return err
		}
		if s, _, msg := framework.Condition(got, "ReleaseRecordRefused"); s != "True" || !strings.Contains(msg, ghost.Name) {
			return fmt.Errorf("ReleaseRecordRefused=%q: %s", s, msg)
		}
		if s, reason, _ := framework.Condition(got, statuscontract.Stalled); s != "True" || reason != statuscontract.ReasonReleaseNameTaken {
			return fmt.Errorf("Stalled=%q (%s), want True %s", s, reason, statuscontract.ReasonReleaseNameTaken)
		}
		return nil
	})
	if err := tn.deleteAndWait(kept); err != nil {
		t.Error(err)
	}
	if err := tn.deleteAndWait(ghostCR); err != nil {
		t.Error(err)
	}
	for _, d := range before.diff(outside(t, tn.ns)) {
		if !strings.Contains(d, keyName) {
			t.Error(d)
		}
	}
}

// maxTakeOverPeak bounds the peak RSS of a manager that takes over the bombs of
// TestTakeOverOfUnsignedRecords, in MiB: decoded into maps, their values would take more than
// a GiB.
const maxTakeOverPeak = 256

// bombRecord is an unsigned record of release name whose release is size bytes of JSON, most
// of it values: an array of empty objects, which gzip packs into a few KiB.
func bombRecord(ns, name string, size int) *corev1.Secret {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	head := fmt.Sprintf(`{"name":%q,"namespace":%q,"version":1,"chart":{"metadata":{"name":"appservice"}},"config":{"a":[{}`, name, ns)
	_, _ = w.Write([]byte(head))
	chunk := bytes.Repeat([]byte(",{}"), 1<<16)
	for n := len(head); n < size; n += len(chunk) {
		_, _ = w.Write(chunk)
	}
	_, _ = w.Write([]byte("]}}"))
	_ = w.Close()
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sh.helm.release.v1." + name + ".v1",
			Labels: map[string]string{"owner": "helm", "name": name, "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))},
	}
}
