package faults

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
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
	const name = "app-0"
	f := newFaultFixture(t, fixtureOptions{kind: appService, n: 1, name: func(int) string { return name }})
	ns, keyRef := f.ns, f.keyRef

	personsUpgrade(t, ns, name, map[string]any{"replicas": 3})
	// The release is installed again from the CR (it has no record left that it trusts), over
	// the objects, when the manager sees the drift or the CR's edit, whichever comes first:
	// its revision 1 moves the person's aside. The person's revision 2 is still there,
	// refused, until the operator writes its own.
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

	_, keys := keysOf(t, keyRef)
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
	cfg := personsHelm(t, ns)
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

// TestPersonsHelmChangesUndone: a person's `helm upgrade --set replicas=3`, then `helm
// rollback` to revision 1, on the release of a CR that says 2, and no edit of the CR. Each is
// drift, put back from the CR's spec: after the upgrade, whose records the manager refuses,
// by installing the release again over its objects (the person's records moved aside); after
// the rollback by the repair of the manager's own deployed revision. The Deployment is at the
// CR's replicas and owned by the CR again, and the CR reports the person's records as refused
// and is Ready. The upgrade removes the Deployment's owner reference (the person's Helm
// renders none): only the version before it ties the change to the CR. Logged: how long the
// Deployment differed from the CR, and whether the CR said Ready meanwhile.
func TestPersonsHelmChangesUndone(t *testing.T) {
	if stock {
		t.Skip("the signed records are this operator's")
	}
	ctx := context.Background()
	const name = "app-0"
	f := newFaultFixture(t, fixtureOptions{kind: appService, n: 1, name: func(int) string { return name }})
	ns := f.ns
	// Revision 2, for the person's rollback to go back from.
	if err := appService.setReplicas(ctx, appService.newCR(ns, name, 0), 2); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns)

	personsUpgrade(t, ns, name, map[string]any{"replicas": 3})
	undone(t, ns, name, "helm upgrade --set replicas=3")

	personsRollback(t, ns, name, 1)
	undone(t, ns, name, "helm rollback to revision 1")
}

// undone waits until the Deployment of the AppService ns/name is at the CR's replicas (2) and
// owned by it after a person's Helm command, the CR Ready and reporting a refused record
// (condition and Event); it logs how long the Deployment differed and whether the CR said
// Ready meanwhile.
func undone(t *testing.T, ns, name, command string) {
	t.Helper()
	start := time.Now()
	var differed time.Duration
	readyWhileDiffering := false
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-app"}, d); err != nil {
			return err
		}
		cr := appService.newCR(ns, name, 0)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
			return err
		}
		ready, _, _ := framework.Condition(cr, "Ready")
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || metav1.GetControllerOf(d) == nil || metav1.GetControllerOf(d).UID != cr.GetUID() {
			differed = time.Since(start)
			readyWhileDiffering = readyWhileDiffering || ready == "True"
			return fmt.Errorf("after the person's %s, the Deployment asks for %d replicas, controller %v; want the CR's 2, and the CR",
				command, ptr.Deref(d.Spec.Replicas, 1), metav1.GetControllerOf(d))
		}
		if s, _, msg := framework.Condition(cr, "ReleaseRecordRefused"); s != "True" || !strings.Contains(msg, "not signed by this operator") {
			return fmt.Errorf("ReleaseRecordRefused=%q: %s; want the person's record reported", s, msg)
		}
		evs, err := events(ctx, ns, name, "ReleaseRecordRefused")
		if err != nil {
			return err
		}
		if !anyEventSays(evs, "not signed by this operator") {
			return errors.New("no ReleaseRecordRefused Event reports the person's record")
		}
		if ready != "True" {
			return fmt.Errorf("Ready=%q", ready)
		}
		return nil
	})
	t.Logf("after the person's %s the Deployment differed from the CR for at least %v (sampled), Ready=True meanwhile: %v",
		command, differed.Round(time.Millisecond), readyWhileDiffering)
}

// personsRollback rolls the release name of ns back to revision as `helm rollback` does.
func personsRollback(t *testing.T, ns, name string, revision int) {
	t.Helper()
	r := action.NewRollback(personsHelm(t, ns))
	r.Version = revision
	if err := r.Run(name); err != nil {
		t.Fatalf("helm rollback by a person: %v", err)
	}
}

// personsHelm is the Helm configuration of a person's helm CLI on namespace ns.
func personsHelm(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &env.Kubeconfig, &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}
