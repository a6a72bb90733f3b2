// Package deploy tests what `make deploy` applies and what `make undeploy` removes, on the
// local cluster, after the e2e suite has run as the manager's ServiceAccount (see
// hack/test-deploy.sh, which runs both: make test-deploy).
package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// What config/default names (namePrefix warpdrive-operator-, namespace
// warpdrive-operator-system).
const (
	namespace  = "warpdrive-operator-system"
	deployment = "warpdrive-operator-controller-manager"
	partOf     = "app.kubernetes.io/part-of=warpdrive-operator"
)

// Bounds on waits; they only stop a broken run from hanging.
const converge = 3 * time.Minute

var env *framework.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = framework.New(); err == nil && !env.Impersonating() {
		err = fmt.Errorf("%s is not set: run make test-deploy", framework.ImpersonateEnv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// deploy runs `make deploy` against the cluster (a no-op when it is deployed already) and
// waits for the CRDs.
func deploy(t *testing.T) {
	t.Helper()
	if out, err := runMake(5*time.Minute, nil, "deploy"); err != nil {
		t.Fatalf("make deploy: %v\n%s", err, out)
	}
	if err := env.InstallCRDs(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// runMake runs a make target against the cluster and returns its output. The timeout is
// where a hanging target fails the test.
func runMake(timeout time.Duration, extraEnv []string, target string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-s", "-C", env.Root, target, "KUBECONFIG="+env.Kubeconfig)
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("make %s still running after %s: %w", target, timeout, ctx.Err())
	}
	return string(out), err
}

// TestManagerPodAdmitted: the operator's namespace enforces the restricted Pod Security
// level, and the manager Deployment's pod is admitted there (kwok then plays its kubelet),
// while a pod that breaks the level is refused.
func TestManagerPodAdmitted(t *testing.T) {
	deploy(t)
	checkRestricted(t)
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, d); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			rss := &appsv1.ReplicaSetList{}
			_ = env.Client.List(ctx, rss, client.InNamespace(namespace))
			for _, rs := range rss.Items {
				for _, c := range rs.Status.Conditions {
					if c.Type == appsv1.ReplicaSetReplicaFailure {
						return fmt.Errorf("the manager's pod is refused: %s", c.Message)
					}
				}
			}
			return fmt.Errorf("no pod of Deployment %s yet", deployment)
		}
		return nil
	})
}

// checkRestricted checks that the operator's namespace enforces the restricted Pod Security
// level: it says so, and the apiserver refuses a pod that breaks the level.
func checkRestricted(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Fatalf("namespace %s enforces %q, want restricted", namespace, got)
	}
	// A pod that breaks the restricted level: root, privilege escalation allowed.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "not-restricted"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](0), AllowPrivilegeEscalation: ptr.To(true)},
		}}},
	}
	err := env.Client.Create(ctx, bad, client.DryRunAll)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a non-restricted pod in %s: %v, want it forbidden by PodSecurity", namespace, err)
	}
}

// TestServiceAccountLimits asks the apiserver what the manager's ServiceAccount may do: what
// it needs (so that the denials below are not for a wrong name), and what it must not.
func TestServiceAccountLimits(t *testing.T) {
	deploy(t)
	type access struct {
		verb, group, resource, subresource, namespace string
	}
	allowed := []access{
		{"create", "apps", "deployments", "", "team-a"},
		{"delete", "storage.k8s.io", "storageclasses", "", ""},
		{"patch", "appcontroller.k8s.io", "appservices", "status", "team-a"},
		{"update", "coordination.k8s.io", "leases", "", namespace},
		{"create", "authentication.k8s.io", "tokenreviews", "", ""},
		// Helm keeps releases as Secrets in the CR's namespace, and CRs may be in any
		// namespace: reading Secrets anywhere is the price of a cluster-wide Helm operator.
		{"get", "", "secrets", "", "team-a"},
	}
	denied := []access{
		// No way to more rights: RBAC, impersonation, tokens, webhooks, CRDs.
		{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "", "team-a"},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"update", "rbac.authorization.k8s.io", "clusterroles", "", ""},
		{"impersonate", "", "serviceaccounts", "", "kube-system"},
		{"impersonate", "", "users", "", ""},
		{"create", "", "serviceaccounts", "token", "kube-system"},
		{"create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", ""},
		{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", ""},
		{"create", "certificates.k8s.io", "certificatesigningrequests", "", ""},
		// No pods of its own, no way into others' pods, no nodes.
		{"create", "", "pods", "", "team-a"},
		{"create", "", "pods", "exec", "team-a"},
		{"create", "", "pods", "attach", "team-a"},
		{"create", "", "pods", "portforward", "team-a"},
		{"get", "", "pods", "log", "team-a"},
		{"get", "", "nodes", "", ""},
		{"get", "", "nodes", "proxy", ""},
		{"create", "apps", "daemonsets", "", "team-a"},
		{"create", "batch", "jobs", "", "team-a"},
		// Namespaces and storage are not its to manage; Secrets only as Helm uses them (a
		// chart that renders one, Memcached's auth file, has Helm patch it on upgrades, so
		// patch is granted; a collection is never deleted).
		{"delete", "", "namespaces", "", ""},
		{"create", "", "namespaces", "", ""},
		{"create", "", "persistentvolumes", "", ""},
		{"delete", "", "persistentvolumeclaims", "", "team-a"},
		{"deletecollection", "", "secrets", "", "kube-system"},
		// Leader election only in its own namespace.
		{"update", "coordination.k8s.io", "leases", "", "kube-system"},
		{"get", "coordination.k8s.io", "leases", "", "kube-node-lease"},
		// The CRs are the users': the operator never creates or deletes them.
		{"create", "tos.transwarp.io", "warpdrivepools", "", "team-a"},
		{"delete", "cache.example.com", "memcacheds", "", "team-a"},
	}
	check := func(a access, want bool) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   framework.ServiceAccountUser(env.ServiceAccount.Namespace, env.ServiceAccount.Name),
			Groups: framework.ServiceAccountGroups(env.ServiceAccount.Namespace),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
			},
		}}
		if err := env.Client.Create(context.Background(), sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != want {
			t.Errorf("%+v: allowed=%v, want %v (%s)", a, sar.Status.Allowed, want, sar.Status.Reason)
		}
	}
	for _, a := range allowed {
		check(a, true)
	}
	for _, a := range denied {
		check(a, false)
	}
}

// TestUndeployUninstallsReleases: with the operator running, make undeploy deletes the CRs
// first, the operator uninstalls their releases (the pool's StorageClass too), and then
// everything make deploy created goes.
func TestUndeployUninstallsReleases(t *testing.T) {
	deploy(t)
	stop := startOperator(t)
	defer stop()
	ns, crs := createSamples(t)
	for _, cr := range crs {
		waitDeployed(t, cr)
	}

	out, err := runMake(5*time.Minute, []string{"UNDEPLOY_TIMEOUT=120"}, "undeploy")
	if err != nil {
		t.Fatalf("make undeploy: %v\n%s", err, out)
	}
	t.Logf("make undeploy:\n%s", out)
	if strings.Contains(out, "removing their finalizers") {
		t.Errorf("undeploy had to remove finalizers although the operator ran")
	}
	stop()
	expectNothingLeft(t, ns)
	// The releases went by uninstall, not by garbage collection of the CRs' objects.
	logs, err := os.ReadFile(filepath.Join(env.LogDir, t.Name()+"-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range crs {
		uninstalled := false
		for _, line := range strings.Split(string(logs), "\n") {
			if strings.Contains(line, `"Release uninstalled"`) && strings.Contains(line, fmt.Sprintf(`{"name":%q,"namespace":%q}`, cr.GetName(), ns)) {
				uninstalled = true
			}
		}
		if !uninstalled {
			t.Errorf("the operator did not log the uninstall of %s %s/%s", cr.GetKind(), ns, cr.GetName())
		}
	}
}

// TestUndeployWithoutOperator: when the operator is gone, make undeploy does not hang on the
// CRs' finalizers: after UNDEPLOY_TIMEOUT it removes them, deletes what the releases left
// that no owner reference collects, and removes everything else.
func TestUndeployWithoutOperator(t *testing.T) {
	deploy(t)
	stop := startOperator(t)
	ns, crs := createSamples(t)
	for _, cr := range crs {
		waitDeployed(t, cr)
	}
	t.Log("the operator crashes for good")
	stop()

	out, err := runMake(5*time.Minute, []string{"UNDEPLOY_TIMEOUT=5"}, "undeploy")
	if err != nil {
		t.Fatalf("make undeploy: %v\n%s", err, out)
	}
	t.Logf("make undeploy:\n%s", out)
	if !strings.Contains(out, "removing their finalizers") {
		t.Errorf("undeploy did not report the finalizers it removed")
	}
	expectNothingLeft(t, ns)
}

// startOperator runs the manager and the sidecar as the ServiceAccount, as the pod would.
func startOperator(t *testing.T) (stop func()) {
	t.Helper()
	var procs []*framework.Process
	for _, binary := range []string{"manager", "sidecar"} {
		// A log per test and binary, started empty: the tests read the manager's.
		name := t.Name() + "-" + binary
		_ = os.Remove(filepath.Join(env.LogDir, name+".log"))
		start := env.StartSidecar
		if binary == "manager" {
			start = env.StartManager
		}
		p, err := start(framework.ProcessOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		for _, p := range procs {
			if !p.Exited() {
				p.Kill()
			}
		}
	}
}

// createSamples creates a namespace with the sample CR of every kind (the pool with a
// StorageClass name of its own) and returns them.
func createSamples(t *testing.T) (string, []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	ns := "deploy-" + rand.String(5)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	files, _ := filepath.Glob(filepath.Join(env.Root, "config", "samples", "*_*.yaml"))
	var crs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cr := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &cr.Object); err != nil {
			t.Fatal(err)
		}
		cr.SetNamespace(ns)
		if cr.GetKind() == "WarpdrivePool" {
			if err := unstructured.SetNestedField(cr.Object, ns+"-pool", "spec", "storageClassName"); err != nil {
				t.Fatal(err)
			}
		}
		if err := env.Client.Create(ctx, cr); err != nil {
			t.Fatalf("creating %s: %v", cr.GetKind(), err)
		}
		crs = append(crs, cr)
	}
	if len(crs) != len(env.CRDs) {
		t.Fatalf("%d samples for %d kinds", len(crs), len(env.CRDs))
	}
	return ns, crs
}

func waitDeployed(t *testing.T, cr *unstructured.Unstructured) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(cr.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Deployed" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("%s %s not deployed: %v", cr.GetKind(), cr.GetName(), got.Object["status"])
	})
}

// expectNothingLeft checks that nothing of the operator is left in the cluster: no CRDs, no
// namespace, no ClusterRoles or bindings, and nothing of the samples' releases in ns: no
// release Secrets, no workloads, no pool StorageClass.
func expectNothingLeft(t *testing.T, ns string) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var left []string
		for _, crd := range env.CRDs {
			err := env.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, &apiextensionsv1.CustomResourceDefinition{})
			if !apierrors.IsNotFound(err) {
				left = append(left, "CRD "+crd.Name+errSuffix(err))
			}
		}
		err := env.Client.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			left = append(left, "Namespace "+namespace+errSuffix(err))
		}
		sel, _ := metav1.ParseToLabelSelector(partOf)
		selector, _ := metav1.LabelSelectorAsSelector(sel)
		crs := &rbacv1.ClusterRoleList{}
		if err := env.Client.List(ctx, crs, client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return err
		}
		for _, r := range crs.Items {
			left = append(left, "ClusterRole "+r.Name)
		}
		crbs := &rbacv1.ClusterRoleBindingList{}
		if err := env.Client.List(ctx, crbs, client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return err
		}
		for _, b := range crbs.Items {
			left = append(left, "ClusterRoleBinding "+b.Name)
		}
		secrets := &corev1.SecretList{}
		if err := env.Client.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
			return err
		}
		for _, s := range secrets.Items {
			left = append(left, "release Secret "+ns+"/"+s.Name)
		}
		for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}} {
			if err := env.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
			switch l := l.(type) {
			case *appsv1.DeploymentList:
				for _, d := range l.Items {
					left = append(left, "Deployment "+ns+"/"+d.Name)
				}
			case *appsv1.StatefulSetList:
				for _, s := range l.Items {
					left = append(left, "StatefulSet "+ns+"/"+s.Name)
				}
			}
		}
		scs := &storagev1.StorageClassList{}
		if err := env.Client.List(ctx, scs); err != nil {
			return err
		}
		for _, sc := range scs.Items {
			// Only this test's: a StorageClass another test leaked is not undeploy's.
			if sc.Name == ns+"-pool" || sc.Annotations["meta.helm.sh/release-namespace"] == ns {
				left = append(left, "StorageClass "+sc.Name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("%d left after make undeploy: %s", len(left), strings.Join(left, ", "))
		}
		return nil
	})
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + strconv.Quote(err.Error()) + ")"
}
