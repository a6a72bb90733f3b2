package security

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// tenant is a namespace editor: a ServiceAccount bound to "edit" in its namespace only.
type tenant struct {
	ns     string
	client client.Client
}

func newTenant(t *testing.T) *tenant {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}},
	}
	for _, o := range []client.Object{sa, rb} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: framework.ServiceAccountUser(ns, "tenant"), Groups: framework.ServiceAccountGroups(ns)}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	tn := &tenant{ns: ns, client: c}
	if err := env.Client.Create(ctx, tenantQuota(t, ns)); err != nil {
		t.Fatal(err)
	}
	// The aggregated roles reach "edit" through the controller-manager, and the quota admits
	// creates once the controller-manager counts the kinds (it discovers new resources every
	// 30 s, later on a cluster just started): wait until the tenant may create them.
	framework.Eventually(t, 3*time.Minute, func(ctx context.Context) error {
		cr := appService(ns, "probe", "probe-app", 1)
		if err := c.Create(ctx, cr, client.DryRunAll); err != nil {
			return fmt.Errorf("the tenant may not create AppServices yet: %w", err)
		}
		return nil
	})
	return tn
}

// tenantCRs is how many CRs of each kind a tenant's ResourceQuota admits: every tenant of the
// suite runs under one, as docs/deploying.md asks administrators to set.
const tenantCRs = 250

// tenantQuota is the ResourceQuota of a tenant's namespace ns: at most tenantCRs CRs of each
// of the operator's kinds (count/<plural>.<group>), since a CR that renders no pod (an
// AppService of 0 replicas) would use none of the namespace's pod quota.
func tenantQuota(t *testing.T, ns string) *corev1.ResourceQuota {
	t.Helper()
	kinds, err := framework.Kinds()
	if err != nil {
		t.Fatal(err)
	}
	hard := corev1.ResourceList{}
	for _, k := range kinds {
		hard[corev1.ResourceName("count/"+k.Resource().String())] = resource.MustParse(strconv.Itoa(tenantCRs))
	}
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-kinds"},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}}
}

func appService(ns, name, deployment string, replicas int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "appcontroller.k8s.io/v1alpha1", "kind": "AppService",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"deploymentName": deployment, "replicas": replicas},
	}}
	return u
}

func guestbook(ns, name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "webapp.tutorial.kubebuilder.io/v1", "kind": "Guestbook",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"replicas": replicas},
	}}
}

// snapshot is every object the operator may touch outside the tenant's namespace, and every
// cluster-scoped one, by "Kind ns/name" → uid/resourceVersion; and the namespaces being
// deleted when it was taken.
type snapshot struct {
	objects     map[string]string
	terminating map[string]bool
}

// outside takes a snapshot of everything outside namespace tenantNS.
func outside(t *testing.T, tenantNS string) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{objects: map[string]string{}, terminating: map[string]bool{}}
	namespaces := &corev1.NamespaceList{}
	if err := env.Client.List(ctx, namespaces); err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces.Items {
		if ns.DeletionTimestamp != nil {
			s.terminating[ns.Name] = true
		}
	}
	lists := []client.ObjectList{
		&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{},
		&appsv1.DeploymentList{}, &appsv1.StatefulSetList{}, &policyv1.PodDisruptionBudgetList{},
		&storagev1.StorageClassList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
	}
	for _, l := range lists {
		items, err := env.List(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.TrimSuffix(fmt.Sprintf("%T", l), "List")
		kind = kind[strings.LastIndex(kind, ".")+1:]
		for _, o := range items {
			if o.GetNamespace() == tenantNS || (kind == "ConfigMap" && o.GetName() == "kube-root-ca.crt") ||
				(kind == "ServiceAccount" && o.GetName() == "default") ||
				(kind == "Secret" && o.GetNamespace() == env.LeaseNamespace && strings.Contains(o.GetName(), "key")) ||
				(kind == "ConfigMap" && o.GetNamespace() == env.LeaseNamespace && strings.HasSuffix(o.GetName(), "-render-journal")) {
				// The tenant's own, what the cluster puts in every new namespace, the operator's
				// signing keys and its render journals (written at every render).
				continue
			}
			s.objects[fmt.Sprintf("%s %s/%s", kind, o.GetNamespace(), o.GetName())] = string(o.GetUID()) + "/" + o.GetResourceVersion()
		}
	}
	return s
}

// diff lists what changed between two snapshots, leaving out namespaces that were being
// deleted in either (earlier cases' namespaces, cleaned up in the background).
func (before snapshot) diff(after snapshot) []string {
	skip := func(key string) bool {
		ns := strings.SplitN(strings.SplitN(key, " ", 2)[1], "/", 2)[0]
		return before.terminating[ns] || after.terminating[ns]
	}
	var out []string
	for k, v := range before.objects {
		if skip(k) {
			continue
		}
		switch w, ok := after.objects[k]; {
		case !ok:
			out = append(out, "deleted "+k)
		case w != v:
			out = append(out, "changed "+k)
		}
	}
	for k := range after.objects {
		if _, ok := before.objects[k]; !ok && !skip(k) {
			out = append(out, "created "+k)
		}
	}
	sort.Strings(out)
	return out
}

// report fails the test with the violations found; against the stock operator it records
// them as its outcome instead.
func report(t *testing.T, violations []string) {
	t.Helper()
	if len(violations) == 0 {
		if stock {
			record(t, "not vulnerable")
		}
		return
	}
	if stock {
		record(t, "VULNERABLE: "+strings.Join(violations, "; "))
		return
	}
	for _, v := range violations {
		t.Error(v)
	}
}

var reportMu sync.Mutex

func record(t *testing.T, outcome string) {
	t.Logf("STOCK: %s", outcome)
	path := os.Getenv("WARPDRIVE_SECURITY_REPORT")
	if path == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\t%s\n", t.Name(), outcome)
}

// forged is a release record as a namespace editor can write it: a Secret of Helm's type and
// labels, holding any release they like.
type forged struct {
	name, chart string
	version     int
	status      release.Status
	manifest    string
	hooks       []*release.Hook
}

func (f forged) secret(ns string) *corev1.Secret {
	now := helmtime.Now()
	rel := &release.Release{
		Name: f.name, Namespace: ns, Version: f.version, Manifest: f.manifest, Hooks: f.hooks,
		Info:   &release.Info{Status: f.status, FirstDeployed: now, LastDeployed: now, Description: "forged"},
		Chart:  &chart.Chart{Metadata: &chart.Metadata{Name: f.chart, Version: "0.1.0", APIVersion: "v2"}},
		Config: map[string]any{},
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d", f.name, f.version),
			Labels: map[string]string{"owner": "helm", "name": f.name, "status": f.status.String(), "version": strconv.Itoa(f.version)}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(encodeRelease(rel))},
	}
}

// encodeRelease encodes a release as Helm's Secrets driver stores it.
func encodeRelease(rel *release.Release) string {
	b, err := json.Marshal(rel)
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// configMapYAML is a ConfigMap manifest in namespace ns (empty: the release's).
func configMapYAML(ns, name string) string {
	meta := fmt.Sprintf("  name: %s\n", name)
	if ns != "" {
		meta += fmt.Sprintf("  namespace: %s\n", ns)
	}
	return fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n%sdata:\n  planted: \"yes\"\n", meta)
}

// victim makes a namespace that the tenant may not touch, with a ConfigMap in it.
func victim(t *testing.T) (ns, configMap string) {
	t.Helper()
	ns = env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "precious"}, Data: map[string]string{"k": "v"}}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return ns, cm.Name
}

// deployed waits until cr reports its release deployed at a revision of at least minRev,
// and returns that revision.
func deployed(cr *unstructured.Unstructured, minRev int64) (int64, error) {
	var rev int64
	err := framework.Poll(context.Background(), 90*time.Second, func(ctx context.Context) error {
		got := cr.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		status, _, msg := framework.Condition(got, "Deployed")
		if status != "True" {
			return fmt.Errorf("%s %s: Deployed=%q: %s", cr.GetKind(), cr.GetName(), status, msg)
		}
		secrets := &corev1.SecretList{}
		if err := env.Client.List(ctx, secrets, client.InNamespace(cr.GetNamespace()),
			client.MatchingLabels{"owner": "helm", "name": cr.GetName(), "status": "deployed"}); err != nil {
			return err
		}
		rev = 0
		for _, s := range secrets.Items {
			if n, err := strconv.ParseInt(s.Labels["version"], 10, 64); err == nil && n > rev {
				rev = n
			}
		}
		if rev < minRev {
			return fmt.Errorf("%s %s: deployed revision %d, want at least %d", cr.GetKind(), cr.GetName(), rev, minRev)
		}
		return nil
	})
	return rev, err
}

// setReplicas edits the CR's spec.replicas as the tenant: a Helm upgrade.
func (tn *tenant) setReplicas(t *testing.T, cr *unstructured.Unstructured, replicas int64) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if err := tn.client.Patch(context.Background(), cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// deleteAndWait deletes the CR as the tenant and waits until it is gone (uninstalled, or its
// finalizer removed).
func (tn *tenant) deleteAndWait(cr *unstructured.Unstructured) error {
	if err := tn.client.Delete(context.Background(), cr.DeepCopy()); err != nil {
		return err
	}
	return framework.Poll(context.Background(), 90*time.Second, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr.DeepCopy())
		if err == nil {
			return fmt.Errorf("%s %s still there", cr.GetKind(), cr.GetName())
		}
		return client.IgnoreNotFound(err)
	})
}

// deploymentReplicas waits until Deployment ns/name asks for replicas.
func deploymentReplicas(ns, name string, replicas int32) error {
	return framework.Poll(context.Background(), 90*time.Second, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
			return fmt.Errorf("Deployment %s/%s asks for %v replicas, want %d", ns, name, d.Spec.Replicas, replicas)
		}
		return nil
	})
}

// refusedEvent waits for a Warning Event on cr with reason ReleaseRecordRefused naming secret.
func refusedEvent(cr *unstructured.Unstructured, secret string) error {
	return framework.Poll(context.Background(), 60*time.Second, func(ctx context.Context) error {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(cr.GetNamespace())); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == cr.GetName() && e.InvolvedObject.Kind == cr.GetKind() &&
				e.Reason == "ReleaseRecordRefused" && strings.Contains(e.Message, secret) {
				return nil
			}
		}
		return fmt.Errorf("no ReleaseRecordRefused Event on %s %s naming %s", cr.GetKind(), cr.GetName(), secret)
	})
}
