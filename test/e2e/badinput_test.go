package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestAdmissionRejectsInvalidSpec: a CR that violates its kind's schema never reaches the
// operator; the apiserver refuses it with a message that names the field.
func TestAdmissionRejectsInvalidSpec(t *testing.T) {
	ns := env.Namespace(t)
	cases := []struct {
		kind      string
		overrides map[string]any
		drop      string // a required spec field to remove
		field     string // what the error must name
	}{
		{kind: "AppService", overrides: map[string]any{"replicas": "three"}, field: "spec.replicas"},
		{kind: "AppService", overrides: map[string]any{"replicas": int64(-1)}, field: "spec.replicas"},
		{kind: "AppService", overrides: map[string]any{"deploymentName": "Not_A_Name"}, field: "spec.deploymentName"},
		{kind: "AppService", drop: "deploymentName", field: "spec.deploymentName"},
		{kind: "UnitedDeployment", overrides: map[string]any{"replicas": 1.5}, field: "spec.replicas"},
		{kind: "Guestbook", overrides: map[string]any{"serviceType": "ExternalName"}, field: "spec.serviceType"},
		{kind: "Memcached", overrides: map[string]any{"size": int64(-3)}, field: "spec.size"},
		{kind: "WarpdrivePool", overrides: map[string]any{"capacity": "lots"}, field: "spec.capacity"},
		{kind: "WarpdrivePool", drop: "capacity", field: "spec.capacity"},
		{kind: "WarpdrivePool", overrides: map[string]any{"reclaimPolicy": "Recycle"}, field: "spec.reclaimPolicy"},
		{kind: "AppService", overrides: map[string]any{"replicas": int64(101)}, field: "spec.replicas"},
		{kind: "Memcached", overrides: map[string]any{"size": int64(1) << 31}, field: "spec.size"},
		{kind: "AppService", overrides: map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "lots"}}}, field: "spec.resources.limits.cpu"},
		{kind: "AppService", overrides: map[string]any{"deploymentName": strings.Repeat("d", 64)}, field: "spec.deploymentName"},
		{kind: "WarpdrivePool", overrides: map[string]any{"storageClassName": strings.Repeat("s", 254)}, field: "spec.storageClassName"},
		// A spec of 1 MiB: admitted, the manifest would make the CR's status too large to store.
		{kind: "Memcached", overrides: map[string]any{"image": strings.Repeat("i", 1<<20)}, field: "spec.image"},
		// Label values the apiserver would refuse in the rendered StatefulSet, and a 1 MiB
		// one: every free-form field is bounded, so the cache of CRs is too.
		{kind: "WarpdrivePool", overrides: map[string]any{"nodeSelector": map[string]any{"disk": strings.Repeat("l", 64)}}, field: "spec.nodeSelector"},
		{kind: "WarpdrivePool", overrides: map[string]any{"nodeSelector": map[string]any{"disk": strings.Repeat("h", 1<<20)}}, field: "spec.nodeSelector"},
	}
	for _, tc := range cases {
		cr := newCR(t, tc.kind, ns, "invalid", tc.overrides)
		if tc.drop != "" {
			delete(cr.Object["spec"].(map[string]any), tc.drop)
		}
		err := env.Client.Create(context.Background(), cr)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s with %v (without %q): got %v, want Invalid naming %s", tc.kind, tc.overrides, tc.drop, err, tc.field)
		}
	}
}

// TestAdmissionRejectsLongNames: the CR name becomes the Helm release name, which Helm
// limits to 53 characters; a longer name is refused at admission instead of failing later.
func TestAdmissionRejectsLongNames(t *testing.T) {
	ns := env.Namespace(t)
	for _, kc := range kinds {
		ok := kc.newCR(t, ns, strings.Repeat("a", 53), nil)
		if err := env.Client.Create(context.Background(), ok); err != nil {
			t.Errorf("%s with a 53-character name: %v", kc.kind, err)
		} else if err := env.Client.Delete(context.Background(), ok); err != nil {
			t.Error(err)
		}
		long := kc.newCR(t, ns, strings.Repeat("a", 54), nil)
		err := env.Client.Create(context.Background(), long)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "53") {
			t.Errorf("%s with a 54-character name: got %v, want Invalid saying the limit is 53", kc.kind, err)
		}
	}
}

// TestRenderFailure: values the schema admits but the chart refuses leave the CR with
// ReleaseFailed=True and the chart's reason; the operator goes on serving other CRs, and a
// corrected spec then installs.
func TestRenderFailure(t *testing.T) {
	ns := env.Namespace(t)
	pool := kinds[0]
	if pool.kind != "WarpdrivePool" {
		t.Fatal("kinds[0] must be WarpdrivePool")
	}
	bad := pool.newCR(t, ns, "empty-pool", map[string]any{"capacity": "0Gi"})
	env.Create(t, bad)
	failed := waitCondition(t, bad, "ReleaseFailed", "True")
	if _, _, msg := framework.Condition(failed, "ReleaseFailed"); !strings.Contains(msg, "capacity must be greater than zero") {
		t.Errorf("ReleaseFailed message %q does not give the chart's reason", msg)
	}
	waitEvent(t, bad, "InstallFailed", "capacity must be greater than zero")

	other := kinds[1].newCR(t, ns, "bystander", nil)
	env.Create(t, other)
	waitCondition(t, other, "Deployed", "True")

	patchSpec(t, bad, map[string]any{"capacity": "10Gi"})
	fixed := waitCondition(t, bad, "Deployed", "True")
	if status, _, _ := framework.Condition(fixed, "ReleaseFailed"); status != "False" {
		t.Errorf("ReleaseFailed=%q after the fix, want False", status)
	}

	// The same mistake in an edit of the deployed CR fails the reconciler's dry run of the
	// upgrade; the release stays as it was.
	patchSpec(t, bad, map[string]any{"capacity": "0Gi"})
	broken := waitCondition(t, bad, "Irreconcilable", "True")
	if _, _, msg := framework.Condition(broken, "Irreconcilable"); !strings.Contains(msg, "capacity must be greater than zero") {
		t.Errorf("Irreconcilable message %q does not give the chart's reason", msg)
	}
	waitEvent(t, bad, "UpgradeFailed", "checking the upgrade (server-side dry run) of release empty-pool: execution error")
	waitRevision(t, ns, "empty-pool", 1)
}

// TestConflictingDeploymentName: two AppServices in one namespace that name the same
// Deployment. Helm refuses to adopt an object of another release: the second CR fails with
// that reason and the first CR's Deployment is left as it was.
func TestConflictingDeploymentName(t *testing.T) {
	ns := env.Namespace(t)
	app := kinds[1]
	first := app.newCR(t, ns, "first", map[string]any{"deploymentName": "shared", "replicas": int64(2)})
	env.Create(t, first)
	waitCondition(t, first, "Deployed", "True")
	waitWorkload(t, app, first, 2)

	second := app.newCR(t, ns, "second", map[string]any{"deploymentName": "shared", "replicas": int64(4)})
	env.Create(t, second)
	failed := waitCondition(t, second, "ReleaseFailed", "True")
	if _, _, msg := framework.Condition(failed, "ReleaseFailed"); !strings.Contains(msg, "shared") || !strings.Contains(msg, "first") {
		t.Errorf("ReleaseFailed message %q does not name the Deployment and its owner release", msg)
	}
	waitEvent(t, second, "InstallFailed", `key "meta.helm.sh/release-name" must equal "second": current value is "first"`)

	d := deployment(first, "shared")
	if err := get(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if got := d.Annotations["meta.helm.sh/release-name"]; got != "first" {
		t.Errorf("Deployment shared now belongs to release %q, want first", got)
	}
	if r := ptrValue(d.Spec.Replicas); r != 2 {
		t.Errorf("Deployment shared has %d replicas, want the first CR's 2", r)
	}
	if status, _, _ := framework.Condition(mustGetCR(t, first), "Deployed"); status != "True" {
		t.Errorf("first CR Deployed=%q after the conflict, want True", status)
	}
}

// waitEvent waits for a Warning Event on cr with the given reason and a message containing
// text. (helm-operator-plugins records none for failed releases; the manager does.)
func waitEvent(t testing.TB, cr *unstructured.Unstructured, reason, text string) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var list corev1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(cr.GetNamespace())); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Kind != cr.GetKind() || e.InvolvedObject.Name != cr.GetName() {
				continue
			}
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Message, text) {
				return nil
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return fmt.Errorf("%s %s: no Warning Event %s containing %q; Events: %v", cr.GetKind(), cr.GetName(), reason, text, seen)
	})
}

// TestRenderedObjectRejected: values the schema admits but the apiserver refuses in the
// objects the chart renders from them. Each CR gets ReleaseFailed=True with the apiserver's
// reason and an InstallFailed Event; a reason quoting a huge value is cut so that the status
// can still be stored; the operator goes on serving other CRs.
func TestRenderedObjectRejected(t *testing.T) {
	ns := env.Namespace(t)
	cases := []struct {
		cr   *unstructured.Unstructured
		text string // in the condition and the Event
	}{
		{kinds[1].newCR(t, ns, "requests-over-limits", map[string]any{"resources": map[string]any{
			"requests": map[string]any{"cpu": "2"}, "limits": map[string]any{"cpu": "1"}}}),
			"must be less than or equal to cpu limit"},
		// A label key the schema admits (up to 317 characters) and the apiserver refuses.
		{kinds[0].newCR(t, ns, "bad-label-key", map[string]any{"nodeSelector": map[string]any{strings.Repeat("k!", 158): "x"}}),
			"name part must consist of alphanumeric characters"},
		// A valid CR name that cannot name the chart's Service (a DNS-1035 label).
		{kinds[3].newCR(t, ns, "1-guestbook", nil), "a DNS-1035 label must"},
	}
	for _, tc := range cases {
		env.Create(t, tc.cr)
	}
	for _, tc := range cases {
		failed := waitCondition(t, tc.cr, "ReleaseFailed", "True")
		_, reason, msg := framework.Condition(failed, "ReleaseFailed")
		if reason != "InstallError" || !strings.Contains(msg, tc.text) || len(msg) > 32768+len(" … ") {
			t.Errorf("%s: ReleaseFailed %s (%d bytes) %.300q, want InstallError with %q in at most 32 KiB", tc.cr.GetName(), reason, len(msg), msg, tc.text)
		}
		waitEvent(t, tc.cr, "InstallFailed", tc.text)
	}

	bystander := kinds[4].newCR(t, ns, "bystander", nil)
	env.Create(t, bystander)
	waitCondition(t, bystander, "Deployed", "True")
	for _, p := range processes {
		if p.Exited() {
			t.Errorf("%s exited: see %s", p.Name, p.Log)
		}
	}
}

// TestNamesAtTheLimits: a CR of each kind named with the longest name admitted (53
// characters, Helm's limit), and Deployments named with 63 (a DNS label's), install and
// run; a name the apiserver does not admit for any object (unicode) is refused.
func TestNamesAtTheLimits(t *testing.T) {
	ns := env.Namespace(t)
	for _, kc := range kinds {
		// One first letter per kind: CRs of two kinds with one name would share a release.
		name := strings.ToLower(kc.kind[:1]) + strings.Repeat("n", 52)
		cr := kc.newCR(t, ns, name, map[string]any{kc.replicasField: int64(2)})
		if _, ok := cr.Object["spec"].(map[string]any)["deploymentName"]; ok {
			cr.Object["spec"].(map[string]any)["deploymentName"] = strings.ToLower(kc.kind[:1]) + strings.Repeat("d", 62)
		}
		env.Create(t, cr)
		waitCondition(t, cr, "Deployed", "True")
		w := kc.workload(cr)
		if _, ok := w.(*appsv1.StatefulSet); ok {
			w.SetName(name[:52]) // a StatefulSet's name is cut to 52: its pods' revision label
		}
		framework.Eventually(t, converge, func(ctx context.Context) error {
			if err := get(ctx, w); err != nil {
				return err
			}
			if desired, available := workloadReplicas(w); desired != 2 || available != 2 {
				return fmt.Errorf("%T %s: %d replicas, %d available; want 2", w, w.GetName(), desired, available)
			}
			return nil
		})
	}
	unicode := newCR(t, "Memcached", ns, "ünïcødé", nil)
	if err := env.Client.Create(context.Background(), unicode); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("a unicode name: %v, want Invalid naming metadata.name", err)
	}
}
