package security

import (
	"context"
	"fmt"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// attack is one attack on release records: the tenant's AppService is deployed, plant
// changes the records, then the tenant edits the CR (an upgrade) and deletes it (an
// uninstall). It returns what went wrong: anything changed outside the tenant's namespace,
// the CR's own release no longer working, no Event naming the refused record.
type attack struct {
	// plant acts on the records of release cr as the tenant, and returns the Secret the
	// operator must refuse ("" for none).
	plant func(t *testing.T, tn *tenant, cr *unstructured.Unstructured, rev int64) (refused string)
	// editApplies: the CR's spec edit must reach its Deployment despite the attack (the
	// release goes on from the operator's own records).
	editApplies bool
	// noEdit: the CR is deleted right after the attack, so that the uninstall starts from
	// the planted record (an edit would first upgrade past it).
	noEdit bool
}

// deployedAppService is a new tenant with an AppService x, once its release is deployed,
// and the release's revision.
func deployedAppService(t *testing.T) (*tenant, *unstructured.Unstructured, int64) {
	tn := newTenant(t)
	cr := appService(tn.ns, "x", "x-app", 1)
	if err := tn.client.Create(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	rev, err := deployed(cr, 1)
	if err != nil {
		t.Fatal(err)
	}
	return tn, cr, rev
}

func (a attack) run(t *testing.T) {
	tn, cr, rev := deployedAppService(t)
	before := outside(t, tn.ns)
	refused := a.plant(t, tn, cr, rev)

	var v []string
	check := func(what string, err error) {
		if err != nil {
			v = append(v, what+": "+err.Error())
		}
	}
	if !a.noEdit {
		tn.setReplicas(t, cr, 2)
	}
	if a.editApplies {
		check("the CR's edit", deploymentReplicas(tn.ns, "x-app", 2))
	}
	if a.noEdit {
		check("deleting the CR", tn.deleteAndWait(cr))
	}
	if refused != "" && !stock {
		check("the report", refusedEvent(cr, refused))
	}
	if !a.noEdit {
		check("deleting the CR", tn.deleteAndWait(cr))
	}
	v = append(v, before.diff(outside(t, tn.ns))...)
	report(t, v)
}

// forge returns a plant that writes the forged record f as the tenant.
func forge(f forged) func(*testing.T, *tenant, *unstructured.Unstructured, int64) string {
	return func(t *testing.T, tn *tenant, cr *unstructured.Unstructured, rev int64) string {
		f.name, f.chart = cr.GetName(), "appservice"
		if f.version == 0 {
			f.version = int(rev) + 5
		}
		s := f.secret(tn.ns)
		if err := tn.client.Create(context.Background(), s); err != nil {
			t.Fatalf("the tenant could not write a release record: %v", err)
		}
		return s.Name
	}
}

// A deployed record of a higher revision whose manifest lists a ConfigMap of another
// namespace: Helm would delete it on the upgrade (it is not in the new manifest) and on the
// uninstall.
func TestForgedDeployedRecordNamingAnotherNamespace(t *testing.T) {
	vns, vcm := victim(t)
	attack{plant: forge(forged{status: release.StatusDeployed, manifest: configMapYAML(vns, vcm)}), editApplies: true}.run(t)
}

// A deployed record whose pre-delete hooks create objects in another namespace and in
// kube-system, and whose manifest names another namespace's ConfigMap; the tenant then deletes
// the CR, so that the uninstall starts from the forged record.
func TestForgedRecordWithHooks(t *testing.T) {
	vns, vcm := victim(t)
	hook := func(ns, name string, event release.HookEvent) *release.Hook {
		return &release.Hook{Name: name, Kind: "ConfigMap", Path: "templates/" + name + ".yaml",
			Manifest: configMapYAML(ns, name), Events: []release.HookEvent{event}}
	}
	attack{plant: forge(forged{status: release.StatusDeployed, manifest: configMapYAML(vns, vcm),
		hooks: []*release.Hook{
			hook(vns, "pre-delete-planted", release.HookPreDelete),
			hook("kube-system", "pre-delete-planted", release.HookPreDelete),
		}}), noEdit: true}.run(t)
}

// A pending record of a higher revision: Helm refuses every operation while a release is
// pending ("another operation is in progress"), and a repair that marked it failed would
// then act on its manifest.
func TestForgedPendingRecord(t *testing.T) {
	vns, vcm := victim(t)
	attack{plant: forge(forged{status: release.StatusPendingUpgrade, manifest: configMapYAML(vns, vcm)}), editApplies: true}.run(t)
}

// A superseded record at the revision just below the next one: what a rollback would return to.
func TestForgedSupersededRecord(t *testing.T) {
	vns, vcm := victim(t)
	attack{plant: forge(forged{status: release.StatusSuperseded, manifest: configMapYAML(vns, vcm)}), editApplies: true}.run(t)
}

// A deployed record whose manifest lists a cluster-scoped object the AppService chart never
// renders: a StorageClass of the cluster admin.
func TestForgedRecordNamingClusterScopedKind(t *testing.T) {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "security-admins-" + rand.String(5)}, Provisioner: "example.com/none"}
	if err := env.Client.Create(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	manifest := fmt.Sprintf("---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: %s\nprovisioner: example.com/none\n", sc.Name)
	attack{plant: forge(forged{status: release.StatusDeployed, manifest: manifest}), editApplies: true}.run(t)
}

// The operator's own latest record, altered: its manifest now also lists a ConfigMap of
// another namespace. The operator no longer trusts that record (it is as if deleted).
func TestTamperedRecord(t *testing.T) {
	vns, vcm := victim(t)
	attack{plant: func(t *testing.T, tn *tenant, cr *unstructured.Unstructured, rev int64) string {
		ctx := context.Background()
		s := &corev1.Secret{}
		key := client.ObjectKey{Namespace: tn.ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", cr.GetName(), rev)}
		if err := tn.client.Get(ctx, key, s); err != nil {
			t.Fatal(err)
		}
		rel, err := driver.NewSecrets(env.Clientset.CoreV1().Secrets(tn.ns)).Get(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		rel.Manifest += configMapYAML(vns, vcm)
		s.Data["release"] = []byte(encodeRelease(rel))
		if err := tn.client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s.Name
	}}.run(t)
}

// Every record of the release deleted: the operator installs the release again, adopting
// its objects, and nothing else.
func TestDeletedRecords(t *testing.T) {
	attack{plant: func(t *testing.T, tn *tenant, cr *unstructured.Unstructured, _ int64) string {
		err := tn.client.DeleteAllOf(context.Background(), &corev1.Secret{}, client.InNamespace(tn.ns),
			client.MatchingLabels{"owner": "helm", "name": cr.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		return ""
	}, editApplies: true}.run(t)
}

// The tenant relabels its release's deployed record "superseded", the status of the records
// Helm's pruning of the history deletes at each upgrade, and then deletes it. The label is
// signed, so the operator still takes it for the deletion of the release's current record and
// installs the release again at once, not at the CR's next event or periodic reconcile.
func TestCurrentRecordRelabelledThenDeleted(t *testing.T) {
	tn, cr, rev := deployedAppService(t)
	ctx := context.Background()
	before := outside(t, tn.ns)
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: tn.ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", cr.GetName(), rev)}
	if err := tn.client.Get(ctx, key, s); err != nil {
		t.Fatal(err)
	}
	s.Labels["status"] = release.StatusSuperseded.String()
	if err := tn.client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := tn.client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	var v []string
	if _, err := deployed(cr, 1); err != nil {
		v = append(v, "the release put back: "+err.Error())
	}
	if err := tn.deleteAndWait(cr); err != nil {
		v = append(v, "deleting the CR: "+err.Error())
	}
	v = append(v, before.diff(outside(t, tn.ns))...)
	report(t, v)
}

// A record planted before its CR exists, naming another namespace's ConfigMap: when the
// tenant then creates the CR, Helm would take the planted record as its release and upgrade
// (and later uninstall) from it. The operator refuses the record and, as for a release another
// tool made under the CR's name, installs nothing over it: the CR is Stalled
// ReleaseNameTaken, and nothing outside the namespace changes, through its deletion too.
func TestRecordPlantedBeforeItsCR(t *testing.T) {
	tn := newTenant(t)
	vns, vcm := victim(t)
	ctx := context.Background()
	before := outside(t, tn.ns)
	f := forged{name: "later", chart: "appservice", version: 3, status: release.StatusDeployed, manifest: configMapYAML(vns, vcm)}
	planted := f.secret(tn.ns)
	if err := tn.client.Create(ctx, planted); err != nil {
		t.Fatal(err)
	}
	cr := appService(tn.ns, "later", "later-app", 1)
	if err := tn.client.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	var v []string
	if !stock {
		if err := refusedEvent(cr, planted.Name); err != nil {
			v = append(v, err.Error())
		}
		err := framework.Poll(ctx, time.Minute, func(ctx context.Context) error {
			got := cr.DeepCopy()
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
				return err
			}
			if s, reason, _ := framework.Condition(got, statuscontract.Stalled); s != "True" || reason != statuscontract.ReasonReleaseNameTaken {
				return fmt.Errorf("Stalled=%q (%s), want True %s", s, reason, statuscontract.ReasonReleaseNameTaken)
			}
			return nil
		})
		if err != nil {
			v = append(v, "the CR named after the planted record: "+err.Error())
		}
	} else if _, err := deployed(cr, 1); err != nil {
		v = append(v, "the CR's release: "+err.Error())
	}
	if err := tn.deleteAndWait(cr); err != nil {
		v = append(v, "deleting the CR: "+err.Error())
	}
	report(t, append(v, before.diff(outside(t, tn.ns))...))
}
