package trustedconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// crs is a client.Reader that knows which CRs exist, by "Kind ns/name".
type crs map[string]bool

func (c crs) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if c[obj.GetObjectKind().GroupVersionKind().Kind+" "+key.String()] {
		return nil
	}
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

func (crs) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// unsignedRecord is a record of revision 1 as an earlier version (or anyone) wrote it.
func unsignedRecord(ns, name, chartName, manifest string) *corev1.Secret {
	return unsignedRecordAt(ns, name, chartName, manifest, 1)
}

// unsignedRecordAt is a record of revision version as an earlier version (or anyone, the
// helm CLI) wrote it.
func unsignedRecordAt(ns, name, chartName, manifest string, version int) *corev1.Secret {
	rel := &release.Release{Name: name, Namespace: ns, Version: version, Manifest: manifest,
		Info:  &release.Info{Status: release.StatusDeployed},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: chartName}}}
	b, _ := json.Marshal(rel)
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version),
			Labels: map[string]string{"owner": "helm", "name": name, "status": "deployed", "version": strconv.Itoa(version)}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))},
	}
}

// takeOverFixture is the set-up the take-over tests share: records in a fake clientset and,
// as the manager's cache of release Secrets holds them, their metadata without data; the key's
// Secret, with keyAnnotations; and Configs with the AppService policy, whose reader finds the
// CRs in existing.
func takeOverFixture(t *testing.T, key releasesign.Key, keyAnnotations map[string]string, existing crs,
	records []runtime.Object) (*fake.Clientset, *Configs, *corev1.Secret) {
	t.Helper()
	cs := fake.NewClientset(records...)
	cached := crfake.NewClientBuilder()
	for _, r := range records {
		s := r.(*corev1.Secret).DeepCopy()
		s.Data = nil
		cached.WithObjects(s)
	}
	keySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "op", Name: "key", Annotations: keyAnnotations},
		Data: map[string][]byte{"key": key}}
	if _, err := cs.CoreV1().Secrets("op").Create(context.Background(), keySecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	appGVK := schema.GroupVersionKind{Group: "appcontroller.k8s.io", Version: "v1alpha1", Kind: "AppService"}
	tc := &Configs{secrets: cs, records: cached.Build(), mapper: testMapper(),
		policies: map[schema.GroupVersionKind]KindPolicy{appGVK: {GVK: appGVK, Chart: "appservice"}}, reader: existing}
	return cs, tc, keySecret
}

// The take-over signs exactly the unsigned records its CRs account for, once.
func TestTakeOverSignsOnlyWhatItsCRsAccountFor(t *testing.T) {
	ctx := context.Background()
	key := releasesign.Key("0123456789abcdef0123456789abcdef")
	cm := func(ns string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: " + ns + "\n"
	}
	resigned := unsignedRecord("t1", "other-key", "appservice", cm("t1"))
	releasesign.Key("another key of thirty-two bytes!").Sign("t1", resigned)
	records := []runtime.Object{
		unsignedRecord("t1", "kept", "appservice", cm("t1")),       // its CR exists: taken over
		unsignedRecord("t1", "ghost", "appservice", cm("t1")),      // no CR
		unsignedRecord("t1", "reaching", "appservice", cm("t2")),   // names another namespace
		unsignedRecord("t1", "wrong-chart", "memcached", cm("t1")), // the CR is an AppService
		unsignedRecord("t1", "cluster", "appservice", "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: s\n"),
		resigned, // signed with another key: not an earlier version's
	}
	cs, tc, keySecret := takeOverFixture(t, key, nil, crs{"AppService t1/kept": true, "AppService t1/reaching": true,
		"AppService t1/wrong-chart": true, "AppService t1/cluster": true, "AppService t1/other-key": true}, records)

	if err := tc.takeOver(ctx, key, keySecret); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kept", "ghost", "reaching", "wrong-chart", "cluster", "other-key"} {
		s, err := cs.CoreV1().Secrets("t1").Get(ctx, "sh.helm.release.v1."+name+".v1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := key.Verify("t1", s) == nil, name == "kept"; got != want {
			t.Errorf("record %s signed: %v, want %v", name, got, want)
		}
	}
	marked, err := cs.CoreV1().Secrets("op").Get(ctx, "key", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := marked.Annotations[takenOverAnnotation]; !strings.HasSuffix(got, "1 signed, 4 refused") {
		t.Errorf("take-over recorded as %q, want 1 signed and 4 refused", got)
	}

	// Once: a record written after the take-over is never taken over, even for a CR.
	late := unsignedRecord("t1", "late", "appservice", cm("t1"))
	if _, err := cs.CoreV1().Secrets("t1").Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The manager's cache sees it too, as it would: else the take-over could not find it anyway.
	cachedLate := late.DeepCopy()
	cachedLate.Data = nil
	if err := tc.records.(client.Client).Create(ctx, cachedLate); err != nil {
		t.Fatal(err)
	}
	tc.reader = crs{"AppService t1/late": true}
	if err := tc.takeOver(ctx, key, marked); err != nil {
		t.Fatal(err)
	}
	s, _ := cs.CoreV1().Secrets("t1").Get(ctx, late.Name, metav1.GetOptions{})
	if key.Verify("t1", s) == nil {
		t.Error("a record written after the take-over was signed")
	}
}

// gzipBase64 is data as Helm stores a release in a record.
func gzipBase64(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))
}

// allocated is what f allocates on the heap.
func allocated(f func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	f()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A record anyone may have written costs the take-over memory in proportion to the bound,
// whatever it holds: a decompression bomb is cut at maxRecordBytes, and values of any shape
// are not decoded.
func TestDecodeRecordBounded(t *testing.T) {
	bomb := gzipBase64(t, bytes.Repeat([]byte{' '}, 256<<20))
	var err error
	if n := allocated(func() { _, err = decodeRecord(bomb) }); err == nil || n > 3*maxRecordBytes {
		t.Errorf("a record of 256 MiB of JSON (%d KiB of gzip): %v, %d MiB allocated; want refused within %d MiB",
			len(bomb)>>10, err, n>>20, 3*maxRecordBytes>>20)
	}

	// Values as wide as the bound allows: a map of this many keys would take over 1 GB.
	var b bytes.Buffer
	b.WriteString(`{"name":"x","namespace":"t1","version":1,"chart":{"metadata":{"name":"appservice"}},"config":{`)
	for i := 0; b.Len() < maxRecordBytes-64; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":{}`, i)
	}
	b.WriteString(`}}`)
	wide := gzipBase64(t, b.Bytes())
	var rel *recordHead
	if n := allocated(func() { rel, err = decodeRecord(wide) }); err != nil || n > 4*maxRecordBytes {
		t.Errorf("a record with %d MiB of values: %v, %d MiB allocated; want decoded within %d MiB",
			b.Len()>>20, err, n>>20, 4*maxRecordBytes>>20)
	}
	if err == nil && (rel.Name != "x" || rel.Chart.Metadata.Name != "appservice") {
		t.Errorf("decoded %+v", rel)
	}
}

// withObjects is crs that also holds cluster-scoped objects, "Kind name" → their annotations.
type withObjects struct {
	crs
	objects map[string]map[string]string
}

func (w withObjects) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		a, found := w.objects[m.GroupVersionKind().Kind+" "+key.Name]
		if !found {
			return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
		}
		m.SetName(key.Name)
		m.SetAnnotations(a)
		return nil
	}
	return w.crs.Get(ctx, key, obj, opts...)
}

// A record of a chart that declares a cluster-scoped kind is taken over only if each object
// of that kind it names is the release's own or does not exist: a record naming an
// administrator's StorageClass would otherwise be signed, and the class deleted by the
// release's next upgrade.
func TestTakeOverRefusesClusterObjectsOfOthers(t *testing.T) {
	ctx := context.Background()
	poolGVK := schema.GroupVersionKind{Group: "tos.transwarp.io", Version: "v1alpha1", Kind: "WarpdrivePool"}
	tc := &Configs{mapper: testMapper(), policies: map[schema.GroupVersionKind]KindPolicy{
		poolGVK: {GVK: poolGVK, Chart: "warpdrivepool", ClusterKinds: []schema.GroupKind{storageClassGVK.GroupKind()}}}}
	tc.reader = withObjects{crs: crs{"WarpdrivePool t1/pool": true}, objects: map[string]map[string]string{
		"StorageClass admins": {"storageclass.kubernetes.io/is-default-class": "true"},
		"StorageClass pool":   {"meta.helm.sh/release-name": "pool", "meta.helm.sh/release-namespace": "t1"},
		"StorageClass other":  {"meta.helm.sh/release-name": "pool", "meta.helm.sh/release-namespace": "t2"},
	}}
	class := func(name string) string {
		return "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: " + name + "\n"
	}
	for name, want := range map[string]bool{"pool": true, "not-yet": true, "admins": false, "other": false} {
		err := tc.mayTakeOver(ctx, unsignedRecord("t1", "pool", "warpdrivepool", class(name)))
		if (err == nil) != want {
			t.Errorf("a record naming StorageClass %s: %v, want taken over %v", name, err, want)
		}
	}
}

// A record the API server refuses to store signed (its annotations padded to their limit) is
// refused like a forged one, and the others are taken over: the take-over completes once.
func TestTakeOverRefusesARecordTooLargeToSign(t *testing.T) {
	ctx := context.Background()
	key := releasesign.Key("0123456789abcdef0123456789abcdef")
	cm := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: t1\n"
	records := []runtime.Object{unsignedRecord("t1", "padded", "appservice", cm), unsignedRecord("t1", "kept", "appservice", cm)}
	cs, tc, keySecret := takeOverFixture(t, key, nil, crs{"AppService t1/padded": true, "AppService t1/kept": true}, records)
	cs.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.UpdateAction).GetObject().(*corev1.Secret)
		if s.Name == "sh.helm.release.v1.padded.v1" {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, s.Name,
				field.ErrorList{field.TooLong(field.NewPath("metadata", "annotations"), "", 262144)})
		}
		return false, nil, nil
	})
	if err := tc.takeOver(ctx, key, keySecret); err != nil {
		t.Fatalf("the take-over failed on a record too large to sign: %v", err)
	}
	kept, _ := cs.CoreV1().Secrets("t1").Get(ctx, "sh.helm.release.v1.kept.v1", metav1.GetOptions{})
	if key.Verify("t1", kept) != nil {
		t.Error("the other record was not taken over")
	}
	marked, _ := cs.CoreV1().Secrets("op").Get(ctx, "key", metav1.GetOptions{})
	if got := marked.Annotations[takenOverAnnotation]; !strings.HasSuffix(got, "1 signed, 1 refused") {
		t.Errorf("take-over recorded as %q, want 1 signed and 1 refused", got)
	}
}
