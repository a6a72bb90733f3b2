package operator

import (
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(configMapGVK, meta.RESTScopeNamespace)
	m.Add(storageClassGVK, meta.RESTScopeRoot)
	m.Add(clusterRoleGVK, meta.RESTScopeRoot)
	return m
}

// What takeOver accepts of an unsigned record's manifests is what confinedKube would apply.
func TestConfinedManifest(t *testing.T) {
	sc := []schema.GroupKind{storageClassGVK.GroupKind()}
	cm := func(ns string) string {
		s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
		if ns != "" {
			s += "  namespace: " + ns + "\n"
		}
		return "---\n" + s
	}
	cases := []struct {
		name, manifest, refuse string
		kinds                  []schema.GroupKind
	}{
		{"no namespace", cm(""), "", nil},
		{"own namespace", cm("t1"), "", nil},
		{"another namespace", cm("t1") + cm("t2"), "outside the release's namespace", nil},
		{"declared StorageClass", "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: s\n", "", sc},
		{"undeclared StorageClass", "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: s\n", "not a kind this chart renders", nil},
		{"ClusterRole", "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n", "not a kind", sc},
		{"unknown kind", "---\napiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: r\n", "example.com", sc},
	}
	for _, tc := range cases {
		err := confinedManifest(testMapper(), "t1", tc.kinds, tc.manifest)
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.refuse)
		}
	}
}

// A pending revision is repaired only when no live operation can hold it.
func TestMayRepair(t *testing.T) {
	now := time.Now()
	pending := func(age time.Duration) *release.Release {
		return &release.Release{Info: &release.Info{Status: release.StatusPendingUpgrade, LastDeployed: helmtime.Time{Time: now.Add(-age)}}}
	}
	key := releaseKey("t1", "x")

	noElection := newOperations()
	if noElection.mayRepair(key, pending(time.Hour), now) {
		t.Error("repaired without leader election")
	}

	ops := newOperations()
	ops.elected(now.Add(-time.Minute))
	if !ops.mayRepair(key, pending(2*time.Minute), now) {
		t.Error("a revision begun before this process led was not repaired")
	}
	if ops.mayRepair(key, pending(30*time.Second), now) {
		t.Error("a revision begun since this process leads, not by it, was repaired (another manager's live operation)")
	}
	if !ops.mayRepair(key, pending(staleAfter+time.Second), now) {
		t.Error("a revision older than any operation was not repaired")
	}
	done := ops.start(key)
	if ops.mayRepair(key, pending(time.Hour), now) {
		t.Error("repaired under this process's running operation")
	}
	done()
	if !ops.mayRepair(key, pending(30*time.Second), now) {
		t.Error("this process's own ended operation was not repaired")
	}
	ops.forget(key)
	if ops.mayRepair(key, pending(30*time.Second), now) {
		t.Error("a forgotten release still counts as this process's own")
	}
}
