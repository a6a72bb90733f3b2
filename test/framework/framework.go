// Package framework is the e2e suite's test environment, in the spirit of controller-runtime's
// envtest but over a real local control plane (make cluster-up): it connects to the cluster,
// installs the CRDs from config/crd/bases, runs the operator's binaries from bin/ as child
// processes (as `make run` does) and offers small helpers to make namespaces and wait for
// conditions.
package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// KubeconfigEnv names the variable that points the suite at the cluster; `make test` sets it
// to the local cluster's kubeconfig.
const KubeconfigEnv = "WARPDRIVE_KUBECONFIG"

// Env is a connection to the test cluster plus the operator processes running against it.
type Env struct {
	Root       string // repository root: watches.yaml names charts relative to it
	Kubeconfig string
	LogDir     string
	Config     *rest.Config
	Client     client.Client
	Clientset  kubernetes.Interface
	CRDs       []*apiextensionsv1.CustomResourceDefinition

	// OperatorKubeconfig is what the operator's binaries run with: Kubeconfig, or one that
	// impersonates ServiceAccount (see ImpersonateEnv).
	OperatorKubeconfig string
	ServiceAccount     types.NamespacedName
	// LeaseNamespace is where the binaries keep their leader-election Leases.
	LeaseNamespace string
	// PodArgs are the arguments of the manager pod's containers in config/default, by
	// container name: StartManager and StartSidecar run the binaries with them.
	PodArgs map[string][]string
	// PodEnv are the variables the kubelet gives those containers from their resources
	// (podargs.Env: the memory limit the Go runtime's soft limit is set from), by container
	// name, as NAME=value: StartManager and StartSidecar run the binaries with them.
	PodEnv map[string][]string
}

// New connects to the cluster named by $WARPDRIVE_KUBECONFIG.
func New() (*Env, error) {
	kubeconfig := os.Getenv(KubeconfigEnv)
	if kubeconfig == "" {
		return nil, fmt.Errorf("%s is not set: run the e2e suite with `make test` (it starts the local cluster)", KubeconfigEnv)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	// The suite creates objects in bursts; the client-side default (5 QPS) would dominate it.
	cfg.QPS, cfg.Burst = 100, 200

	scheme := clientgoscheme.Scheme
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(filepath.Dir(kubeconfig), "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	e := &Env{Root: RepoRoot(), Kubeconfig: kubeconfig, LogDir: logDir, Config: cfg, Client: c, Clientset: cs}
	pod, err := RenderPod(e.Root)
	if err != nil {
		return nil, err
	}
	e.PodArgs, e.PodEnv = pod.Args, pod.Env
	if err := e.setupImpersonation(); err != nil {
		return nil, err
	}
	return e, nil
}

// RepoRoot is the repository root, found from this source file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// InstallCRDs applies every CRD in config/crd/bases (server-side, so a rerun updates them)
// and waits until the apiserver serves them.
func (e *Env) InstallCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(e.Root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in config/crd/bases (run make manifests): %v", err)
	}
	e.CRDs = nil
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := e.Client.Patch(ctx, crd, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", f, err)
		}
		e.CRDs = append(e.CRDs, crd)
	}
	for _, crd := range e.CRDs {
		if err := e.WaitCRDEstablished(ctx, crd.Name); err != nil {
			return err
		}
	}
	// A CRD's REST mapping reaches a new client only after discovery refreshes: a fresh
	// client sees them all.
	c, err := client.New(e.Config, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		return err
	}
	e.Client = c
	return nil
}

// WaitCRDEstablished waits, for up to a minute, until the CRD of name (plural.group) has
// the condition Established=True. A CRD just created or applied is not served at once:
// until the apiserver has accepted its names, a CR of its kind is refused, so whoever
// installs a CRD waits here before making CRs or clients of its kind. Established alone
// does not promise that a list of the kind succeeds yet (see NewChartCopy).
func (e *Env) WaitCRDEstablished(ctx context.Context, name string) error {
	return Poll(ctx, time.Minute, func(ctx context.Context) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not established", name)
	})
}

// GVR returns the resource of a kind installed by InstallCRDs.
func (e *Env) GVR(kind string) schema.GroupVersionResource {
	for _, crd := range e.CRDs {
		if crd.Spec.Names.Kind == kind {
			return schema.GroupVersionResource{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Resource: crd.Spec.Names.Plural}
		}
	}
	panic("no CRD for kind " + kind)
}

// Namespace creates a namespace for one test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(fmt.Sprintf("e2e-%s-%s", Slug(t.Name(), 40), rand.String(5)))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// CRs first, while the operator runs: their releases are uninstalled, including
		// cluster-scoped objects that deleting the namespace would leave behind.
		if err := e.DeleteCRs(context.Background(), name); err != nil {
			t.Errorf("cleaning up namespace %s: %v", name, err)
		}
		if err := e.Client.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// DeleteCRs deletes every CR of the installed kinds in namespace ns and waits until they are
// gone, that is until the operator has uninstalled their releases and removed its finalizer.
func (e *Env) DeleteCRs(ctx context.Context, ns string) error {
	remaining := func(ctx context.Context) ([]unstructured.Unstructured, error) {
		var all []unstructured.Unstructured
		for _, crd := range e.CRDs {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.ListKind})
			if err := e.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return nil, err
			}
			all = append(all, list.Items...)
		}
		return all, nil
	}
	crs, err := remaining(ctx)
	if err != nil {
		return err
	}
	for i := range crs {
		if err := e.Client.Delete(ctx, &crs[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		left, err := remaining(ctx)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%d CRs still there, e.g. %s %s (finalizers %v)", len(left), left[0].GetKind(), left[0].GetName(), left[0].GetFinalizers())
		}
		return nil
	})
}

// Slug makes s usable in an object name: lower case letters, digits and single dashes, at
// most n characters (the end of s, where test names differ).
func Slug(s string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteRune('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > n {
		out = strings.Trim(out[len(out)-n:], "-")
	}
	return out
}

// ChartKinds returns empty lists of every kind the charts in helm-charts/ render, cluster-scoped
// StorageClasses included: what a test lists to find the objects of a release.
func ChartKinds() []client.ObjectList {
	return []client.ObjectList{
		&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &corev1.ServiceList{},
		&corev1.ConfigMapList{}, &policyv1.PodDisruptionBudgetList{}, &storagev1.StorageClassList{},
	}
}

// List lists objects of a typed list kind and returns its items as client.Objects.
func (e *Env) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) ([]client.Object, error) {
	if err := e.Client.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, o := range items {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T is not a client.Object", o)
		}
		out = append(out, co)
	}
	return out, nil
}

// Poll calls check every 250 ms until it returns nil or the timeout passes; the error then
// says what was last seen. The timeout bounds a wait, it is not a timing goal.
func Poll(ctx context.Context, timeout time.Duration, check func(ctx context.Context) error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		// check gets ctx, not a context with the deadline: its last error must say what was
		// seen, not that a client call ran out of time.
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-deadline.C:
			return fmt.Errorf("still not true after %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// Eventually fails the test when check does not succeed within timeout.
func Eventually(t testing.TB, timeout time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	if err := Poll(context.Background(), timeout, check); err != nil {
		t.Fatal(err)
	}
}

// Condition returns the status, reason and message of the condition of type typ in cr's
// status.conditions (the helm-operator's), or empty strings when it has none.
func Condition(cr *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}

// Create creates obj, and fails the test when the apiserver refuses it.
func (e *Env) Create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
}
