package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addversion"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// A new version of a kind's API, and the storage migration it brings, make no new Helm
// revision: the CRs of KeyValue are Ready at v1alpha1; make add-version VERSION=v1 keeps the
// chart (the CRD converts by None) but writes the kind's version history, conversions.yaml
// and versions/, into the chart directory; the operator, restarted on it, migrates the
// stored CRs to v1 (status.storedVersions [v1]) and, asked to reconcile each CR, finds its
// release on the chart it carries (ChartRollout True) at the revision it had.
func TestNewVersionUpgradesNoRelease(t *testing.T) {
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
	revisions := map[string]int{} // name -> its release's revision at v1alpha1
	for _, cr := range readManifests(t, manifest) {
		cr.SetNamespace(ns)
		crs = append(crs, cr)
		waitCondition(t, cr, statuscontract.Ready, "True")
		rel, err := deployedRelease(ctx, ns, cr.GetName())
		if err != nil {
			t.Fatal(err)
		}
		revisions[cr.GetName()] = rel.Version
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

	// Each CR reconciled by the restarted manager, after the migration, on its revision.
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
		if want := revisions[cr.GetName()]; rel.Version != want {
			t.Errorf("%s: release revision %d after make add-version and the storage migration, want %d as before", cr.GetName(), rel.Version, want)
		}
	}
}
