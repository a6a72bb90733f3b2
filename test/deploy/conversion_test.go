package deploy

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
// the real node's bridge, --enable-aggregator-routing); deleting the sidecar leader's pod
// fails no read at v1alpha1 while the other pod serves and a new one starts; and when the
// processes of the new leader's pod are killed, the other pod serves every read from the
// moment the killed pod is out of the endpoints until it is back. The reads the API server
// sent to the killed pod before the kubelet reported it are counted in the log, not refused:
// the API server calls a conversion webhook once, without retrying, so no webhook served
// from pods avoids them (docs/versions.md, "How the API server converts").
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
	leader := sidecarLeader(t)
	t.Logf("deleting the sidecar leader's pod %s", leader.Name)
	samples := readsDuring(t, ns, len(names), leader.Name, func() {
		final := watchToDeletion(t, leader)
		if err := env.Client.Delete(ctx, leader); err != nil {
			t.Fatal(err)
		}
		deletedGracefully(t, final, leader.Name)
		waitRolledOut(t, 2)
		time.Sleep(5 * time.Second) // reads with the new pod among the endpoints
	})
	if failed := failedReads(samples, func(sample) bool { return true }); len(failed) != 0 {
		t.Errorf("%d of %d reads at v1alpha1 failed while the sidecar leader's pod was deleted:\n%s",
			len(failed), len(samples), strings.Join(failed, "\n"))
	}

	// The processes of the sidecar leader's pod killed, as a crash: until the kubelet reports
	// them ended, the pod stays among the Service's endpoints, and a read the API server sends
	// there fails (it calls a conversion webhook once, without retrying); from then until the
	// restarted processes are Ready, the other pod serves every read.
	leader = sidecarLeader(t)
	restarts := int32(0)
	for _, s := range leader.Status.ContainerStatuses {
		restarts += s.RestartCount
	}
	samples = readsDuring(t, ns, len(names), leader.Name, func() {
		killProcesses(t, leader)
		framework.Eventually(t, converge, func(ctx context.Context) error {
			pod := &corev1.Pod{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(leader), pod); err != nil {
				return err
			}
			now := int32(0)
			for _, s := range pod.Status.ContainerStatuses {
				now += s.RestartCount
			}
			if now < restarts+int32(len(pod.Status.ContainerStatuses)) || !podReady(pod) {
				return fmt.Errorf("pod %s: %d restarts (%d before the kill), Ready %v", pod.Name, now, restarts, podReady(pod))
			}
			return nil
		})
		time.Sleep(5 * time.Second) // reads with the restarted pod among the endpoints again
	})
	down := 0
	for _, s := range samples {
		if !s.podReady && s.err == nil {
			down++
		}
	}
	if down == 0 {
		t.Errorf("no read at v1alpha1 succeeded while the killed pod %s was not Ready: the other pod served none", leader.Name)
	}
	inEndpoints := failedReads(samples, func(s sample) bool { return !s.outOfEndpoints && !s.afterRecovery })
	t.Logf("kill of %s: %d reads at v1alpha1, %d served while it was not Ready, %d failed before the kubelet reported it (measured, the API server does not retry a conversion call):\n%s",
		leader.Name, len(samples), down, len(inEndpoints), strings.Join(inEndpoints, "\n"))
	if failed := failedReads(samples, func(s sample) bool { return s.outOfEndpoints || s.afterRecovery }); len(failed) != 0 {
		t.Errorf("%d of %d reads at v1alpha1 failed once the killed pod %s was out of the endpoints, or back:\n%s",
			len(failed), len(samples), leader.Name, strings.Join(failed, "\n"))
	}
}

// sidecarLeader is the pod whose sidecar holds the sidecar's Lease (its rotator's).
func sidecarLeader(t *testing.T) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: sidecarLease}, lease); err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		t.Fatalf("the sidecar's leader %q: %v", name, err)
	}
	return pod
}

// sample is one list of the CRs at v1alpha1 made while a pod of the operator went away.
type sample struct {
	at  time.Time
	err error // nil if the list held every CR
	// podReady is whether the pod going away was Ready just before the list (false once
	// deleted); outOfEndpoints, whether it was not Ready at the list before too, so that the
	// endpoints had time to follow; afterRecovery, whether it had been not Ready and was
	// Ready again.
	podReady, outOfEndpoints, afterRecovery bool
}

// readsDuring lists the CRs of ns at v1alpha1 every 100 ms while act runs, each after reading
// whether the pod named pod is Ready, and returns the lists.
func readsDuring(t *testing.T, ns string, want int, pod string, act func()) []sample {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan []sample)
	go func() {
		var samples []sample
		wasDown, downBefore := false, false
		for {
			select {
			case <-stop:
				done <- samples
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx := context.Background()
			p := &corev1.Pod{}
			ready := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: pod}, p) == nil && podReady(p)
			wasDown = wasDown || !ready
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion("cache.example.com/v1alpha1")
			list.SetKind("MemcachedList")
			err := env.Client.List(ctx, list, client.InNamespace(ns))
			if err == nil && len(list.Items) != want {
				err = fmt.Errorf("%d CRs listed at v1alpha1, want %d", len(list.Items), want)
			}
			samples = append(samples, sample{at: time.Now(), err: err, podReady: ready,
				outOfEndpoints: !ready && downBefore, afterRecovery: wasDown && ready})
			downBefore = !ready
		}
	}()
	act()
	close(stop)
	return <-done
}

// failedReads are the failed samples that count says to, one line each.
func failedReads(samples []sample, count func(sample) bool) []string {
	var out []string
	for _, s := range samples {
		if s.err != nil && count(s) {
			out = append(out, s.at.Format("15:04:05.000")+" "+s.err.Error())
		}
	}
	return out
}

// podReady reports whether pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
