package faults

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestPersonsHelmUpgradeMovedAside: a person runs `helm upgrade --reuse-values --set
// replicas=3` on a CR's release, as the Helm CLI does it (Helm's SDK, its Secrets storage).
// Helm rewrites the operator's record and writes one of its own, neither signed. The
// operator refuses both and goes on from the CR: its records that Helm numbers next move the
// person's aside (kept, unlabelled, as <record>.refused), the workload follows the CR again
// (the person's 3 replicas are undone, then the CR's edit applies) and every record left as a
// record is the operator's, with no administrator involved.
func TestPersonsHelmUpgradeMovedAside(t *testing.T) {
	if stock {
		t.Skip("the signed records are this operator's")
	}
	ctx := context.Background()
	op := newOperator(t)
	ns := env.Namespace(t)
	keyRef, startManager := ownSigningKey(t, op)
	startManager()
	op.sidecar()
	const name = "app-0"
	env.Create(t, appService.newCR(ns, name, 1))
	waitReady(t, ns)

	personsUpgrade(t, ns, name, map[string]any{"replicas": 3})
	// The CR's edit installs the release again from the operator's own records (it has none
	// left that it trusts), over the objects: its revision 1 moves the person's aside. The
	// person's revision 2 is still there, refused, until the operator writes its own.
	if err := appService.setReplicas(ctx, appService.newCR(ns, name, 0), 2); err != nil {
		t.Fatal(err)
	}
	deploymentAt(t, ns, name+"-app", 2)
	// The next edit writes revision 2, and moves the person's aside too: the release's records
	// are the operator's alone, and the CR converges as after any upgrade.
	if err := appService.setReplicas(ctx, appService.newCR(ns, name, 0), 1); err != nil {
		t.Fatal(err)
	}
	s := waitReady(t, ns)
	deploymentAt(t, ns, name+"-app", 1)

	key := &corev1.Secret{}
	if err := env.Client.Get(ctx, keyRef, key); err != nil {
		t.Fatal(err)
	}
	keys, err := releasesign.ParseKeys(key.Data)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.releases[name] {
		if err := keys.Verify(ns, &r.secret); err != nil {
			t.Errorf("record %s after the person's upgrade: %v", r.secret.Name, err)
		}
	}
	for _, v := range []int{1, 2} {
		aside := &corev1.Secret{}
		key := client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("sh.helm.release.v1.%s.v%d%s", name, v, releasesign.DisplacedSuffix)}
		if err := env.Client.Get(ctx, key, aside); err != nil {
			t.Errorf("the person's revision %d, moved aside: %v", v, err)
			continue
		}
		t.Logf("the person's revision %d moved aside to %s, labels %s", v, aside.Name, aside.Annotations[releasesign.DisplacedLabelsAnnotation])
	}
}

// deploymentAt waits until the Deployment ns/name asks for replicas.
func deploymentAt(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
			return fmt.Errorf("the Deployment asks for %v replicas, want the CR's %d", d.Spec.Replicas, replicas)
		}
		return nil
	})
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
