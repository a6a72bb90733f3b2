package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestPersonsHelmUpgradeTakenBack: a person runs `helm upgrade --reuse-values --set
// replicas=3` on a CR's release, as the Helm CLI does it (Helm's SDK, its Secrets storage).
// Helm rewrites the operator's record and writes one of its own, neither signed: the CR's
// next edit does not apply, and its ReleaseRecordRefused condition says what to do. An
// administrator names the release on the key's Secret and restarts the manager: the records
// are taken over, the edit applies, and the workload follows the CR again.
func TestPersonsHelmUpgradeTakenBack(t *testing.T) {
	if stock {
		t.Skip("the signed records are this operator's")
	}
	ctx := context.Background()
	op := newOperator(t)
	ns := env.Namespace(t)
	keyRef, startManager := ownSigningKey(t, op)
	m := startManager()
	op.sidecar()
	const name = "app-0"
	env.Create(t, appService.newCR(ns, name, 1))
	waitReady(t, ns)

	personsUpgrade(t, ns, name, map[string]any{"replicas": 3})
	if err := appService.setReplicas(ctx, appService.newCR(ns, name, 0), 2); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(appService.gvk)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cr); err != nil {
			return err
		}
		if s, _, msg := framework.Condition(cr, "ReleaseRecordRefused"); s != "True" || !strings.Contains(msg, "helm upgrade or rollback") {
			return fmt.Errorf("ReleaseRecordRefused=%q: %s", s, msg)
		}
		return nil
	})

	// The administrator names the release on the key's Secret, and restarts the manager.
	m.Stop()
	key := &corev1.Secret{}
	if err := env.Client.Get(ctx, keyRef, key); err != nil {
		t.Fatal(err)
	}
	keys, err := releasesign.ParseKeys(key.Data)
	if err != nil {
		t.Fatal(err)
	}
	if key.Annotations == nil {
		key.Annotations = map[string]string{}
	}
	key.Annotations["warpdrive.transwarp.io/take-over-records-of"] = ns + "/" + name
	if err := env.Client.Update(ctx, key); err != nil {
		t.Fatal(err)
	}
	startManager()
	s := waitReady(t, ns)
	if err := noRefusals(ctx, ns, 1, func(int) string { return name }); err != nil {
		t.Error(err)
	}
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-app"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("the Deployment asks for %v replicas, want the CR's 2", d.Spec.Replicas)
	}
	for _, r := range s.releases[name] {
		if err := keys.Verify(ns, &r.secret); err != nil {
			t.Errorf("record %s after the take-over: %v", r.secret.Name, err)
		}
	}
	if err := env.Client.Get(ctx, keyRef, key); err != nil {
		t.Fatal(err)
	}
	t.Logf("taken over: %s", key.Annotations["warpdrive.transwarp.io/records-of-releases-taken-over"])
}

// personsUpgrade upgrades the release name of ns as `helm upgrade --reuse-values` with values
// set does, with the chart of helm-charts/appservice.
func personsUpgrade(t *testing.T, ns, name string, values map[string]any) {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &env.Kubeconfig, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.Load(filepath.Join(env.Root, "helm-charts", "appservice"))
	if err != nil {
		t.Fatal(err)
	}
	u := action.NewUpgrade(cfg)
	u.Namespace, u.ReuseValues = ns, true
	if _, err := u.Run(name, chrt, values); err != nil {
		t.Fatalf("helm upgrade by a person: %v", err)
	}
}
