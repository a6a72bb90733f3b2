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
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// PodEnv turns on TestOperatorPod: the local cluster has a real node (make node-up) and the
// operator image is loaded into it (make image-load).
const PodEnv = "WARPDRIVE_DEPLOY_POD"

// realNodeLabel marks the local cluster's real node (hack/node-up.sh).
const realNodeLabel = "warpdrive.transwarp.io/real-node"

// serviceAccount is the pod's (config/rbac with config/default's prefix).
const serviceAccount = "warpdrive-operator-controller-manager"

// nonRootUID is the Dockerfile's USER.
const nonRootUID = 65532

// TestOperatorPod deploys config/local, config/default placed on the real node, and checks the
// operator as users run it: two pods, each Lease held by one and the other standing by, rolled
// out with no third pod, and a disruption budget that allows one disruption. Then, scaled to
// one pod: the pod admitted under the restricted level and Ready through its probes, with a
// read-only root filesystem; both Leases held from inside the pod (in-cluster configuration and
// the ServiceAccount token); the samples of every kind Ready at their generation; metrics
// through the metrics Service's endpoints with a token; the leader's pod, deleted, leading
// until the next one is Ready, which carries on; a rollout restart that hands over without
// running an operation twice; a wave of edits inside the pod's limits; with a second pod Ready,
// the leader's processes killed and their Leases handed to it by the restarted processes; alone
// again, both processes killed and restarted by the kubelet, taking their Leases back at once.
// make undeploy then leaves nothing behind, on the cluster or on the node.
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
	checkRestricted(t)
	// A pod of config/default may be there before (kwok played it): wait for config/local's.
	waitRolledOut(t, 2)
	checkStandby(t)
	// The rest runs with one pod, whose crash and deletion leave no standby to serve, except
	// where crashToStandby scales to two again.
	scale(t, 1)
	waitRolledOut(t, 1)
	pod := readyPod(t, "")
	checkPod(t, pod)
	checkLeases(t, pod.Name)

	ns, crs := createSamples(t)
	for _, cr := range crs {
		waitReady(t, cr)
	}
	checkMetrics(t)

	memcached := sampleOf(t, crs, "Memcached")
	pod = deleteLeader(t, pod, memcached)
	checkPod(t, pod)
	checkLeases(t, pod.Name)
	// The new pod carries on: a new CR is deployed by it, and the status follows.
	after := &unstructured.Unstructured{Object: map[string]any{"spec": memcached.Object["spec"]}}
	after.SetGroupVersionKind(memcached.GroupVersionKind())
	after.SetNamespace(ns)
	after.SetName(memcached.GetName() + "-after")
	env.Create(t, after)
	for _, cr := range []*unstructured.Unstructured{memcached, after} {
		if got := waitReady(t, cr); replicas(got) != 2 {
			t.Errorf("%s: status.replicas %d after spec.size 2", cr.GetName(), replicas(got))
		}
	}

	pod = rolloutRestart(t, pod, append(crs, after))
	editWave(t, ns, pod)
	pod = crashToStandby(t, pod, memcached)
	crashRestart(t, pod, memcached)

	undeployed = true
	if out, err := runMake(5*time.Minute, nil, "undeploy"); err != nil {
		t.Fatalf("make undeploy: %v\n%s", err, out)
	}
	expectNothingLeft(t, ns)
	expectNoContainers(t)
}

// checkStandby checks what config/default ships: two pods, each Lease held by one of them
// (the other process stands by with its cache filled, as the pod's readiness says), rolled
// out one at a time with no third pod, and a disruption budget that lets a drain take one pod
// at a time.
func checkStandby(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, d); err != nil {
		t.Fatal(err)
	}
	// A rollout starts no third pod beside the two (config/manager/manager.yaml says why).
	if r := d.Spec.Strategy.RollingUpdate; r == nil || surge(t, r.MaxSurge, ptr.Deref(d.Spec.Replicas, 1)) != 0 {
		t.Errorf("Deployment %s: rolling update %+v, want maxSurge 0", deployment, r)
	}
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		leases := &coordinationv1.LeaseList{}
		if err := env.Client.List(ctx, leases, client.InNamespace(namespace)); err != nil {
			return err
		}
		if len(leases.Items) != 2 {
			return fmt.Errorf("%d Leases, want the manager's and the sidecar's", len(leases.Items))
		}
		for _, l := range leases.Items {
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			held := false
			for _, p := range pods.Items {
				held = held || strings.HasPrefix(holder, p.Name+"_")
			}
			if !held {
				return fmt.Errorf("lease %s held by %q, not by a pod of %s", l.Name, holder, deployment)
			}
		}
		return nil
	})
	pdb := &policyv1.PodDisruptionBudget{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, pdb); err != nil {
		t.Fatalf("the operator's PodDisruptionBudget: %v", err)
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return err
		}
		if s := pdb.Status; s.ExpectedPods != 2 || s.CurrentHealthy != 2 || s.DisruptionsAllowed != 1 {
			return fmt.Errorf("PodDisruptionBudget %s: %+v, want 2 pods healthy and 1 disruption allowed", pdb.Name, s)
		}
		return nil
	})
}

// surge is how many pods a rollout of replicas may add, by the Deployment's rounding (up).
func surge(t *testing.T, maxSurge *intstr.IntOrString, replicas int32) int {
	t.Helper()
	n, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(replicas), true)
	if err != nil {
		t.Fatal(err)
	}
	return n
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

// checkPod checks where and how the pod runs: on the real node; both containers started
// once from the image, non-root, with a read-only root filesystem as the node's runtime
// sees it; Ready through HTTP probes of their own; and with no credentials but the
// ServiceAccount token the kubelet mounts, so that the Leases it takes (checkLeases) show the
// in-cluster configuration at work.
func checkPod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	node := &corev1.Node{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[realNodeLabel] != "true" {
		t.Errorf("pod %s is on node %s, not the real node", pod.Name, node.Name)
	}
	if pod.Spec.ServiceAccountName != serviceAccount || !ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		t.Errorf("pod %s: ServiceAccount %q, automount %v; want %s with its token", pod.Name,
			pod.Spec.ServiceAccountName, pod.Spec.AutomountServiceAccountToken, serviceAccount)
	}
	for _, c := range pod.Spec.Containers {
		sc := c.SecurityContext
		if sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || !ptr.Deref(sc.RunAsNonRoot, false) {
			t.Errorf("container %s: securityContext %+v", c.Name, sc)
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("container %s: probe %+v, want an HTTP probe", c.Name, p)
			}
		}
		for _, e := range c.Env {
			if e.Name == "KUBECONFIG" {
				t.Errorf("container %s has KUBECONFIG=%s: it must use the in-cluster configuration", c.Name, e.Value)
			}
		}
		for _, a := range append(c.Command, c.Args...) {
			if strings.HasPrefix(a, "--kubeconfig") {
				t.Errorf("container %s runs with %s: it must use the in-cluster configuration", c.Name, a)
			}
		}
		tokenMounted := false
		for _, m := range c.VolumeMounts {
			tokenMounted = tokenMounted || m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount"
		}
		if !tokenMounted {
			t.Errorf("container %s has no ServiceAccount token mounted", c.Name)
		}
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.RestartCount != 0 {
			t.Errorf("container %s restarted %d times: last state %+v", s.Name, s.RestartCount, s.LastTerminationState)
		}
		if s.State.Running == nil || !s.Ready {
			t.Errorf("container %s: ready=%v, state %+v", s.Name, s.Ready, s.State)
		}
		if s.ImageID == "" {
			t.Errorf("container %s has no image ID: it did not run from the image", s.Name)
		}
		spec := runtimeSpec(t, s.ContainerID)
		if !spec.Root.Readonly {
			t.Errorf("container %s: the runtime mounts its root filesystem read-write", s.Name)
		}
		if spec.Process.User.UID != nonRootUID {
			t.Errorf("container %s runs as uid %d, want the image's %d", s.Name, spec.Process.User.UID, nonRootUID)
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
