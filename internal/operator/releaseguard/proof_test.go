package releaseguard

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/manifest"
	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// postRenderFunc is a post-renderer made of a func, standing for helm-operator-plugins'.
type postRenderFunc func(*bytes.Buffer) (*bytes.Buffer, error)

func (f postRenderFunc) Run(in *bytes.Buffer) (*bytes.Buffer, error) { return f(in) }

// scopedReader drops the namespace of a key for a cluster-scoped kind, as the manager's API
// reader does (the fake client keeps it, and finds nothing).
type scopedReader struct{ client.WithWatch }

func (r scopedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if namespaced, err := r.IsObjectNamespaced(obj); err == nil && !namespaced {
		key.Namespace = ""
	}
	return r.WithWatch.Get(ctx, key, obj, opts...)
}

// TestOwnershipProof: an object the release would adopt is taken only when an owner reference
// to the CR by UID (namespaced) or the CR's owner annotations (cluster-scoped) prove it the
// release's; Helm's own annotations, which anyone who may write the object sets, prove
// nothing. The objects the release has already are not adoptions.
func TestOwnershipProof(t *testing.T) {
	cr := actiontest.AppServiceCR()
	cr.SetUID("uid-of-x")
	helmAnnotations := map[string]string{ownership.HelmReleaseNameAnnotation: "x", ownership.HelmReleaseNamespaceAnnotation: "team-a"}
	configMap := func(name string, owner types.UID) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name,
			Annotations: helmAnnotations, Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"}}}
		if owner != "" {
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "appcontroller.k8s.io/v1alpha1",
				Kind: "AppService", Name: "x", UID: owner}}
		}
		return cm
	}
	ownerAnnotations := map[string]string{ownership.OwnerNameAnnotation: "team-a/x", ownership.OwnerTypeAnnotation: "AppService.appcontroller.k8s.io",
		ownership.HelmReleaseNameAnnotation: "x", ownership.HelmReleaseNamespaceAnnotation: "team-a"}
	const cmManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x-config\n"
	const scManifest = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: x-class\n"

	cases := []struct {
		name     string
		existing []client.Object
		manifest string
		known    []manifest.Head // nil: an install
		deployed bool            // the CR's status proves the operator deployed the release
		refused  string          // the object named in the refusal, or "" if passed
	}{
		{name: "absent: created", manifest: cmManifest},
		{name: "another tool's, by Helm's annotations", existing: []client.Object{configMap("x-config", "")},
			manifest: cmManifest, refused: "ConfigMap team-a/x-config"},
		{name: "owned by the CR", existing: []client.Object{configMap("x-config", "uid-of-x")}, manifest: cmManifest},
		{name: "owned by an earlier CR of the name", existing: []client.Object{configMap("x-config", "uid-of-a-deleted-x")},
			manifest: cmManifest, refused: "ConfigMap team-a/x-config"},
		{name: "the release's already (upgrade)", existing: []client.Object{configMap("x-config", "")}, manifest: cmManifest,
			known: []manifest.Head{{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Name: "x-config"}}},
		{name: "new in the upgrade, another tool's", existing: []client.Object{configMap("x-config", "")}, manifest: cmManifest,
			known:   []manifest.Head{{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Name: "x-other"}},
			refused: "ConfigMap team-a/x-config"},
		{name: "the operator's release, its owner references removed by a person's helm upgrade",
			existing: []client.Object{configMap("x-config", "")}, manifest: cmManifest, deployed: true},
		{name: "another release's object: Helm refuses it itself", manifest: cmManifest,
			existing: []client.Object{func() client.Object {
				cm := configMap("x-config", "")
				cm.Annotations = map[string]string{ownership.HelmReleaseNameAnnotation: "y", ownership.HelmReleaseNamespaceAnnotation: "team-a"}
				return cm
			}()}},
		{name: "cluster-scoped, the CR's by its owner annotations", existing: []client.Object{actiontest.StorageClass("x-class", ownerAnnotations)},
			manifest: scManifest},
		{name: "cluster-scoped, Helm's annotations only", existing: []client.Object{actiontest.StorageClass("x-class", helmAnnotations)},
			manifest: scManifest, refused: "StorageClass x-class"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
			mapper.Add(actiontest.StorageClassGVK, meta.RESTScopeRoot)
			live := scopedReader{fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithRESTMapper(mapper).
				WithObjects(tc.existing...).Build()}
			ranBefore := false
			p := ownershipProof{live: live, cr: cr, step: "install", byAnnotations: tc.deployed,
				PostRenderer: postRenderFunc(func(in *bytes.Buffer) (*bytes.Buffer, error) {
					ranBefore = true
					return bytes.NewBufferString(in.String() + "---\n"), nil
				})}
			if tc.known != nil {
				p.step = "upgrade"
				p.known = func() ([]manifest.Head, error) { return tc.known, nil }
			}
			out, err := p.Run(bytes.NewBufferString(tc.manifest))
			if !ranBefore {
				t.Fatal("the post-renderer before did not run")
			}
			failure, refused := refusal.Of(err)
			if tc.refused == "" {
				if err != nil || out.String() != tc.manifest+"---\n" {
					t.Fatalf("Run = %q, %v; want what the post-renderer before made", out, err)
				}
				return
			}
			if !refused || failure.Reason != statuscontract.ReasonObjectNotOwned || failure.Step != p.step ||
				!strings.Contains(failure.Message, tc.refused+" exist(s)") {
				t.Fatalf("Run: %v (%+v); want refused %s naming %s", err, failure, statuscontract.ReasonObjectNotOwned, tc.refused)
			}
		})
	}
}

// TestAdoptsByAnnotations: Helm's annotations prove a release's objects only where they name
// the operator's release: the CR's status says the operator deployed it, or the CR existed
// when the operator first ran in the cluster (a restore without records or key). A CR a
// tenant creates after must prove its objects otherwise.
func TestAdoptsByAnnotations(t *testing.T) {
	first := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	firstRun := func(context.Context) (time.Time, error) { return first, nil }
	cases := []struct {
		name     string
		created  time.Time
		deployed string // status.deployedRelease.name
		checks   Checks
		want     bool
	}{
		{"created after the first run", first.Add(time.Hour), "", Checks{FirstRun: firstRun}, false},
		{"created before the first run (restored)", first.Add(-time.Hour), "", Checks{FirstRun: firstRun}, true},
		{"created in the first run's second", first, "", Checks{FirstRun: firstRun}, true},
		{"deployed by the operator", first.Add(time.Hour), "x", Checks{FirstRun: firstRun}, true},
		{"another release deployed", first.Add(time.Hour), "y", Checks{FirstRun: firstRun}, false},
		{"first run not checked", first.Add(-time.Hour), "", Checks{}, false},
	}
	for _, tc := range cases {
		cr := actiontest.AppServiceCR().(*unstructured.Unstructured)
		cr.SetCreationTimestamp(metav1.NewTime(tc.created))
		if tc.deployed != "" {
			_ = unstructured.SetNestedField(cr.Object, tc.deployed, "status", "deployedRelease", "name")
		}
		got, err := guardedClient{cr: cr, checks: tc.checks}.adoptsByAnnotations("x")
		if err != nil || got != tc.want {
			t.Errorf("%s: adoptsByAnnotations = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
