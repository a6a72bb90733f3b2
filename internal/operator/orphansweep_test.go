package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage/driver"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/scheme"
	restfake "k8s.io/client-go/rest/fake"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func poolCR(deleted bool, manifest string) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("tos.transwarp.io/v1alpha1")
	cr.SetKind("WarpdrivePool")
	cr.SetNamespace("team-a")
	cr.SetName("x")
	if deleted {
		now := metav1.Now()
		cr.SetDeletionTimestamp(&now)
	}
	if manifest != "" {
		_ = unstructured.SetNestedField(cr.Object, manifest, "status", "deployedRelease", "manifest")
	}
	return cr
}

func TestOwnedBy(t *testing.T) {
	cr := poolCR(false, "")
	owner := map[string]string{ownerNameAnnotation: "team-a/x", ownerTypeAnnotation: "WarpdrivePool.tos.transwarp.io"}
	if !ownedBy(owner, cr) {
		t.Error("the CR's own object: not owned")
	}
	for name, annotations := range map[string]map[string]string{
		"another kind's CR of the same name": {ownerNameAnnotation: "team-a/x", ownerTypeAnnotation: "AppService.appcontroller.k8s.io"},
		"another namespace's CR":             {ownerNameAnnotation: "team-b/x", ownerTypeAnnotation: "WarpdrivePool.tos.transwarp.io"},
		"not the operator's":                 {"meta.helm.sh/release-name": "x", "meta.helm.sh/release-namespace": "team-a"},
		"no annotations":                     nil,
	} {
		if ownedBy(annotations, cr) {
			t.Errorf("%s: owned", name)
		}
	}
}

// storageClassServer is a fake API for StorageClasses: GET returns those it has, DELETE
// removes them; every request is recorded.
type storageClassServer struct {
	classes  map[string]map[string]string // name -> annotations
	requests []string
}

func (s *storageClassServer) info(name string) *resource.Info {
	client := &restfake.RESTClient{
		NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
		Client: restfake.CreateHTTPClient(func(req *http.Request) (*http.Response, error) {
			s.requests = append(s.requests, req.Method+" "+req.URL.Path)
			annotations, ok := s.classes[name]
			if !ok {
				return &http.Response{StatusCode: http.StatusNotFound, Header: header(), Body: body(&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404})}, nil
			}
			if req.Method == http.MethodDelete {
				delete(s.classes, name)
				return &http.Response{StatusCode: http.StatusOK, Header: header(), Body: body(&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: "Success"})}, nil
			}
			sc := &storagev1.StorageClass{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
			return &http.Response{StatusCode: http.StatusOK, Header: header(), Body: body(sc)}, nil
		}),
	}
	gvk := storagev1.SchemeGroupVersion.WithKind("StorageClass")
	return &resource.Info{Client: client, Name: name, Mapping: &meta.RESTMapping{
		Resource: storagev1.SchemeGroupVersion.WithResource("storageclasses"), GroupVersionKind: gvk, Scope: meta.RESTScopeRoot}}
}

func header() http.Header { return http.Header{"Content-Type": []string{"application/json"}} }

func body(obj any) io.ReadCloser {
	b, _ := json.Marshal(obj)
	return io.NopCloser(bytes.NewReader(b))
}

func sweeping(t *testing.T, cr client.Object, kube *kubefake.FailingKubeClient) (helmclient.ActionInterface, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(10)
	// No release, and the given resources built from any manifest.
	f := &fakeActions{cfg: &action.Configuration{KubeClient: kube}, errs: map[string]error{"uninstall": driver.ErrReleaseNotFound}}
	c, err := withOrphanSweep(engineOf(f), rec).ActionClientFor(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// A pool deleted after its release Secrets (deleted with its namespace): its StorageClass is
// deleted with an Event, a StorageClass of another owner is left, and the reconciler still
// gets "release not found" (so it removes the finalizer).
func TestSweepDeletesOwnedClusterObjects(t *testing.T) {
	srv := &storageClassServer{classes: map[string]map[string]string{
		"pool-x":  {ownerNameAnnotation: "team-a/x", ownerTypeAnnotation: "WarpdrivePool.tos.transwarp.io"},
		"foreign": {ownerNameAnnotation: "team-a/x", ownerTypeAnnotation: "AppService.appcontroller.k8s.io"},
	}}
	kube := &kubefake.FailingKubeClient{DummyResources: []*resource.Info{srv.info("pool-x"), srv.info("foreign"), srv.info("gone")}}
	c, rec := sweeping(t, poolCR(true, "kind: StorageClass\n..."), kube)

	if _, err := c.Uninstall("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Uninstall: %v, want release not found", err)
	}
	if _, ok := srv.classes["pool-x"]; ok {
		t.Error("the pool's StorageClass was not deleted")
	}
	if _, ok := srv.classes["foreign"]; !ok {
		t.Error("another owner's StorageClass was deleted")
	}
	want := "Warning OrphanDeleted release x was already gone (its Secrets deleted, as with its namespace); deleted StorageClass pool-x that it had created"
	if got := events(rec); len(got) != 1 || got[0] != want {
		t.Errorf("events %q, want [%q]", got, want)
	}
}

// Nothing is swept while the CR lives, when the release is there, or without a manifest; a
// failure to sweep keeps the finalizer (an error) so that the uninstall is retried.
func TestSweepOnlyWhenReleaseGoneAndCRDeleted(t *testing.T) {
	buildErr := errors.New("build called")
	for name, cr := range map[string]*unstructured.Unstructured{
		"CR not deleted":  poolCR(false, "kind: StorageClass"),
		"no manifest yet": poolCR(true, ""),
	} {
		c, _ := sweeping(t, cr, &kubefake.FailingKubeClient{BuildError: buildErr})
		if _, err := c.Uninstall("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("%s: Uninstall: %v, want release not found and no sweep", name, err)
		}
	}
	c, _ := sweeping(t, poolCR(true, "kind: StorageClass"), &kubefake.FailingKubeClient{BuildError: buildErr})
	if _, err := c.Uninstall("x"); !errors.Is(err, buildErr) || !strings.Contains(err.Error(), "release x is gone") {
		t.Errorf("sweep failure: %v, want an error that keeps the finalizer", err)
	}
}
