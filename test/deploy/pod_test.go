package deploy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// PodEnv turns on TestOperatorPod: the local cluster has a real node (make node-up) and the
// operator image is loaded into it (make image-load).
const PodEnv = "WARPDRIVE_DEPLOY_POD"

// realNodeLabel marks the local cluster's real node (hack/node-up.sh).
const realNodeLabel = "warpdrive.transwarp.io/real-node"

// TestOperatorPod deploys config/local, config/default placed on the real node, and checks
// the operator as users run it: its pod Ready through its probes under the restricted level
// with a read-only root filesystem, both Leases held from inside the pod (in-cluster
// configuration and the ServiceAccount token), the samples of every kind deployed, metrics
// through the metrics Service's endpoints with a token, and a new pod carrying on after the
// leader's is deleted. make undeploy then leaves nothing behind.
func TestOperatorPod(t *testing.T) {
	if os.Getenv(PodEnv) == "" {
		t.Skipf("%s is not set: needs the real node (make node-up image-load)", PodEnv)
	}
	if out, err := runMake(5*time.Minute, []string{"DEPLOY_CONFIG=config/local"}, "deploy"); err != nil {
		t.Fatalf("make deploy: %v\n%s", err, out)
	}
	if err := env.InstallCRDs(context.Background()); err != nil { // waits for them, and lists them
		t.Fatal(err)
	}
	undeployed := false
	defer func() {
		if undeployed {
			return
		}
		if out, err := runMake(5*time.Minute, nil, "undeploy"); err != nil {
			t.Errorf("make undeploy: %v\n%s", err, out)
		}
	}()
	pod := readyPod(t, "")
	checkPod(t, pod)
	checkLeases(t, pod.Name)

	ns, crs := createSamples(t)
	for _, cr := range crs {
		waitDeployed(t, cr)
	}
	checkMetrics(t)

	t.Logf("deleting the leader's pod %s", pod.Name)
	if err := env.Client.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	next := readyPod(t, pod.Name)
	checkLeases(t, next.Name)
	// The new pod carries on: a CR created now is deployed by it.
	after := crs[0].DeepCopy()
	after.SetName(crs[0].GetName() + "-after")
	after.SetResourceVersion("")
	after.SetUID("")
	if err := env.Client.Create(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	waitDeployed(t, after)

	undeployed = true
	if out, err := runMake(5*time.Minute, nil, "undeploy"); err != nil {
		t.Fatalf("make undeploy: %v\n%s", err, out)
	}
	expectNothingLeft(t, ns)
}

// readyPod waits for the one pod of the Deployment, other than not, whose containers are all
// Ready, and returns it.
func readyPod(t *testing.T, not string) *corev1.Pod {
	t.Helper()
	var ready *corev1.Pod
	framework.Eventually(t, converge, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, d); err != nil {
			return err
		}
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		var states []string
		for i := range pods.Items {
			p := &pods.Items[i]
			n := 0
			for _, s := range p.Status.ContainerStatuses {
				if s.Ready {
					n++
				}
				states = append(states, fmt.Sprintf("%s/%s ready=%v restarts=%d %+v", p.Name, s.Name, s.Ready, s.RestartCount, s.State))
			}
			if p.Name != not && p.DeletionTimestamp == nil && n == len(p.Spec.Containers) && n > 0 {
				ready = p
				return nil
			}
		}
		return fmt.Errorf("no pod Ready yet: %s", strings.Join(states, "; "))
	})
	return ready
}

// checkPod checks where and how the pod runs: on the real node, both containers started
// once from the image, non-root with a read-only root filesystem.
func checkPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	node := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[realNodeLabel] != "true" {
		t.Errorf("pod %s is on node %s, not the real node", pod.Name, node.Name)
	}
	for _, c := range pod.Spec.Containers {
		sc := c.SecurityContext
		if sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) {
			t.Errorf("container %s: securityContext %+v", c.Name, sc)
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.RestartCount != 0 {
			t.Errorf("container %s restarted %d times: last state %+v", s.Name, s.RestartCount, s.LastTerminationState)
		}
		if s.ImageID == "" {
			t.Errorf("container %s has no image ID: it did not run from the image", s.Name)
		}
	}
}

// checkLeases checks that the manager's and the sidecar's Leases are both held from pod:
// controller-runtime's holder identity starts with the host name, which is the pod's name.
func checkLeases(t *testing.T, pod string) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		leases := &coordinationv1.LeaseList{}
		if err := env.Client.List(ctx, leases, client.InNamespace(namespace)); err != nil {
			return err
		}
		var held []string
		for _, l := range leases.Items {
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			if strings.HasPrefix(holder, pod+"_") {
				held = append(held, l.Name)
			}
		}
		if len(held) != 2 {
			return fmt.Errorf("pod %s holds %d Leases (%v) of %d, want the manager's and the sidecar's", pod, len(held), held, len(leases.Items))
		}
		return nil
	})
}

// checkMetrics scrapes both metrics ports through the metrics Service's endpoints, from this
// machine (the real node's pods are on its bridge): 200 with the token of a ServiceAccount
// bound to the metrics reader role, 401 without a token, 403 with a token but no role.
func checkMetrics(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	reader := serviceAccountToken(t, "metrics-reader-test", "warpdrive-operator-metrics-reader")
	other := serviceAccountToken(t, "metrics-nobody-test", "")
	var addrs []string
	framework.Eventually(t, converge, func(ctx context.Context) error {
		slices := &discoveryv1.EndpointSliceList{}
		if err := env.Client.List(ctx, slices, client.InNamespace(namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: "warpdrive-operator-controller-manager-metrics-service"}); err != nil {
			return err
		}
		addrs = nil
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if !ptr.Deref(e.Conditions.Ready, false) {
					continue
				}
				for _, p := range s.Ports {
					addrs = append(addrs, fmt.Sprintf("%s:%d", e.Addresses[0], ptr.Deref(p.Port, 0)))
				}
			}
		}
		if len(addrs) != 2 {
			return fmt.Errorf("metrics endpoints %v, want the manager's and the sidecar's", addrs)
		}
		return nil
	})
	// The endpoints serve a self-signed certificate: the token is what is checked here.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed metrics certificate
	}}
	for _, addr := range addrs {
		for _, c := range []struct {
			token string
			want  int
		}{{reader, http.StatusOK}, {"", http.StatusUnauthorized}, {other, http.StatusForbidden}} {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Errorf("GET %s/metrics: %v", addr, err)
				continue
			}
			_ = resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET %s/metrics with token=%v: %d, want %d", addr, c.token != "", resp.StatusCode, c.want)
			}
		}
	}
}

// serviceAccountToken creates a ServiceAccount in the operator's namespace, bound to
// clusterRole unless it is empty, and returns a token of it.
func serviceAccountToken(t *testing.T, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: namespace}},
		}
		if err := env.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), b) })
	}
	tr, err := env.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
