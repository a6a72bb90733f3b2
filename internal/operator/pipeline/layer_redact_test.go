package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// A visit's errors never quote what it read from Secrets, in the layers above the redaction
// (here the outcomes, whose message becomes the conditions); and the strings are dropped
// when the visit ends.
func TestRedactionOfAVisitsErrors(t *testing.T) {
	const canary = "canary-5d1e0b"
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db",
		Labels: map[string]string{valuesfrom.ReadableLabel: "true"}},
		Data: map[string][]byte{"values.yaml": []byte("password: " + canary)}}
	cr := actiontest.AppServiceCR().(*unstructured.Unstructured)
	cr.Object["spec"] = map[string]any{"valuesFrom": []any{map[string]any{"kind": "Secret", "name": "db"}}}
	res, err := valuesfrom.Resolver{Reader: fake.NewClientBuilder().WithObjects(src).Build()}.Resolve(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}

	o := outcomes.New()
	go func() {
		for range o.Notify() {
		}
	}()
	o.Resolved(cr, res.Sources, res.Secrets, res.Values)
	engine := actiontest.Failing(errors.New(`template: x/templates/secret.yaml:3: error calling fail: password `+canary+` is weak`), nil)
	c, err := withOutcomes(withRedaction(actiontest.EngineOf(engine), o), o, metrics.NewFleet(0)).ActionClientFor(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Install("x", "team-a", nil, nil)
	if err == nil || strings.Contains(err.Error(), canary) || !strings.Contains(err.Error(), valuesfrom.Redacted) {
		t.Fatalf("the reconciler got %v", err)
	}
	e, _ := o.Get(client.ObjectKeyFromObject(cr), cr.GetUID())
	if strings.Contains(e.Failure.Message, canary) {
		t.Errorf("the outcome quotes the Secret: %s", e.Failure.Message)
	}
	if !o.Redactor(client.ObjectKeyFromObject(cr)).Empty() {
		t.Error("the Secret's strings are kept after the visit failed")
	}

	o.Resolved(cr, res.Sources, res.Secrets, res.Values)
	o.Succeeded(cr, actiontest.ReleaseOf("appservice"))
	kept := !o.Redactor(client.ObjectKeyFromObject(cr)).Empty()
	if e, _ := o.Get(client.ObjectKeyFromObject(cr), cr.GetUID()); !e.AppliedSet || len(e.Applied) != 1 ||
		e.Applied[0].Name != "db" || kept {
		t.Errorf("after a success: applied %v (set %v), strings kept: %v", e.Applied, e.AppliedSet, kept)
	}
}
