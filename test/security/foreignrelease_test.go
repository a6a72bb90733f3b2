package security

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// An administrator installed release "db" of the AppService chart with the helm CLI in a
// tenant's namespace. The tenant, who may create AppServices there, names one "db": the
// operator must neither install over that release (moving its records aside) nor take its
// objects, which Helm adopts by their annotations alone. Two cases:
//   - the release's records are there: the CR is Stalled ReleaseNameTaken;
//   - the records are gone (deleted, or the release uninstalled with its objects kept) and
//     only the objects are left, with Helm's annotations naming release "db": the CR is
//     Stalled ObjectNotOwned, as nothing proves them the CR's.
//
// Each with a Warning Event of the reason; the records and the Deployment stay as the CLI
// left them.
func TestCRNamedAfterAnotherToolsRelease(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dropRecords bool
		reason      string
	}{
		{"records kept", false, statuscontract.ReasonReleaseNameTaken},
		{"records gone", true, statuscontract.ReasonObjectNotOwned},
	} {
		t.Run(tc.name, func(t *testing.T) { crNamedAfterAnotherToolsRelease(t, tc.dropRecords, tc.reason) })
	}
}

func crNamedAfterAnotherToolsRelease(t *testing.T, dropRecords bool, reason string) {
	ctx := context.Background()
	tn := newTenant(t)
	const name, deployment = "db", "db-app"
	chrt, err := loader.Load(filepath.Join(framework.RepoRoot(), "helm-charts", "appservice"))
	if err != nil {
		t.Fatal(err)
	}
	if !stock {
		if err := env.WaitForTakeOver(ctx); err != nil {
			t.Fatal(err)
		}
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &env.Kubeconfig, &tn.ns
	cli := &action.Configuration{}
	if err := cli.Init(flags, tn.ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cli)
	install.ReleaseName, install.Namespace = name, tn.ns
	if _, err := install.Run(chrt, map[string]any{"deploymentName": deployment, "replicas": 1}); err != nil {
		t.Fatalf("the administrator's helm install: %v", err)
	}
	record := client.ObjectKey{Namespace: tn.ns, Name: "sh.helm.release.v1." + name + ".v1"}
	if dropRecords {
		if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: record.Namespace, Name: record.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	before := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: deployment}, before); err != nil {
		t.Fatal(err)
	}

	cr := appService(tn.ns, name, deployment, 2)
	if err := tn.client.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tn.deleteAndWait(cr) })
	var v []string
	err = framework.Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		got := cr.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		if c := statuscontract.Find(statuscontract.Conditions(got), statuscontract.Stalled); c == nil ||
			c.Status != metav1.ConditionTrue || c.Reason != reason {
			return fmt.Errorf("Stalled: %+v, want True %s", c, reason)
		}
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(tn.ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no Warning Event %s on the CR", reason)
	})
	if err != nil {
		v = append(v, "the CR named after the release: "+err.Error())
	}
	time.Sleep(5 * time.Second) // any retry of the install would have touched them by now

	after := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: deployment}, after); err != nil {
		v = append(v, "the release's Deployment: "+err.Error())
	} else {
		if owner := metav1.GetControllerOf(after); owner != nil {
			v = append(v, fmt.Sprintf("the release's Deployment was adopted: controller %s %s", owner.Kind, owner.Name))
		}
		if after.Generation != before.Generation || *after.Spec.Replicas != 1 {
			v = append(v, fmt.Sprintf("the release's Deployment was changed: generation %d -> %d, replicas %d",
				before.Generation, after.Generation, *after.Spec.Replicas))
		}
	}
	if !dropRecords {
		rec := &corev1.Secret{}
		if err := env.Client.Get(ctx, record, rec); err != nil || rec.Labels["owner"] != "helm" {
			v = append(v, fmt.Sprintf("the release's record %s: %v, labels %v", record.Name, err, rec.Labels))
		}
		aside := &corev1.Secret{}
		moved := client.ObjectKey{Namespace: tn.ns, Name: record.Name + releasesign.DisplacedSuffix}
		if err := env.Client.Get(ctx, moved, aside); err == nil {
			v = append(v, "the release's record was moved aside to "+moved.Name)
		}
	}
	report(t, v)
}
