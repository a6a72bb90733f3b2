package trustedconfig

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// apiServer is a stand-in for the API server's read paths: discovery of a few kinds, and the
// objects and lists in paths, as JSON. It records the paths it was asked for.
type apiServer struct {
	paths map[string]any
	mu    sync.Mutex
	asked []string
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.asked = append(s.asked, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	obj, ok := s.paths[r.URL.Path]
	if !ok || r.Method != http.MethodGet {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(obj)
}

// wasAsked reports whether a request for path reached the server.
func (s *apiServer) wasAsked(path string) bool {
	return s.requests(path) > 0
}

// requests counts the GETs of path that reached the server.
func (s *apiServer) requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, a := range s.asked {
		if a == "GET "+path {
			n++
		}
	}
	return n
}

func secret(ns, name string, labels, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Data:       map[string][]byte{"password": []byte(name + "-password")}}
}

func clusterRole(name string, annotations map[string]string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func storageClass(name string, annotations map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Provisioner: "example.com/disk"}
}

// newAPIServer serves, for the release "app" of namespace t1: its own Secret, one labelled
// readable, one of another release, one that Helm's annotations name the release's but the
// CR did not make, the release's record, one plain, a ConfigMap; a Secret of namespace t2;
// ClusterRoles and StorageClasses (the kind the release's chart declares) of no release, of
// the release and of a release "app" of t2; a CSIDriver; the Namespaces.
func newAPIServer(t *testing.T) (*apiServer, *rest.Config) {
	owned := map[string]string{ownership.HelmReleaseNameAnnotation: "app", ownership.HelmReleaseNamespaceAnnotation: "t1"}
	// The release's own Secret: rendered by it, the CR its controller.
	own := secret("t1", "app-auth", nil, owned)
	own.OwnerReferences = []metav1.OwnerReference{{APIVersion: appGVK.GroupVersion().String(), Kind: appGVK.Kind,
		Name: "app", UID: appUID, Controller: ptr.To(true)}}
	// The release's record, which the storage driver makes the CR the controller of.
	record := secret("t1", "sh.helm.release.v1.app.v1", map[string]string{"owner": "helm", "name": "app"}, nil)
	record.OwnerReferences = own.OwnerReferences
	secrets := []*corev1.Secret{
		own,
		record,
		// Named the release's by Helm's annotations, as the helm CLI's release "app" would make
		// it, but not made by this CR: no proof.
		secret("t1", "cli-auth", nil, owned),
		secret("t1", "shared", map[string]string{valuesfrom.ReadableLabel: "true"}, nil),
		secret("t1", "other-auth", nil, map[string]string{ownership.HelmReleaseNameAnnotation: "other", ownership.HelmReleaseNamespaceAnnotation: "t1"}),
		secret("t1", "plain", nil, nil),
		// The right name, the wrong namespace in the annotation: not this release's.
		secret("t1", "moved", nil, map[string]string{ownership.HelmReleaseNameAnnotation: "app", ownership.HelmReleaseNamespaceAnnotation: "t2"}),
	}
	list := &corev1.SecretList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "SecretList"}}
	s := &apiServer{paths: map[string]any{
		"/api/v1": &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "secrets", Namespaced: true, Kind: "Secret", Verbs: []string{"get", "list"}},
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"get", "list"}},
			{Name: "namespaces", Kind: "Namespace", Verbs: []string{"get", "list"}},
		}},
		"/apis/rbac.authorization.k8s.io/v1": &metav1.APIResourceList{GroupVersion: "rbac.authorization.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "clusterroles", Kind: "ClusterRole", Verbs: []string{"get", "list"}}}},
		"/apis/storage.k8s.io/v1": &metav1.APIResourceList{GroupVersion: "storage.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "storageclasses", Kind: "StorageClass", Verbs: []string{"get", "list"}},
			{Name: "csidrivers", Kind: "CSIDriver", Verbs: []string{"get", "list"}},
		}},
		"/api/v1/namespaces/t1/secrets":                         list,
		"/api/v1/namespaces/t2/secrets/victim":                  secret("t2", "victim", map[string]string{valuesfrom.ReadableLabel: "true"}, nil),
		"/api/v1/secrets":                                       list,
		"/api/v1/namespaces/t1/configmaps/settings":             &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "settings"}},
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/admin": clusterRole("admin", nil),
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/app":   clusterRole("app", owned),
		"/apis/rbac.authorization.k8s.io/v1/clusterroles/moved": clusterRole("moved", map[string]string{ownership.HelmReleaseNameAnnotation: "app", ownership.HelmReleaseNamespaceAnnotation: "t2"}),
		"/apis/rbac.authorization.k8s.io/v1/clusterroles":       &rbacv1.ClusterRoleList{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleList"}},
		"/apis/storage.k8s.io/v1/storageclasses/standard":       storageClass("standard", nil),
		"/apis/storage.k8s.io/v1/storageclasses/app":            storageClass("app", owned),
		"/apis/storage.k8s.io/v1/storageclasses/moved":          storageClass("moved", map[string]string{ownership.HelmReleaseNameAnnotation: "app", ownership.HelmReleaseNamespaceAnnotation: "t2"}),
		"/apis/storage.k8s.io/v1/csidrivers/disk":               &storagev1.CSIDriver{TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "CSIDriver"}, ObjectMeta: metav1.ObjectMeta{Name: "disk", Annotations: owned}},
		"/api/v1/namespaces":                                    &corev1.NamespaceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}, Items: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "t1"}}}},
		"/api/v1/namespaces/t1":                                 &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "t1"}},
	}}
	for _, sec := range secrets {
		list.Items = append(list.Items, *sec)
		s.paths["/api/v1/namespaces/t1/secrets/"+sec.Name] = sec
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, &rest.Config{Host: srv.URL}
}

// restGetter is helm-operator-plugins' RESTClientGetter as far as Helm's actions use it.
type restGetter struct{ cfg *rest.Config }

func (g restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

// ToRawKubeConfigLoader: the release's Helm client is given its namespace (kube.Client's
// Namespace), as helm-operator-plugins gives it, and reads no kubeconfig.
func (g restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig { return nil }
func (g restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return nil, nil
}
func (g restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	m.Add(clusterRoleGVK, meta.RESTScopeRoot)
	m.Add(storageClassGK.WithVersion("v1"), meta.RESTScopeRoot)
	m.Add(schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "CSIDriver"}, meta.RESTScopeRoot)
	return m, nil
}

type configGetter struct{ cfg *rest.Config }

func (g configGetter) ActionConfigFor(context.Context, client.Object) (*action.Configuration, error) {
	return &action.Configuration{RESTClientGetter: restGetter(g), KubeClient: kube.New(nil)}, nil
}

var appGVK = schema.GroupVersionKind{Group: "test.warpdrive.transwarp.io", Version: "v1", Kind: "App"}

// appUID is the UID configFor gives the CR t1/app.
const appUID = types.UID("app-uid")

// storageClassGK is the cluster-scoped kind App's chart declares, as the pool chart does.
var storageClassGK = schema.GroupKind{Group: "storage.k8s.io", Kind: "StorageClass"}

// releaseConfig is the action configuration Configs hands out for the CR t1/app.
func releaseConfig(t *testing.T, server *rest.Config) *action.Configuration {
	t.Helper()
	configs := &Configs{inner: configGetter{server}, policies: map[schema.GroupVersionKind]KindPolicy{
		appGVK: {GVK: appGVK, ClusterKinds: []schema.GroupKind{storageClassGK}}}}
	return configFor(t, configs, appGVK, "app")
}

// configFor is the action configuration configs hands out for the CR t1/name of kind gvk.
func configFor(t *testing.T, configs *Configs, gvk schema.GroupVersionKind, name string) *action.Configuration {
	t.Helper()
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(gvk)
	cr.SetNamespace("t1")
	cr.SetName(name)
	cr.SetUID(types.UID(name + "-uid"))
	cfg, err := configs.ActionConfigFor(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Helm's lookup, with the REST config of a release's action configuration, reads objects of
// the release's namespace, and of its Secrets only the release's own and those labelled
// readable; of cluster-scoped objects, one at a time, only the release's own of a kind the
// chart declares; everything else reads as absent, and most is not even asked of the server.
func TestLookupReadsOnlyWhatTheReleaseMay(t *testing.T) {
	server, base := newAPIServer(t)
	rc, err := releaseConfig(t, base).RESTClientGetter.ToRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	lookup := engine.NewLookupFunction(rc)
	cases := []struct {
		name                      string
		apiVersion, kind, ns, obj string
		want                      []string // the names read: of the object, or of the list's items
		wantKind                  string   // of a list
		neverAsked                string   // a path the server must not have been asked for
	}{
		{name: "own Secret", apiVersion: "v1", kind: "Secret", ns: "t1", obj: "app-auth", want: []string{"app-auth"}},
		{name: "Secret labelled readable", apiVersion: "v1", kind: "Secret", ns: "t1", obj: "shared", want: []string{"shared"}},
		{name: "another release's Secret", apiVersion: "v1", kind: "Secret", ns: "t1", obj: "other-auth"},
		{name: "a Secret of a release of the same name that this CR did not make (the helm CLI's)", apiVersion: "v1", kind: "Secret", ns: "t1", obj: "cli-auth"},
		{name: "the release's record", apiVersion: "v1", kind: "Secret", ns: "t1", obj: "sh.helm.release.v1.app.v1"},
		{name: "a Secret no release owns", apiVersion: "v1", kind: "Secret", ns: "t1", obj: "plain"},
		{name: "a Secret annotated for another namespace's release", apiVersion: "v1", kind: "Secret", ns: "t1", obj: "moved"},
		{name: "the namespace's Secrets", apiVersion: "v1", kind: "Secret", ns: "t1", want: []string{"app-auth", "shared"}, wantKind: "SecretList"},
		{name: "a ConfigMap of the namespace", apiVersion: "v1", kind: "ConfigMap", ns: "t1", obj: "settings", want: []string{"settings"}},
		{name: "another namespace's Secret", apiVersion: "v1", kind: "Secret", ns: "t2", obj: "victim", neverAsked: "/api/v1/namespaces/t2/secrets/victim"},
		{name: "another namespace's Secrets", apiVersion: "v1", kind: "Secret", ns: "t2", wantKind: "SecretList", neverAsked: "/api/v1/namespaces/t2/secrets"},
		{name: "every namespace's Secrets", apiVersion: "v1", kind: "Secret", wantKind: "SecretList", neverAsked: "/api/v1/secrets"},
		{name: "the release's own StorageClass", apiVersion: "storage.k8s.io/v1", kind: "StorageClass", obj: "app", want: []string{"app"}},
		{name: "a StorageClass of no release", apiVersion: "storage.k8s.io/v1", kind: "StorageClass", obj: "standard"},
		{name: "a StorageClass of another namespace's release of the same name", apiVersion: "storage.k8s.io/v1", kind: "StorageClass", obj: "moved"},
		{name: "a StorageClass that does not exist", apiVersion: "storage.k8s.io/v1", kind: "StorageClass", obj: "none"},
		{name: "the StorageClasses", apiVersion: "storage.k8s.io/v1", kind: "StorageClass", wantKind: "StorageClassList", neverAsked: "/apis/storage.k8s.io/v1/storageclasses"},
		{name: "a ClusterRole of no release", apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", obj: "admin", neverAsked: "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin"},
		{name: "the release's own ClusterRole, a kind the chart does not declare", apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", obj: "app", neverAsked: "/apis/rbac.authorization.k8s.io/v1/clusterroles/app"},
		{name: "the release's own CSIDriver, of the declared kind's group", apiVersion: "storage.k8s.io/v1", kind: "CSIDriver", obj: "disk", neverAsked: "/apis/storage.k8s.io/v1/csidrivers/disk"},
		{name: "the ClusterRoles", apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", wantKind: "ClusterRoleList", neverAsked: "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
		{name: "the Namespaces", apiVersion: "v1", kind: "Namespace", wantKind: "NamespaceList", neverAsked: "/api/v1/namespaces"},
		{name: "the release's Namespace", apiVersion: "v1", kind: "Namespace", obj: "t1", neverAsked: "/api/v1/namespaces/t1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lookup(tc.apiVersion, tc.kind, tc.ns, tc.obj)
			if err != nil {
				t.Fatalf("lookup: %v", err)
			}
			var names []string
			u := &unstructured.Unstructured{Object: got}
			if tc.obj != "" {
				if len(got) > 0 {
					names = append(names, u.GetName())
				}
			} else {
				if u.GetKind() != tc.wantKind {
					t.Errorf("a list of kind %q, want %q: %v", u.GetKind(), tc.wantKind, got)
				}
				items, ok := got["items"].([]any)
				if !ok {
					t.Fatalf("no items: %v", got)
				}
				for _, it := range items {
					names = append(names, (&unstructured.Unstructured{Object: it.(map[string]any)}).GetName())
				}
			}
			sort.Strings(names)
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("read %v, want %v (%v)", names, tc.want, got)
			}
			if tc.neverAsked != "" && server.wasAsked(tc.neverAsked) {
				t.Errorf("the API server was asked for %s", tc.neverAsked)
			}
		})
	}
}

// A GET of a cluster-scoped kind the chart does not declare reads as absent without a request
// to the API server, however often a render asks: a tenant's tpl value could otherwise make
// the operator GET any cluster-scoped object by name, many times over. A GET of the declared
// kind is one request, and keeps only the release's own object.
func TestLookupGetsOnlyDeclaredClusterKinds(t *testing.T) {
	server, base := newAPIServer(t)
	rc, err := releaseConfig(t, base).RESTClientGetter.ToRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1 // no client-side rate limit: it would only slow the loop below
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 100 {
		if _, err := cs.RbacV1().ClusterRoles().Get(ctx, "app", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the release's own ClusterRole: %v, want NotFound", err)
		}
		if _, err := cs.StorageV1().CSIDrivers().Get(ctx, "disk", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the release's own CSIDriver: %v, want NotFound", err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "t1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the release's Namespace: %v, want NotFound", err)
		}
	}
	server.mu.Lock()
	asked := append([]string(nil), server.asked...)
	server.mu.Unlock()
	if len(asked) != 0 {
		t.Errorf("%d requests reached the API server, want none: %v", len(asked), asked[0])
	}

	if sc, err := cs.StorageV1().StorageClasses().Get(ctx, "app", metav1.GetOptions{}); err != nil || sc.Name != "app" {
		t.Errorf("the release's own StorageClass: %v, %v", sc, err)
	}
	if _, err := cs.StorageV1().StorageClasses().Get(ctx, "standard", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a StorageClass of no release: %v, want NotFound", err)
	}
	for _, path := range []string{"/apis/storage.k8s.io/v1/storageclasses/app", "/apis/storage.k8s.io/v1/storageclasses/standard"} {
		if n := server.requests(path); n != 1 {
			t.Errorf("GET %s reached the API server %d times, want once", path, n)
		}
	}
}

// The config only reads: a write, a watch or a path that is not discovery is refused before
// it reaches the API server.
func TestLookupConfigOnlyReads(t *testing.T) {
	server, base := newAPIServer(t)
	rc, err := releaseConfig(t, base).RESTClientGetter.ToRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if _, err := cs.CoreV1().ConfigMaps("t1").Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create: %v, want Forbidden", err)
	}
	if err := cs.CoreV1().Secrets("t1").Delete(ctx, "app-auth", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete: %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Secrets("t1").Watch(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("watch: %v, want Forbidden", err)
	}
	if err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").Do(ctx).Error(); !apierrors.IsForbidden(err) {
		t.Errorf("GET /metrics: %v, want Forbidden", err)
	}
	server.mu.Lock()
	defer server.mu.Unlock()
	for _, a := range server.asked {
		if !strings.HasPrefix(a, "GET ") || strings.Contains(a, "metrics") {
			t.Errorf("the API server was asked %s", a)
		}
	}
}

// passwordChart is the shape of Bitnami's charts: a Secret whose password is generated once
// and looked up afterwards, and a value rendered through tpl.
func passwordChart() *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "passwords", Version: "0.1.0"},
		Values:   map[string]any{"greeting": "hello"},
		Templates: []*chart.File{{Name: "templates/secret.yaml", Data: []byte(`
{{- $old := lookup "v1" "Secret" .Release.Namespace (printf "%s-auth" .Release.Name) }}
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-auth
data:
  password: {{ if $old }}{{ index $old.data "password" }}{{ else }}{{ randAlphaNum 24 | b64enc }}{{ end }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-greeting
data:
  greeting: {{ tpl .Values.greeting . | quote }}
`)}},
	}
}

// The reconciler's dry-run upgrade (server-side, as helm-operator-plugins asks for it)
// renders with lookup working, through the release's confined config: the generated password
// is the one the release's Secret holds, so the dry run finds nothing changed; a value that
// makes tpl look up another namespace's Secret reads nothing.
func TestServerDryRunLooksUpThroughTheConfinement(t *testing.T) {
	_, base := newAPIServer(t)
	cfg := releaseConfig(t, base)
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	cfg.Capabilities = chartutil.DefaultCapabilities
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.Log = func(string, ...any) {}
	ch := passwordChart()
	if err := cfg.Releases.Create(&release.Release{Name: "app", Namespace: "t1", Version: 1, Chart: ch,
		Info: &release.Info{Status: release.StatusDeployed}}); err != nil {
		t.Fatal(err)
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = "t1"
	upgrade.DryRun, upgrade.DryRunOption = true, "server"
	rel, err := upgrade.Run("app", ch, map[string]any{
		"greeting": `{{ (lookup "v1" "Secret" "t2" "victim").data }}{{ (lookup "v1" "Secret" .Release.Namespace "plain").data }}`})
	if err != nil {
		t.Fatal(err)
	}
	stored := "password: " + b64("app-auth-password")
	if !strings.Contains(rel.Manifest, stored) {
		t.Errorf("the dry run generated a new password, want the stored one (%s):\n%s", stored, rel.Manifest)
	}
	for _, leak := range []string{b64("victim-password"), b64("plain-password")} {
		if strings.Contains(rel.Manifest, leak) {
			t.Errorf("tpl read a Secret it may not (%s):\n%s", leak, rel.Manifest)
		}
	}
	if !strings.Contains(rel.Manifest, `greeting: ""`) {
		t.Errorf("the greeting should render empty:\n%s", rel.Manifest)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
