package deploy

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// What config/webhook and the sidecar name (config/default's prefix).
const (
	webhookSecret = "warpdrive-operator-webhook-server-cert"
	sidecarLease  = "warpdrive-sidecar.transwarp.io"
	conversionCRD = "memcacheds.cache.example.com"
)

// TestConversionWebhookInPod deploys config/local (two pods on the real node) and serves the
// CRD conversion webhook from them as a kind whose versions differ needs it. Memcached's
// v1alpha1 and v1 share a schema (strategy None), but its chart has a conversions.yaml, so
// the sidecar serves it: its CRD is switched to strategy Webhook with the clientConfig crdgen
// generates (the Service crdgen.WebhookServiceName, no caBundle) and the pods restarted, as a
// new operator version with such a kind would be deployed. Then the sidecar's leader fills the
// Secret and injects its CA into that CRD; a Memcached written at v1alpha1 and at v1 reads
// back at both versions, through the Service (the API server calls its endpoints, pod IPs on
// the real node's bridge, --enable-aggregator-routing); and deleting the sidecar leader's pod
// fails no read at v1alpha1 while the other pod serves and a new one starts.
func TestConversionWebhookInPod(t *testing.T) {
	if os.Getenv(PodEnv) == "" {
		t.Skipf("%s is not set: needs the real node (make node-up image-load)", PodEnv)
	}
	ctx := context.Background()
	if out, err := runMake(5*time.Minute, []string{"DEPLOY_CONFIG=config/local"}, "deploy"); err != nil {
		t.Fatalf("make deploy: %v\n%s", err, out)
	}
	if err := env.InstallCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if out, err := runMake(5*time.Minute, nil, "undeploy"); err != nil {
			t.Errorf("make undeploy: %v\n%s", err, out)
		}
	}()
	waitRolledOut(t, 2)

	// The CRD of a kind whose versions differ, as crdgen writes it.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: conversionCRD}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Name: crdgen.WebhookServiceName, Namespace: crdgen.WebhookServiceNamespace,
				Path: ptr.To(crdgen.WebhookPath), Port: ptr.To(int32(crdgen.WebhookPort)),
			}},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatalf("CRD %s to strategy Webhook: %v", conversionCRD, err)
	}
	// The sidecars read which CRDs are of strategy Webhook as they start.
	restart := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"warpdrive.transwarp.io/test-restarted-at":%q}}}}}`,
		time.Now().Format(time.RFC3339Nano))
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	d.SetNamespace(namespace)
	d.SetName(deployment)
	if err := env.Client.Patch(ctx, d, client.RawPatch(types.StrategicMergePatchType, []byte(restart))); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, 2)

	// The leader's rotator fills the Secret and puts its CA into the CRD.
	framework.Eventually(t, converge, func(ctx context.Context) error {
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: webhookSecret}, secret); err != nil {
			return err
		}
		ca := secret.Data["ca.crt"]
		if len(ca) == 0 || len(secret.Data[corev1.TLSCertKey]) == 0 || len(secret.Data[corev1.TLSPrivateKeyKey]) == 0 {
			return fmt.Errorf("Secret %s has keys %v, want ca.crt, tls.crt and tls.key", webhookSecret, keys(secret.Data))
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: conversionCRD}, crd); err != nil {
			return err
		}
		got := crd.Spec.Conversion.Webhook.ClientConfig.CABundle
		if block, _ := pem.Decode(got); block == nil || !bytes.Equal(got, ca) {
			return fmt.Errorf("CRD %s caBundle %q, want the Secret's ca.crt", conversionCRD, got)
		}
		return nil
	})
	t.Logf("CA injected into %s", conversionCRD)

	// CRs written at each version read back at both, through the webhook.
	ns := "conversion-" + rand.String(5)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}()
	data, err := os.ReadFile(filepath.Join(env.Root, "config", "samples", "cache.example.com_v1_memcached.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, version := range []string{"v1", "v1alpha1"} {
		cr := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &cr.Object); err != nil {
			t.Fatal(err)
		}
		cr.SetAPIVersion("cache.example.com/" + version)
		cr.SetNamespace(ns)
		cr.SetName("written-at-" + version)
		framework.Eventually(t, converge, func(ctx context.Context) error { return env.Client.Create(ctx, cr) })
		names = append(names, cr.GetName())
	}
	for _, name := range names {
		for _, version := range []string{"v1alpha1", "v1"} {
			got := &unstructured.Unstructured{}
			got.SetAPIVersion("cache.example.com/" + version)
			got.SetKind("Memcached")
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
				t.Errorf("get %s at %s: %v", name, version, err)
				continue
			}
			if got.GetAPIVersion() != "cache.example.com/"+version {
				t.Errorf("get %s at %s: apiVersion %s", name, version, got.GetAPIVersion())
			}
		}
	}
	out, err := env.Kubectl("get", "memcacheds.v1alpha1.cache.example.com", "-n", ns, "-o", "name")
	if err != nil || strings.Count(out, "\n") != len(names) {
		t.Errorf("kubectl get memcacheds.v1alpha1.cache.example.com: %v\n%s", err, out)
	}

	// The sidecar leader's pod deleted: the other pod serves every read meanwhile.
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sidecarLease}, lease); err != nil {
		t.Fatal(err)
	}
	leader, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leader}, pod); err != nil {
		t.Fatalf("the sidecar's leader %q: %v", leader, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var reads int
	var failures []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion("cache.example.com/v1alpha1")
			list.SetKind("MemcachedList")
			err := env.Client.List(context.Background(), list, client.InNamespace(ns))
			mu.Lock()
			reads++
			if err != nil {
				failures = append(failures, time.Now().Format("15:04:05.000")+" "+err.Error())
			} else if len(list.Items) != len(names) {
				failures = append(failures, fmt.Sprintf("%d CRs listed at v1alpha1, want %d", len(list.Items), len(names)))
			}
			mu.Unlock()
		}
	}()
	t.Logf("deleting the sidecar leader's pod %s", leader)
	final := watchToDeletion(t, pod)
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	deletedGracefully(t, final, leader)
	waitRolledOut(t, 2)
	time.Sleep(5 * time.Second) // reads with the new pod among the endpoints
	close(stop)
	wg.Wait()
	t.Logf("%d reads at v1alpha1 through the deletion of %s", reads, leader)
	if len(failures) != 0 {
		t.Errorf("%d of %d reads at v1alpha1 failed while the sidecar leader's pod was deleted:\n%s",
			len(failures), reads, strings.Join(failures, "\n"))
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
