package e2e

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The operator acts with more rights than the users who create CRs: a namespace editor may
// create AppServices, UnitedDeployments, Guestbooks and Memcacheds (their editor roles
// aggregate to "edit"), and the operator then creates objects for them. These tests try to
// make it act outside the CR's namespace, or on objects that are not the CR's, through what
// such a user controls: spec values and CR names.

// expectOnlyIn checks that every object of release is in namespace ns: none in another
// namespace, none cluster-scoped.
func expectOnlyIn(t testing.TB, release, ns string) {
	t.Helper()
	objs, err := env.ReleaseObjects(context.Background(), release)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("release %s has no objects at all: the check would prove nothing", release)
	}
	for _, o := range objs {
		if !strings.Contains(o, " "+ns+"/") {
			t.Errorf("release %s of namespace %s has an object elsewhere: %s", release, ns, o)
		}
	}
}

// TestSpecCannotChooseNamespace: a spec has no field for a namespace. The CRD schema does not
// know one, so a strict client is refused and any other client's field is pruned before the
// operator sees it; the release lands in the CR's namespace only.
func TestSpecCannotChooseNamespace(t *testing.T) {
	ns := env.Namespace(t)
	victim := env.Namespace(t)
	overrides := map[string]any{"deploymentName": "web", "namespace": victim}

	strict := newCR(t, "AppService", ns, "redirect", overrides)
	err := env.Client.Create(context.Background(), strict, client.FieldValidation("Strict"))
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.namespace"`) {
		t.Fatalf("strict create with spec.namespace: %v, want it refused as an unknown field", err)
	}

	cr := newCR(t, "AppService", ns, "redirect", overrides)
	env.Create(t, cr)
	if _, found, _ := unstructured.NestedString(mustGetCR(t, cr).Object, "spec", "namespace"); found {
		t.Fatal("spec.namespace was stored: the CRD does not prune unknown fields")
	}
	waitCondition(t, cr, "Deployed", "True")
	expectOnlyIn(t, "redirect", ns)
}

// TestHostileStringsStayValues: strings that would break the YAML of a template or read as
// templates reach the objects as plain values. They cannot add a namespace, a field or an
// object; names, where the schema restricts them, are refused at admission.
func TestHostileStringsStayValues(t *testing.T) {
	ns := env.Namespace(t)
	victim := env.Namespace(t)
	hostile := map[string]string{
		"newline":  "x\nnamespace: " + victim,
		"template": "{{ .Release.Namespace }}",
		"unicode":  "ünïcødé/☃:🚀\u202e",
		"document": "x\"\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: injected, namespace: " + victim + "}",
	}
	for name, s := range hostile {
		cr := newCR(t, "Memcached", ns, "hostile-"+name, map[string]any{"image": s})
		env.Create(t, cr)
		waitCondition(t, cr, "Deployed", "True")
		d := deployment(cr, cr.GetName())
		if err := get(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != s {
			t.Errorf("%s: image %q, want the string verbatim %q", name, got, s)
		}
		expectOnlyIn(t, cr.GetName(), ns)
	}
	cms := &corev1.ConfigMapList{}
	if err := env.Client.List(context.Background(), cms, client.InNamespace(victim)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s appeared in namespace %s", cm.Name, victim)
		}
	}

	// Names end up in metadata.name, unquoted by Kubernetes: the schema admits DNS labels only.
	bad := newCR(t, "AppService", ns, "hostile-name", map[string]any{"deploymentName": "x\nnamespace: " + victim})
	if err := env.Client.Create(context.Background(), bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.deploymentName") {
		t.Errorf("deploymentName with a newline: %v, want Invalid naming spec.deploymentName", err)
	}
}

// TestNameCollidesWithAnotherKindsRelease: a release is named after its CR, for every kind.
// An AppService named like a WarpdrivePool of its namespace must not take the pool's release
// over: without the operator's guard, the two reconcilers upgraded the release to their own
// chart in turn, deleting and recreating the pool's cluster-scoped StorageClass each time,
// and deleting the AppService could uninstall the pool.
func TestNameCollidesWithAnotherKindsRelease(t *testing.T) {
	ns := env.Namespace(t)
	pool := kinds[0].newCR(t, ns, "shared", nil)
	env.Create(t, pool)
	waitCondition(t, pool, "Deployed", "True")
	waitRevision(t, ns, "shared", 1)
	scName, _, _ := unstructured.NestedString(pool.Object, "spec", "storageClassName")
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: scName}}
	if err := get(context.Background(), sc); err != nil {
		t.Fatal(err)
	}

	app := newCR(t, "AppService", ns, "shared", map[string]any{"deploymentName": "hijacker"})
	env.Create(t, app)
	got := waitCondition(t, app, "Irreconcilable", "True")
	if _, _, msg := framework.Condition(got, "Irreconcilable"); !strings.Contains(msg, "warpdrivepool") || !strings.Contains(msg, "another name") {
		t.Errorf("Irreconcilable message %q does not say that the release is another kind's", msg)
	}
	waitEvent(t, app, "ReleaseLookupFailed", "is of chart warpdrivepool, not appservice")
	expectPoolUntouched(t, pool, sc)
	if err := get(context.Background(), deployment(app, "hijacker")); !apierrors.IsNotFound(err) {
		t.Errorf("the AppService's Deployment exists (%v): its chart was installed over the pool's release", err)
	}

	t.Log("deleting the AppService leaves the pool's release alone")
	if err := env.Client.Delete(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	waitGone(t, app)
	expectPoolUntouched(t, pool, sc)
	if status, _, _ := framework.Condition(mustGetCR(t, pool), "Deployed"); status != "True" {
		t.Errorf("pool Deployed=%q after the AppService went, want True", status)
	}
}

// expectPoolUntouched checks that the pool's release is still at revision 1 and its
// StorageClass the very object it created.
func expectPoolUntouched(t testing.TB, pool *unstructured.Unstructured, sc *storagev1.StorageClass) {
	t.Helper()
	ctx := context.Background()
	secrets, err := releaseSecrets(ctx, pool.GetNamespace(), pool.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets) != 1 || secrets[0].Labels["version"] != "1" || secrets[0].Labels["status"] != "deployed" {
		var seen []string
		for _, s := range secrets {
			seen = append(seen, s.Labels["version"]+"="+s.Labels["status"])
		}
		t.Errorf("pool release revisions %v, want only 1=deployed", seen)
	}
	now := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc.Name}}
	if err := get(ctx, now); err != nil {
		t.Fatalf("the pool's StorageClass: %v", err)
	}
	if now.UID != sc.UID {
		t.Errorf("the pool's StorageClass was deleted and recreated (uid %s, was %s)", now.UID, sc.UID)
	}
	if err := get(ctx, statefulSet(pool, pool.GetName())); err != nil {
		t.Errorf("the pool's StatefulSet: %v", err)
	}
}

// TestNamesCollideWithForeignObjects: names a CR chooses may name objects that are not its
// release's: a Deployment someone created by hand, a StorageClass of the cluster, another
// namespace's pool's StorageClass. Helm refuses to adopt any of them, the CR reports it, and
// the object stays as it was.
func TestNamesCollideWithForeignObjects(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	other := env.Namespace(t)

	t.Log("a Deployment made by hand")
	byHand := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-hand", Labels: map[string]string{"app": "by-hand"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "by-hand"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "by-hand"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "by-hand:1"}}},
			},
		},
	}
	env.Create(t, byHand)
	app := newCR(t, "AppService", ns, "adopter", map[string]any{"deploymentName": "by-hand", "replicas": int64(1)})
	env.Create(t, app)
	failed := waitCondition(t, app, "ReleaseFailed", "True")
	if _, _, msg := framework.Condition(failed, "ReleaseFailed"); !strings.Contains(msg, "by-hand") {
		t.Errorf("ReleaseFailed message %q does not name the Deployment", msg)
	}
	d := deployment(app, "by-hand")
	if err := get(ctx, d); err != nil {
		t.Fatal(err)
	}
	if d.UID != byHand.UID || ptrValue(d.Spec.Replicas) != 3 || d.Spec.Template.Spec.Containers[0].Image != "by-hand:1" || d.Annotations["meta.helm.sh/release-name"] != "" {
		t.Errorf("the Deployment made by hand was changed: replicas %d, image %s, annotations %v",
			ptrValue(d.Spec.Replicas), d.Spec.Template.Spec.Containers[0].Image, d.Annotations)
	}

	t.Log("a StorageClass of the cluster")
	clusterSC := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: ns + "-cluster-default"},
		Provisioner: "example.com/other",
	}
	env.Create(t, clusterSC)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), clusterSC) })
	taker := kinds[0].newCR(t, ns, "taker", map[string]any{"storageClassName": clusterSC.Name})
	env.Create(t, taker)
	waitCondition(t, taker, "ReleaseFailed", "True")
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: clusterSC.Name}}
	if err := get(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if sc.UID != clusterSC.UID || sc.Provisioner != "example.com/other" || sc.Labels["app.kubernetes.io/managed-by"] != "" {
		t.Errorf("the cluster's StorageClass was changed: provisioner %s, labels %v", sc.Provisioner, sc.Labels)
	}

	t.Log("another namespace's pool's StorageClass")
	owner := kinds[0].newCR(t, other, "owner", nil)
	env.Create(t, owner)
	waitCondition(t, owner, "Deployed", "True")
	ownerSCName, _, _ := unstructured.NestedString(owner.Object, "spec", "storageClassName")
	ownerSC := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ownerSCName}}
	if err := get(ctx, ownerSC); err != nil {
		t.Fatal(err)
	}
	thief := kinds[0].newCR(t, ns, "thief", map[string]any{"storageClassName": ownerSCName})
	env.Create(t, thief)
	waitCondition(t, thief, "ReleaseFailed", "True")
	expectPoolUntouched(t, owner, ownerSC)
	if err := get(ctx, ownerSC); err != nil {
		t.Fatal(err)
	}
	if got := ownerSC.Parameters["poolNamespace"]; got != other {
		t.Errorf("the StorageClass of namespace %s's pool now serves namespace %s", other, got)
	}
}
