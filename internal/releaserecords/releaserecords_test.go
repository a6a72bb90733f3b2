package releaserecords

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// record is the Secret of release's record of version v with the given status label; its data
// is left out (only Helm's driver test below decodes it).
func record(ns, release string, v int, status string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: Name(release, v), Namespace: ns,
		Labels: map[string]string{"owner": "helm", "name": release, "status": status, "version": fmt.Sprint(v)}}}
}

// cacheOf is a cache that holds the Secrets given, indexed as the manager's is.
func cacheOf(objs ...client.Object) client.Reader {
	return crfake.NewClientBuilder().WithObjects(objs...).WithIndex(&corev1.Secret{}, IndexField, IndexRelease).Build()
}

// requests are the API server's requests for Secrets, as "verb name" ("list" for a list).
func requests(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		if a.GetResource().Resource != "secrets" {
			continue
		}
		if g, ok := a.(interface{ GetName() string }); ok && a.GetVerb() == "get" {
			out = append(out, "get "+g.GetName())
			continue
		}
		out = append(out, a.GetVerb())
	}
	return out
}

func names(l *corev1.SecretList) []string {
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Name)
	}
	return out
}

func list(t *testing.T, c *Client, selector string) *corev1.SecretList {
	t.Helper()
	l, err := c.List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list %q: %v", selector, err)
	}
	return l
}

// A release's records are read by name, each the cache knows of and the one after the
// newest, and matched against the whole selector with the labels read, not the cache's.
func TestRecordsAreReadByName(t *testing.T) {
	cs := fake.NewClientset(record("ns", "r", 1, "superseded"), record("ns", "r", 2, "deployed"))
	// The cache is behind the upgrade's relabelling: it still has v1 deployed.
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(record("ns", "r", 1, "deployed"), record("ns", "r", 2, "pending-upgrade")), nil, "ns")

	all := list(t, c, "name=r,owner=helm")
	if want := []string{Name("r", 1), Name("r", 2)}; !slices.Equal(names(all), want) {
		t.Errorf("records: %v, want %v", names(all), want)
	}
	if want := []string{"get " + Name("r", 1), "get " + Name("r", 2), "get " + Name("r", 3)}; !slices.Equal(requests(cs), want) {
		t.Errorf("requests: %v, want %v (no LIST)", requests(cs), want)
	}
	deployed := list(t, c, "name=r,owner=helm,status=deployed")
	if want := []string{Name("r", 2)}; !slices.Equal(names(deployed), want) {
		t.Errorf("deployed records: %v, want %v, by the labels read", names(deployed), want)
	}
	// The first page of a paged list (the signed storage's) is answered whole, by name.
	cs.ClearActions()
	page, err := c.List(context.Background(), metav1.ListOptions{LabelSelector: "name=r,owner=helm", Limit: 1})
	if err != nil || !slices.Equal(names(page), []string{Name("r", 1), Name("r", 2)}) || page.Continue != "" ||
		slices.Contains(requests(cs), "list") {
		t.Errorf("first page: %v (continue %q, %v), requests %v; want both records by name", names(page), page.Continue, err, requests(cs))
	}
}

// Records written since the cache's last event are found after its newest; with none cached,
// from version 1.
func TestRecordsTheCacheHasNotSeenAreFound(t *testing.T) {
	cs := fake.NewClientset(record("ns", "r", 1, "superseded"), record("ns", "r", 2, "superseded"),
		record("ns", "r", 3, "deployed"), record("ns", "new", 1, "deployed"))
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(record("ns", "r", 1, "deployed")), nil, "ns")

	if got, want := names(list(t, c, "name=r,owner=helm")), []string{Name("r", 1), Name("r", 2), Name("r", 3)}; !slices.Equal(got, want) {
		t.Errorf("records: %v, want %v", got, want)
	}
	if got, want := names(list(t, c, "name=new,owner=helm")), []string{Name("new", 1)}; !slices.Equal(got, want) {
		t.Errorf("records of a release the cache has none of: %v, want %v", got, want)
	}
	if got := names(list(t, c, "name=none,owner=helm")); len(got) != 0 {
		t.Errorf("records of no release: %v, want none", got)
	}
	if slices.Contains(requests(cs), "list") {
		t.Errorf("requests: %v, want no LIST", requests(cs))
	}
}

// A record the cache holds but the API server no longer has means the cache is behind a
// deletion, and maybe a reinstall numbered from 1 again: the API server's LIST answers.
func TestACacheBehindADeletionIsNotTrusted(t *testing.T) {
	cs := fake.NewClientset(record("ns", "r", 1, "deployed"))
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(record("ns", "r", 5, "superseded"), record("ns", "r", 6, "deployed")), nil, "ns")

	if got, want := names(list(t, c, "name=r,owner=helm")), []string{Name("r", 1)}; !slices.Equal(got, want) {
		t.Errorf("records: %v, want the reinstalled %v", got, want)
	}
	if reqs := requests(cs); reqs[len(reqs)-1] != "list" {
		t.Errorf("requests: %v, want a LIST last", reqs)
	}
}

// Lists that are not of one release's records, and a cache that cannot answer, go to the API
// server as they are; so does a release with more records than MaxRecords.
func TestOtherListsGoToTheAPIServer(t *testing.T) {
	var many []client.Object
	for v := 1; v <= MaxRecords+1; v++ {
		many = append(many, record("ns", "big", v, "superseded"))
	}
	cs := fake.NewClientset(record("ns", "r", 1, "deployed"))
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(append(many, record("ns", "r", 1, "deployed"))...), nil, "ns")
	for _, opts := range []metav1.ListOptions{
		{LabelSelector: "owner=helm"},           // Helm's list of every release
		{LabelSelector: "name=r"},               // not Helm's records
		{LabelSelector: "name=r,owner=someone"}, // nor these
		{LabelSelector: "name in (r,s),owner=helm"},
		{LabelSelector: "name=r,owner=helm", Limit: 4, Continue: "page-2"}, // a page of a LIST begun
		{LabelSelector: "name=r,owner=helm", FieldSelector: "metadata.name=x"},
		{LabelSelector: "name=big,owner=helm"},
	} {
		cs.ClearActions()
		if _, err := c.List(context.Background(), opts); err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		if reqs := requests(cs); !slices.Equal(reqs, []string{"list"}) {
			t.Errorf("%+v: requests %v, want one LIST", opts, reqs)
		}
	}

	broken := New(cs.CoreV1().Secrets("ns"), failingReader{}, nil, "ns")
	cs.ClearActions()
	if got := names(list(t, broken, "name=r,owner=helm")); !slices.Equal(got, []string{Name("r", 1)}) || !slices.Equal(requests(cs), []string{"list"}) {
		t.Errorf("a cache that fails: records %v by %v, want r.v1 by one LIST", got, requests(cs))
	}
}

// The cache holds every namespace's records; a client reads only its own namespace's, so a
// release of the same name elsewhere is neither read nor returned.
func TestOtherNamespacesRecordsAreNotRead(t *testing.T) {
	cs := fake.NewClientset(record("ns", "r", 1, "deployed"), record("other", "r", 7, "deployed"))
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(record("ns", "r", 1, "deployed"), record("other", "r", 7, "deployed")), nil, "ns")

	if got, want := names(list(t, c, "name=r,owner=helm")), []string{Name("r", 1)}; !slices.Equal(got, want) {
		t.Errorf("records: %v, want %v", got, want)
	}
	for _, a := range cs.Actions() {
		if a.GetNamespace() != "ns" {
			t.Errorf("a request in namespace %q: %v", a.GetNamespace(), a)
		}
	}
}

// Helm's own storage, over the client, finds a release's last and deployed records as it
// would with LISTs.
func TestHelmStorageOverTheClient(t *testing.T) {
	cs := fake.NewClientset()
	store := storage.Init(driver.NewSecrets(New(cs.CoreV1().Secrets("ns"), cacheOf(), nil, "ns")))
	for v := 1; v <= 3; v++ {
		rel := releaseOf("r", v)
		if err := store.Create(rel); err != nil {
			t.Fatal(err)
		}
		if v > 1 {
			prev, err := store.Get("r", v-1)
			if err != nil {
				t.Fatal(err)
			}
			prev.Info.Status = release.StatusSuperseded
			if err := store.Update(prev); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs.ClearActions()
	last, err := store.Last("r")
	if err != nil || last.Version != 3 {
		t.Fatalf("last: %v, %v; want version 3", last, err)
	}
	deployed, err := store.Deployed("r")
	if err != nil || deployed.Version != 3 {
		t.Fatalf("deployed: %v, %v; want version 3", deployed, err)
	}
	if _, err := store.Last("none"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("last of no release: %v, want %v", err, driver.ErrReleaseNotFound)
	}
	if slices.Contains(requests(cs), "list") {
		t.Errorf("requests %v: want no LIST", requests(cs))
	}
}

type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("cache not started")
}

// releaseOf is a deployed release's record.
func releaseOf(name string, v int) *release.Release {
	return &release.Release{Name: name, Namespace: "ns", Version: v, Info: &release.Info{Status: release.StatusDeployed}}
}

// A release's records are listed, as Helm lists them, where the namespace holds fewer release
// Secrets than the GETs by name would cost (secretsPerGET for each record cached and one for
// the look past them), and read by name from there on. The census follows the informer's adds
// and deletes, by namespace, tombstones included.
func TestRecordsAreReadByNameOnlyInACrowdedNamespace(t *testing.T) {
	const perGET = 10
	census := NewCensus(perGET)
	cached := []client.Object{record("ns", "r", 1, "superseded"), record("ns", "r", 2, "deployed")}
	for i := range 3*perGET - 1 { // r's two records and the look for a third: 3 GETs
		census.OnAdd(record("ns", fmt.Sprint("s", i), 1, "deployed"), true)
	}
	census.OnAdd(record("other", "r", 1, "deployed"), true)
	cs := fake.NewClientset(record("ns", "r", 1, "superseded"), record("ns", "r", 2, "deployed"))
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(cached...), census, "ns")

	list(t, c, "name=r,owner=helm")
	if reqs := requests(cs); !slices.Equal(reqs, []string{"list"}) {
		t.Errorf("with %d release Secrets in the namespace: requests %v, want one LIST", census.In("ns"), reqs)
	}
	census.OnAdd(record("ns", "last", 1, "deployed"), true)
	cs.ClearActions()
	list(t, c, "name=r,owner=helm")
	if reqs, want := requests(cs), []string{"get " + Name("r", 1), "get " + Name("r", 2), "get " + Name("r", 3)}; !slices.Equal(reqs, want) {
		t.Errorf("with %d release Secrets in the namespace: requests %v, want %v", census.In("ns"), reqs, want)
	}
	census.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/last", Obj: record("ns", "last", 1, "deployed")})
	census.OnDelete(record("ns", "s0", 1, "deployed"))
	if census.In("ns") != 3*perGET-2 || census.In("other") != 1 {
		t.Errorf("census after two deletes: ns %d, other %d; want %d and 1", census.In("ns"), census.In("other"), 3*perGET-2)
	}
}

// A namespace editor labels fifty Secrets as records of their release, none signed: with
// metadata first, none of them is read whole (no GET of any, no LIST of Secrets), whether the
// cache answers by name or the API server answers a LIST of metadata, and each is reported.
// A Secret at the name after the newest record is read whole to be found, and dropped.
func TestOnlyRecordsWorthReadingAreRead(t *testing.T) {
	signed := record("ns", "r", 1, "deployed")
	signed.Annotations = map[string]string{"signed": "yes"}
	objs := []client.Object{signed}
	meta := []runtime.Object{metadataOf(signed)}
	for v := 100; v < 150; v++ {
		planted := record("ns", "r", v, "superseded")
		objs = append(objs, planted)
		meta = append(meta, metadataOf(planted))
	}
	var refused []string
	worth := func(m metav1.Object) Verdict {
		if m.GetAnnotations()["signed"] == "yes" {
			return Vouched
		}
		refused = append(refused, m.GetName())
		return Skip
	}
	var secrets []runtime.Object
	for _, o := range objs {
		secrets = append(secrets, o.(runtime.Object))
	}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metaSecrets := metadatafake.NewSimpleMetadataClient(scheme, meta...).Resource(corev1.SchemeGroupVersion.WithResource("secrets"))

	for _, tc := range []struct {
		name  string
		cache client.Reader
		want  []string
	}{
		{"by name from the cache", cacheOf(objs...), []string{"get " + Name("r", 1), "get " + Name("r", 2)}},
		{"a LIST of metadata", failingReader{}, []string{"get " + Name("r", 1)}},
	} {
		refused = nil
		cs := fake.NewClientset(secrets...)
		c := New(cs.CoreV1().Secrets("ns"), tc.cache, nil, "ns").MetadataFirst(metaSecrets.Namespace("ns"), worth)
		if got := names(list(t, c, "name=r,owner=helm")); !slices.Equal(got, []string{Name("r", 1)}) {
			t.Errorf("%s: records %v, want the signed one", tc.name, got)
		}
		if got := requests(cs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: requests %v, want %v", tc.name, got, tc.want)
		}
		if len(refused) != 50 {
			t.Errorf("%s: %d Secrets refused, want the 50 planted", tc.name, len(refused))
		}
	}

	// Planted at the name the next record of the release will have: read to be found, dropped.
	next := record("ns", "r", 2, "deployed")
	cs := fake.NewClientset(signed, next)
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(signed), nil, "ns").MetadataFirst(metaSecrets.Namespace("ns"), worth)
	if got := names(list(t, c, "name=r,owner=helm")); !slices.Equal(got, []string{Name("r", 1)}) {
		t.Errorf("with a Secret at the next record's name: records %v, want the signed one", got)
	}
}

// metadataOf is s as a LIST of metadata returns it.
func metadataOf(s *corev1.Secret) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: s.ObjectMeta}
}

// A reconcile lists a release's records several times, and a write between two lists (the
// upgrade's new record) forgets the lists remembered above this client, not what it read:
// through LISTs of metadata, a vouched record at the resourceVersion read before is not read
// again, one whose resourceVersion moved is, and a record only its data can judge (a legacy
// signature) is read every time, never kept.
func TestVouchedRecordsAreReadOncePerResourceVersion(t *testing.T) {
	vouched := record("ns", "r", 1, "superseded")
	vouched.Annotations = map[string]string{"signed": "yes"}
	vouched.ResourceVersion = "10"
	legacy := record("ns", "r", 2, "deployed")
	legacy.ResourceVersion = "20"
	worth := func(m metav1.Object) Verdict {
		if m.GetAnnotations()["signed"] == "yes" {
			return Vouched
		}
		return Read
	}
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metaOf := func(objs ...*corev1.Secret) metadata.ResourceInterface {
		var meta []runtime.Object
		for _, o := range objs {
			meta = append(meta, metadataOf(o))
		}
		return metadatafake.NewSimpleMetadataClient(scheme, meta...).Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace("ns")
	}
	cs := fake.NewClientset(vouched, legacy)
	c := New(cs.CoreV1().Secrets("ns"), failingReader{}, nil, "ns").MetadataFirst(metaOf(vouched, legacy), worth)
	for range 2 {
		if got := names(list(t, c, "name=r,owner=helm")); !slices.Equal(got, []string{Name("r", 1), Name("r", 2)}) {
			t.Fatalf("records %v, want both", got)
		}
	}
	want := []string{"get " + Name("r", 1), "get " + Name("r", 2), "get " + Name("r", 2)}
	if got := requests(cs); !slices.Equal(got, want) {
		t.Errorf("two lists: requests %v, want %v", got, want)
	}

	// Forget, as the release guard asks once it holds the release's lock, costs the LIST
	// nothing: the versions it lists are the API server's.
	c.Forget()
	cs.ClearActions()
	list(t, c, "name=r,owner=helm")
	if got, want := requests(cs), []string{"get " + Name("r", 2)}; !slices.Equal(got, want) {
		t.Errorf("a list after Forget: requests %v, want %v", got, want)
	}
	cs.ClearActions()

	// The vouched record is written again: its new version is read.
	moved := vouched.DeepCopy()
	moved.ResourceVersion, moved.Labels["status"] = "30", "deployed"
	if _, err := cs.CoreV1().Secrets("ns").Update(context.Background(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	c.MetadataFirst(metaOf(moved, legacy), worth)
	l := list(t, c, "name=r,owner=helm,status=deployed")
	if got := names(l); !slices.Equal(got, []string{Name("r", 1), Name("r", 2)}) {
		t.Errorf("after the write: records %v, want both, the moved one at its new status", got)
	}
	want = []string{"get " + Name("r", 1), "get " + Name("r", 2)}
	if got := requests(cs); !slices.Equal(got, want) {
		t.Errorf("after the write: requests %v, want %v", got, want)
	}

	// What a list returns is a copy: changing it changes nothing kept.
	l.Items[0].Labels["status"] = "changed"
	cs.ClearActions()
	if got := list(t, c, "name=r,owner=helm,status=deployed"); len(got.Items) != 2 || got.Items[0].Labels["status"] != "deployed" {
		t.Errorf("after a caller changed what it was given: %v", got.Items)
	}
}

// Read by name, a vouched record the cache holds at the resourceVersion read before is not read
// again, until Forget; one the client deleted (a pruned revision) is forgotten, so the next
// list finds the cache behind the deletion and asks the API server's LIST.
func TestVouchedRecordsReadByNameAreReadOnce(t *testing.T) {
	v1, v2 := record("ns", "r", 1, "superseded"), record("ns", "r", 2, "deployed")
	for _, s := range []*corev1.Secret{v1, v2} {
		s.Annotations, s.ResourceVersion = map[string]string{"signed": "yes"}, "7"
	}
	cs := fake.NewClientset(v1, v2)
	c := New(cs.CoreV1().Secrets("ns"), cacheOf(v1.DeepCopy(), v2.DeepCopy()), nil, "ns").MetadataFirst(nil, func(m metav1.Object) Verdict {
		if m.GetAnnotations()["signed"] == "yes" {
			return Vouched
		}
		return Skip
	})
	for range 2 {
		if got := names(list(t, c, "name=r,owner=helm")); !slices.Equal(got, []string{Name("r", 1), Name("r", 2)}) {
			t.Fatalf("records %v, want both", got)
		}
	}
	want := []string{"get " + Name("r", 1), "get " + Name("r", 2), "get " + Name("r", 3), "get " + Name("r", 3)}
	if got := requests(cs); !slices.Equal(got, want) {
		t.Errorf("two lists: requests %v, want %v", got, want)
	}

	// Forgotten, as the release guard asks once it holds the release's lock: read again.
	c.Forget()
	cs.ClearActions()
	list(t, c, "name=r,owner=helm")
	want = []string{"get " + Name("r", 1), "get " + Name("r", 2), "get " + Name("r", 3)}
	if got := requests(cs); !slices.Equal(got, want) {
		t.Errorf("after Forget: requests %v, want %v", got, want)
	}

	// Written through the client while the cache still lists the version kept: what was
	// written is read.
	updated := v2.DeepCopy()
	updated.Labels["status"] = "superseded"
	if _, err := c.Update(context.Background(), updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := list(t, c, "name=r,owner=helm"); len(got.Items) != 2 || got.Items[1].Labels["status"] != "superseded" {
		t.Errorf("after an update of v2: records %v, want v2 as written", got.Items)
	}

	if err := c.Delete(context.Background(), Name("r", 1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	if got := names(list(t, c, "name=r,owner=helm")); !slices.Equal(got, []string{Name("r", 2)}) {
		t.Errorf("after deleting v1: records %v, want v2 alone", got)
	}
	if got := requests(cs); len(got) == 0 || got[0] != "get "+Name("r", 1) || got[len(got)-1] != "list" {
		t.Errorf("after deleting v1: requests %v, want v1 read again, then a LIST", got)
	}
}
