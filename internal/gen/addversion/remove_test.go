package addversion

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/gen/repofiles"
)

func TestCheckNotStored(t *testing.T) {
	if err := CheckNotStored("v1alpha1", []string{"v1beta1", "v1"}); err != nil {
		t.Errorf("v1alpha1 not stored: %v", err)
	}
	if err := CheckNotStored("v1alpha1", nil); err != nil {
		t.Errorf("nothing stored: %v", err)
	}
	err := CheckNotStored("v1alpha1", []string{"v1alpha1", "v1"})
	if err == nil || !strings.Contains(err.Error(), "status.storedVersions (v1alpha1, v1) lists v1alpha1") {
		t.Errorf("v1alpha1 stored: error %v, want a refusal naming the stored versions", err)
	}
}

func TestRemove(t *testing.T) {
	root := shopRepo(t)
	for _, o := range []Options{
		{Root: root, Kind: "Shop", Version: "v1beta1", Chart: "testdata/shop-v1beta1", Manifests: generate},
		{Root: root, Kind: "Shop", Version: "v1", Manifests: generate},
	} {
		if _, err := Add(o); err != nil {
			t.Fatal(err)
		}
	}
	chart := filepath.Join(root, "helm-charts", "shop")
	if err := os.WriteFile(filepath.Join(chart, "versions", crdgen.DeprecatedFile), []byte("v1alpha1: gone soon\nv1beta1: \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(root); err != nil {
		t.Fatal(err)
	}

	for version, want := range map[string]string{
		"v1":       "is the newest version",
		"v1beta1":  "is not the oldest version",
		"v2":       "is not a version of Shop",
		"v1alpha1": "status.storedVersions",
	} {
		before := tree(t, root)
		_, err := Remove(RemoveOptions{Root: root, Kind: "Shop", Version: version, StoredVersions: []string{"v1alpha1", "v1"}, Manifests: generate})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("removing %s: error %v, want one saying %q", version, err, want)
		}
		if changed := repofiles.Changed(before, tree(t, root)); len(changed) > 0 {
			t.Errorf("a refused remove-version changed %v", changed)
		}
	}

	if _, err := Remove(RemoveOptions{Root: root, Kind: "Shop", Version: "v1alpha1", StoredVersions: []string{"v1"}, Manifests: generate}); err != nil {
		t.Fatal(err)
	}
	wantConversions := conversionsHeader + "\n# make add-version v1: nothing moves, v1 has the schema of v1beta1.\n- from: v1beta1\n  to: v1\n"
	if got := readFile(t, filepath.Join(chart, "conversions.yaml")); got != wantConversions {
		t.Errorf("conversions.yaml:\n%s\nwant:\n%s", got, wantConversions)
	}
	if _, err := os.Stat(filepath.Join(chart, "versions", crdgen.SchemaFile("v1alpha1"))); !os.IsNotExist(err) {
		t.Errorf("v1alpha1's schema is still there: %v", err)
	}
	if got := readFile(t, filepath.Join(chart, "versions", crdgen.DeprecatedFile)); got != "v1beta1: \"\"\n" {
		t.Errorf("deprecated.yaml: %q", got)
	}
	vs := readCRD(t, root).Spec.Versions
	if len(vs) != 2 || vs[0].Name != "v1beta1" || !vs[0].Deprecated || vs[1].Name != "v1" {
		t.Errorf("versions %+v, want v1beta1 (deprecated) and v1", vs)
	}
	checkIdempotent(t, root)

	// The last older version takes conversions.yaml and versions/ with it.
	if _, err := Remove(RemoveOptions{Root: root, Kind: "Shop", Version: "v1beta1", Manifests: generate}); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"conversions.yaml", "versions"} {
		if _, err := os.Stat(filepath.Join(chart, gone)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", gone, err)
		}
	}
	if crd := readCRD(t, root); len(crd.Spec.Versions) != 1 || crd.Spec.Conversion != nil {
		t.Errorf("CRD versions %+v, conversion %+v: want v1 alone, no conversion", crd.Spec.Versions, crd.Spec.Conversion)
	}
	_, err := Remove(RemoveOptions{Root: root, Kind: "Shop", Version: "v1", Manifests: generate})
	if err == nil || !strings.Contains(err.Error(), "has one version") {
		t.Errorf("error %v, want one saying Shop has one version", err)
	}
	checkIdempotent(t, root)
}
