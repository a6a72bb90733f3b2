package releasechunks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// withSecretLimit makes cs refuse a Secret of more than 1 MiB of data, as the API server does.
func withSecretLimit(cs *fake.Clientset) {
	refuse := func(a k8stesting.Action) (bool, runtime.Object, error) {
		s, ok := a.(interface{ GetObject() runtime.Object }).GetObject().(*corev1.Secret)
		if !ok {
			return false, nil, nil
		}
		size := 0
		for _, v := range s.Data {
			size += len(v)
		}
		if size > 1<<20 {
			return true, nil, apierrors.NewBadRequest("Secret " + s.Name + ": data: Too long: may not be more than 1048576 bytes")
		}
		return false, nil, nil
	}
	cs.PrependReactor("create", "secrets", refuse)
	cs.PrependReactor("update", "secrets", refuse)
}

// bigChart is a chart whose release record is about 3 MiB: a file of random text that gzip
// cannot shrink much, as large dashboards and CRDs make real charts' records.
func bigChart(t *testing.T, version string) *chart.Chart {
	t.Helper()
	blob := make([]byte, 1700<<10)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "big", Version: version},
		Templates: []*chart.File{{Name: "templates/cm.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  size: {{ .Values.size | quote }}\n")}},
		Files:  []*chart.File{{Name: "files/blob.txt", Data: []byte(base64.StdEncoding.EncodeToString(blob))}},
		Values: map[string]any{"size": 1},
	}
}

// A release whose record is about 3 MiB installs, upgrades, rolls back and uninstalls with
// Helm's own actions through the signed storage over this client, where one Secret holds at
// most 1 MiB; its parts are verified as a whole, and go with it.
func TestReleaseOverOneMiB(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	withSecretLimit(cs)
	keys := releasesign.Keys{Current: releasesign.Key("0123456789abcdef0123456789abcdef")}
	var refused []string
	signed := releasesign.NewSecretClient(New(cs.CoreV1().Secrets("t1")), "t1", keys,
		func(s string, err error) { refused = append(refused, s+": "+err.Error()) })
	cfg := &action.Configuration{Releases: storage.Init(driver.NewSecrets(signed)),
		KubeClient: &kubefake.PrintingKubeClient{Out: io.Discard}, Capabilities: chartutil.DefaultCapabilities,
		Log: func(string, ...any) {}}

	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "big", "t1"
	if _, err := install.Run(bigChart(t, "0.1.0"), nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	head, err := cs.CoreV1().Secrets("t1").Get(ctx, "sh.helm.release.v1.big.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := parts(head)
	if n < 3 {
		t.Fatalf("the record is in %d parts, want a record over 2 MiB (3 parts or more)", n)
	}
	t.Logf("release record in %d parts of at most %d KiB", n, ChunkSize>>10)

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = "t1"
	if _, err := upgrade.Run("big", bigChart(t, "0.2.0"), map[string]any{"size": 2}); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	rollback := action.NewRollback(cfg)
	rollback.Version = 1
	if err := rollback.Run("big"); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	rel, err := action.NewGet(cfg).Run("big")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 3 || rel.Chart.Metadata.Version != "0.1.0" {
		t.Errorf("after the rollback: revision %d of chart %s, want revision 3 of 0.1.0", rel.Version, rel.Chart.Metadata.Version)
	}
	if len(refused) > 0 {
		t.Errorf("records refused: %v", refused)
	}

	// A part changed by whoever may write the namespace's Secrets: the record is refused.
	part, err := cs.CoreV1().Secrets("t1").Get(ctx, ChunkName("sh.helm.release.v1.big.v3", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	part.Data["release"][0] ^= 1
	if _, err := cs.CoreV1().Secrets("t1").Update(ctx, part, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := signed.Get(ctx, "sh.helm.release.v1.big.v3", metav1.GetOptions{}); !apierrors.IsNotFound(err) ||
		len(refused) != 1 || !strings.Contains(refused[0], "changed") {
		t.Errorf("a record with a changed part: %v, refused %v; want it refused as changed", err, refused)
	}
	part.Data["release"][0] ^= 1
	if _, err := cs.CoreV1().Secrets("t1").Update(ctx, part, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if _, err := action.NewUninstall(cfg).Run("big"); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	left, err := cs.CoreV1().Secrets("t1").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range left.Items {
		t.Errorf("left after the uninstall: Secret %s", s.Name)
	}
}

// smallChart is a chart whose release record fits in one Secret, as nearly every chart's does.
func smallChart(version string) *chart.Chart {
	return &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "small", Version: version},
		Templates: []*chart.File{{Name: "templates/cm.yaml",
			Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: small\ndata:\n  size: {{ .Values.size | quote }}\n")}},
		Values: map[string]any{"size": 1},
	}
}

// secretRequests counts cs's requests by verb, those of a part's Secret apart.
func secretRequests(cs *fake.Clientset) (records, parts map[string]int) {
	records, parts = map[string]int{}, map[string]int{}
	for _, a := range cs.Actions() {
		name := ""
		switch a := a.(type) {
		case interface{ GetName() string }: // get, delete
			name = a.GetName()
		case interface{ GetObject() runtime.Object }: // create, update
			name = a.GetObject().(*corev1.Secret).Name
		}
		if strings.Contains(name, ".part") {
			parts[a.GetVerb()]++
		} else {
			records[a.GetVerb()]++
		}
	}
	return records, parts
}

// A release whose records fit in one Secret costs no request for parts: Helm's install,
// upgrades (each updating the record it supersedes), pruning of the history and uninstall
// update and delete records whose parts annotation the client read or wrote, and none said
// parts; nor does the take-over's read and write of a record. Each action has a client of
// its own, as each reconcile of the manager has: what a client knows of a record it
// updates, it read in that action.
func TestNoPartRequestsForRecordsInOneSecret(t *testing.T) {
	cs := fake.NewClientset()
	keys := releasesign.Keys{Current: releasesign.Key("0123456789abcdef0123456789abcdef")}
	cfg := func() *action.Configuration {
		signed := releasesign.NewSecretClient(New(cs.CoreV1().Secrets("t1")), "t1", keys, nil)
		store := storage.Init(driver.NewSecrets(signed))
		store.MaxHistory = 2
		return &action.Configuration{Releases: store, KubeClient: &kubefake.PrintingKubeClient{Out: io.Discard},
			Capabilities: chartutil.DefaultCapabilities, Log: func(string, ...any) {}}
	}

	install := action.NewInstall(cfg())
	install.ReleaseName, install.Namespace = "small", "t1"
	if _, err := install.Run(smallChart("0.1.0"), nil); err != nil {
		t.Fatalf("install: %v", err)
	}
	for i := 2; i <= 4; i++ {
		upgrade := action.NewUpgrade(cfg())
		upgrade.Namespace = "t1"
		if _, err := upgrade.Run("small", smallChart("0.1.0"), map[string]any{"size": i}); err != nil {
			t.Fatalf("upgrade %d: %v", i, err)
		}
	}
	// The take-over reads a record by name, and writes it back signed.
	takeOver := New(cs.CoreV1().Secrets("t1"))
	s, err := takeOver.Get(context.Background(), "sh.helm.release.v1.small.v4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := takeOver.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := action.NewUninstall(cfg()).Run("small"); err != nil {
		t.Fatalf("uninstall: %v", err)
	}

	records, parts := secretRequests(cs)
	t.Logf("requests for records: %v", records)
	if records["update"] < 4 || records["delete"] < 3 {
		t.Fatalf("%d updates and %d deletes of records: want the upgrades' and the pruning's and the uninstall's (4 and 3 at least)",
			records["update"], records["delete"])
	}
	if len(parts) > 0 {
		t.Errorf("requests for parts of records in one Secret: %v, want none", parts)
	}
}

// A record that was in parts and is written again smaller, or deleted, loses its parts:
// whether this client wrote it or read it, or has not seen it (then it looks for parts).
func TestPartsOfARecordThatHadThemAreDeleted(t *testing.T) {
	ctx := context.Background()
	big := make([]byte, 2*ChunkSize+1) // 3 parts
	record := func(release []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.r.v1", Namespace: "t1"},
			Type: releasesign.RecordType, Data: map[string][]byte{"release": release}}
	}
	partsLeft := func(cs *fake.Clientset) int {
		l, err := cs.CoreV1().Secrets("t1").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range l.Items {
			if s.Type == ChunkType {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		// then writes the record again smaller (or deletes it) with a client: the one that
		// created it, one that read it first, or one that has not seen it.
		then func(cs *fake.Clientset, writer *Client) error
	}{
		{"updated by the client that wrote it", func(_ *fake.Clientset, c *Client) error {
			_, err := c.Update(ctx, record([]byte("small")), metav1.UpdateOptions{})
			return err
		}},
		{"updated after a read", func(cs *fake.Clientset, _ *Client) error {
			c := New(cs.CoreV1().Secrets("t1"))
			if _, err := c.Get(ctx, record(nil).Name, metav1.GetOptions{}); err != nil {
				return err
			}
			_, err := c.Update(ctx, record([]byte("small")), metav1.UpdateOptions{})
			return err
		}},
		{"updated by a client that has not seen it", func(cs *fake.Clientset, _ *Client) error {
			_, err := New(cs.CoreV1().Secrets("t1")).Update(ctx, record([]byte("small")), metav1.UpdateOptions{})
			return err
		}},
		{"deleted after a list", func(cs *fake.Clientset, _ *Client) error {
			c := New(cs.CoreV1().Secrets("t1"))
			if _, err := c.List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
			return c.Delete(ctx, record(nil).Name, metav1.DeleteOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			c := New(cs.CoreV1().Secrets("t1"))
			if _, err := c.Create(ctx, record(big), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if n := partsLeft(cs); n != 2 {
				t.Fatalf("%d Secrets of parts after the create, want 2", n)
			}
			if err := tc.then(cs, c); err != nil {
				t.Fatal(err)
			}
			if n := partsLeft(cs); n != 0 {
				t.Errorf("%d Secrets of parts left, want none", n)
			}
		})
	}
}
