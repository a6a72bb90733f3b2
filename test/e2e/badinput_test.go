package e2e

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	create(t, bad)
	failed := waitCondition(t, bad, "ReleaseFailed", "True")
	if _, _, msg := condition(failed, "ReleaseFailed"); !strings.Contains(msg, "capacity must be greater than zero") {
		t.Errorf("ReleaseFailed message %q does not give the chart's reason", msg)
	}

	other := kinds[1].newCR(t, ns, "bystander", nil)
	create(t, other)
	waitCondition(t, other, "Deployed", "True")

	patchSpec(t, bad, map[string]any{"capacity": "10Gi"})
	fixed := waitCondition(t, bad, "Deployed", "True")
	if status, _, _ := condition(fixed, "ReleaseFailed"); status != "False" {
		t.Errorf("ReleaseFailed=%q after the fix, want False", status)
	}
}

// TestConflictingDeploymentName: two AppServices in one namespace that name the same
// Deployment. Helm refuses to adopt an object of another release: the second CR fails with
// that reason and the first CR's Deployment is left as it was.
func TestConflictingDeploymentName(t *testing.T) {
	ns := env.Namespace(t)
	app := kinds[1]
	first := app.newCR(t, ns, "first", map[string]any{"deploymentName": "shared", "replicas": int64(2)})
	create(t, first)
	waitCondition(t, first, "Deployed", "True")
	waitWorkload(t, app, first, 2)

	second := app.newCR(t, ns, "second", map[string]any{"deploymentName": "shared", "replicas": int64(4)})
	create(t, second)
	failed := waitCondition(t, second, "ReleaseFailed", "True")
	if _, _, msg := condition(failed, "ReleaseFailed"); !strings.Contains(msg, "shared") || !strings.Contains(msg, "first") {
		t.Errorf("ReleaseFailed message %q does not name the Deployment and its owner release", msg)
	}

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
	if status, _, _ := condition(mustGetCR(t, first), "Deployed"); status != "True" {
		t.Errorf("first CR Deployed=%q after the conflict, want True", status)
	}
}
