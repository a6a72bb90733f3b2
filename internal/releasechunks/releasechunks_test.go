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
