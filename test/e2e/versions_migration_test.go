package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addversion"
	chartrollout "transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// A new version of a kind's API, with the chart kept, rolls out no chart, and its storage
// migration upgrades nothing: the CRs of KeyValue are Ready at v1alpha1; make add-version
// VERSION=v1 keeps the chart (the CRD converts by None) but writes the kind's version
// history, conversions.yaml and versions/, into the chart directory; the operator, restarted
// on it, migrates the stored CRs to v1 (status.storedVersions [v1]) and, asked to reconcile
// each CR, has upgraded its release once, for the owner references of its objects, which
// name the CR at the version the operator watches (v1 from now on, before v1alpha1 is ever
// removed): the new revision's manifest is the old one with the CR's apiVersion at v1, and
// nothing else; its chart is the same chart (rollout.Digest), without the version history.
func TestNewVersionMovesOnlyOwnerReferences(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("make add-kind and make add-version make kinds for this operator's manager")
	}
	ctx := context.Background()
	manifest := filepath.Join("testdata", "keyvalue", "v1alpha1.yaml")
	dir := repoCopy(t)
	plural := addkind.Plural(keyValueGVK.Kind)

	// The kind at v1alpha1, its CRs Ready.
	if _, err := addkind.Add(addkind.Options{Root: dir, Chart: filepath.Join(env.Root, "internal", "gen", "addversion", "testdata", "keyvalue"),
		Kind: keyValueGVK.Kind, Group: keyValueGVK.Group, Version: keyValueGVK.Version, Manifests: manifests}); err != nil {
		t.Fatalf("make add-kind: %v", err)
	}
	installGeneratedCRD(t, dir, keyValueGVK.Group, plural)
	if env.Impersonating() {
		grantGeneratedRole(t, dir)
	}
	stop := startKeyValueOperator(t, dir, nil)
	ns := env.Namespace(t)
	var crs []*unstructured.Unstructured
	running := true // whether a manager runs: deleting a CR then uninstalls its release
	t.Cleanup(func() { deleteKeyValues(t, crs, running) })
	if out, err := env.Kubectl("apply", "-n", ns, "-f", manifest); err != nil {
		t.Fatalf("kubectl apply of the v1alpha1 manifests: %v: %s", err, out)
	}
	releases := map[string]*release.Release{} // name -> its release at v1alpha1
	for _, cr := range readManifests(t, manifest) {
		cr.SetNamespace(ns)
		crs = append(crs, cr)
		waitCondition(t, cr, statuscontract.Ready, "True")
		rel, err := deployedRelease(ctx, ns, cr.GetName())
		if err != nil {
			t.Fatal(err)
		}
		releases[cr.GetName()] = rel
	}
	stop()
	running = false

	// v1, the same chart: the CRD stores v1 from now on.
	if _, err := addversion.Add(addversion.Options{Root: dir, Kind: keyValueGVK.Kind, Version: "v1", Manifests: manifests}); err != nil {
		t.Fatalf("make add-version: %v", err)
	}
	crd := readGeneratedCRD(t, dir, keyValueGVK.Group, plural)
	if c := crd.Spec.Conversion; c != nil && c.Strategy != apiextensionsv1.NoneConverter {
		t.Fatalf("the CRD's conversion is %+v, want None: the versions have one schema", c)
	}
	if err := env.Client.Patch(ctx, crd, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
		t.Fatalf("applying the CRD of two versions: %v", err)
	}
	if env.Impersonating() {
		grantGeneratedRole(t, dir) // with the storage migration's rights on the CRD
	}
	startKeyValueOperator(t, dir, nil)
	running = true
	t.Cleanup(func() { deleteKeyValues(t, crs, true); running = false }) // before the processes stop

	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), live); err != nil {
			return err
		}
		if !slices.Equal(live.Status.StoredVersions, []string{"v1"}) {
			return fmt.Errorf("storedVersions %v, want [v1]", live.Status.StoredVersions)
		}
		return nil
	})

	// Each CR reconciled by the restarted manager after the migration, upgraded once.
	requested := time.Now().UTC().Format(time.RFC3339Nano)
	for _, cr := range crs {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statuscontract.RequestAnnotation, requested)
		if err := env.Client.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	for _, cr := range crs {
		framework.Eventually(t, converge, func(ctx context.Context) error {
			got, err := getCR(ctx, cr)
			if err != nil {
				return err
			}
			if handled, _, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); handled != requested {
				return fmt.Errorf("%s: status.lastHandledReconcileAt %q, want %q", cr.GetName(), handled, requested)
			}
			return nil
		})
		waitCondition(t, cr, statuscontract.ChartRollout, "True")
		rel, err := deployedRelease(ctx, ns, cr.GetName())
		if err != nil {
			t.Fatal(err)
		}
		old := releases[cr.GetName()]
		if rel.Version != old.Version+1 {
			t.Errorf("%s: release revision %d after make add-version and the storage migration, want %d (one upgrade, for the owner references)",
				cr.GetName(), rel.Version, old.Version+1)
		}
		ownedAtV1 := strings.ReplaceAll(old.Manifest, keyValueGVK.GroupVersion().String(), keyValueGVK.Group+"/v1")
		if ownedAtV1 == old.Manifest || rel.Manifest != ownedAtV1 {
			t.Errorf("%s: the new revision's manifest is not the old one with the CR's apiVersion at v1:\n%s\nwas:\n%s", cr.GetName(), rel.Manifest, old.Manifest)
		}
		if got, want := chartrollout.Digest(rel.Chart), chartrollout.Digest(old.Chart); got != want {
			t.Errorf("%s: the new revision's chart has digest %s, the old one's %s: want the same chart", cr.GetName(), got, want)
		}
		t.Logf("%s: revision %d, then %d on the same chart (%s); the objects' owner references moved to v1", cr.GetName(), old.Version, rel.Version,
			chartrollout.Digest(rel.Chart))
		for _, f := range rel.Chart.Files {
			if conversion.IsVersionHistory(f.Name) {
				t.Errorf("%s: the new revision's chart carries the kind's version history (%s)", cr.GetName(), f.Name)
			}
		}
	}
}
