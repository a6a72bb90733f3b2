package trustedconfig

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/rest"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"transwarp.io/tos/warpdrive-operator/internal/operator/restconfig"
)

// objectServer is an API server of one namespace's objects, by path, that logs each request.
type objectServer struct {
	mu      sync.Mutex
	objects map[string]runtime.Object
	log     []string // "GET /api/v1/...", in order
	patches []string // the bodies of the PATCHes, in order
}

func (s *objectServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, r.Method+" "+r.URL.Path)
	if r.Method == http.MethodPatch {
		body, _ := io.ReadAll(r.Body)
		s.patches = append(s.patches, string(body))
	}
	obj, ok := s.objects[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *objectServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// coreInfo is the object obj of core/v1 for Helm's client, read through a client of host whose
// transport reads wraps (none if nil).
func coreInfo(t *testing.T, host string, reads *restconfig.UpdateReads, resourceName string, obj runtime.Object) *resource.Info {
	t.Helper()
	// Helm builds its objects unstructured (kube.Client.Build), and reads them so.
	cfg := &rest.Config{Host: host, APIPath: "/api", ContentConfig: resource.UnstructuredPlusDefaultContentConfig()}
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	if reads != nil {
		cfg.Wrap(reads.Wrap)
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	m := &unstructured.Unstructured{Object: u}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return &resource.Info{Client: rc, Namespace: m.GetNamespace(), Name: m.GetName(), Object: m,
		Mapping: &meta.RESTMapping{Resource: corev1.SchemeGroupVersion.WithResource(resourceName),
			GroupVersionKind: gvk, Scope: meta.RESTScopeNamespace}}
}

// An upgrade that changes a ConfigMap and leaves a Service as it was: Helm reads the ConfigMap
// twice before its patch and the Service three times. With the update's reads answered, the
// API server is asked once for each, and Helm sends the same patch.
func TestUpdateReadsEachObjectOnce(t *testing.T) {
	cm := func(v string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web"}, Data: map[string]string{"v": v}}
	}
	svc := func() *corev1.Service {
		return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	upgrade := func(reads *restconfig.UpdateReads) *objectServer {
		srv := &objectServer{objects: map[string]runtime.Object{
			"/api/v1/namespaces/t1/configmaps/web": cm("1"),
			"/api/v1/namespaces/t1/services/web":   svc(),
		}}
		hs := httptest.NewServer(srv)
		defer hs.Close()
		original := kube.ResourceList{coreInfo(t, hs.URL, reads, "configmaps", cm("1")), coreInfo(t, hs.URL, reads, "services", svc())}
		target := kube.ResourceList{coreInfo(t, hs.URL, reads, "configmaps", cm("2")), coreInfo(t, hs.URL, reads, "services", svc())}
		c := newConfinedKube(kube.New(nil), "t1", nil, nil, reads)
		if _, err := c.Update(original, target, false); err != nil {
			t.Fatal(err)
		}
		return srv
	}

	helm := upgrade(nil)
	answered := upgrade(&restconfig.UpdateReads{})

	wantHelm := []string{
		"GET /api/v1/namespaces/t1/configmaps/web", "GET /api/v1/namespaces/t1/configmaps/web",
		"PATCH /api/v1/namespaces/t1/configmaps/web",
		"GET /api/v1/namespaces/t1/services/web", "GET /api/v1/namespaces/t1/services/web",
		"GET /api/v1/namespaces/t1/services/web",
	}
	if got := helm.requests(); !reflect.DeepEqual(got, wantHelm) {
		t.Fatalf("Helm's own requests are not the ones this test answers:\n got %q\nwant %q", got, wantHelm)
	}
	want := []string{
		"GET /api/v1/namespaces/t1/configmaps/web", "PATCH /api/v1/namespaces/t1/configmaps/web",
		"GET /api/v1/namespaces/t1/services/web",
	}
	if got := answered.requests(); !reflect.DeepEqual(got, want) {
		t.Errorf("requests with the update's reads answered:\n got %q\nwant %q", got, want)
	}
	if !reflect.DeepEqual(answered.patches, helm.patches) || len(helm.patches) != 1 ||
		!strings.Contains(helm.patches[0], `"v":"2"`) {
		t.Errorf("patches: %q, Helm's own: %q", answered.patches, helm.patches)
	}
}

// Outside an update every read goes to the API server (Helm's wait polls with them), and
// within one, a read after any other request does, a write above all.
func TestUpdateReadsOnlyRepeatTheLastReadWithinAnUpdate(t *testing.T) {
	srv := &objectServer{objects: map[string]runtime.Object{
		"/api/v1/namespaces/t1/configmaps/a": &corev1.ConfigMap{},
		"/api/v1/namespaces/t1/configmaps/b": &corev1.ConfigMap{},
	}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	reads := &restconfig.UpdateReads{}
	client := &http.Client{Transport: reads.Wrap(http.DefaultTransport)}
	do := func(method, name string) {
		t.Helper()
		req, err := http.NewRequest(method, hs.URL+"/api/v1/namespaces/t1/configmaps/"+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Fatalf("%s %s: %d %q", method, name, resp.StatusCode, body)
		}
	}

	do("GET", "a")
	do("GET", "a") // not in an update: sent
	reads.During(func() {
		do("GET", "a")
		do("GET", "a") // answered
		do("PATCH", "a")
		do("GET", "a") // after a write: sent
		do("GET", "b")
		do("GET", "a") // after another read: sent
		do("GET", "a") // answered
	})
	do("GET", "a") // the update is over: sent

	a, b := "GET /api/v1/namespaces/t1/configmaps/a", "GET /api/v1/namespaces/t1/configmaps/b"
	want := []string{a, a, a, "PATCH /api/v1/namespaces/t1/configmaps/a", a, b, a, a}
	if got := srv.requests(); !reflect.DeepEqual(got, want) {
		t.Errorf("requests sent:\n got %q\nwant %q", got, want)
	}
}

// The Helm client of every release's configuration reads through its UpdateReads, and its
// updates answer their repeated reads.
func TestReleaseConfigAnswersTheUpdatesReads(t *testing.T) {
	cfg := releaseConfig(t, &rest.Config{Host: "https://example.invalid"})
	kc, ok := cfg.KubeClient.(*confinedKube)
	if !ok || kc.reads == nil {
		t.Fatalf("the release's Helm client is %T, reads %v", cfg.KubeClient, ok && kc.reads != nil)
	}
	f, ok := kc.Factory.(cmdutil.Factory)
	if !ok {
		t.Fatalf("the Helm client's factory is %T", kc.Factory)
	}
	rc, err := f.ToRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.WrapTransport == nil {
		t.Fatal("the Helm client's REST config has no transport wrapper")
	}
	// Two GETs of one object within one of the client's updates: the server is asked once.
	asked := 0
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked++
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c"}}`))
	}))
	defer server.Close()
	rt := rc.WrapTransport(server.Client().Transport)
	kc.reads.During(func() {
		for range 2 {
			req, err := http.NewRequest(http.MethodGet, server.URL+"/api/v1/namespaces/t1/configmaps/c", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	})
	if asked != 1 {
		t.Errorf("the Helm client's transport asked the server %d times for two reads of one object within an update, want 1", asked)
	}
}
