package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// scaleDeployment sets the replicas of Deployment ns/name, as `kubectl scale` or an HPA would.
func scaleDeployment(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Patch(context.Background(), d, patch); err != nil {
		t.Fatalf("scaling Deployment %s/%s: %v", ns, name, err)
	}
}

// deploymentReplicas is the replicas of Deployment ns/name.
func deploymentReplicas(ctx context.Context, ns, name string) (int32, error) {
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		return 0, err
	}
	return ptr.Deref(d.Spec.Replicas, 1), nil
}

// waitReplicas waits until Deployment ns/name has replicas.
func waitReplicas(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		got, err := deploymentReplicas(ctx, ns, name)
		if err == nil && got != replicas {
			err = fmt.Errorf("Deployment %s/%s has %d replicas, want %d", ns, name, got, replicas)
		}
		return err
	})
}

// holdReplicas fails t if, within a while (several drift checks and repairs), Deployment
// ns/name ever has the replicas the chart renders.
func holdReplicas(t testing.TB, ns, name string, rendered int32) {
	t.Helper()
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		got, err := deploymentReplicas(context.Background(), ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if got == rendered {
			t.Fatalf("Deployment %s/%s was set back to the chart's %d replicas", ns, name, rendered)
		}
	}
}

// The suite's manager repairs drift (the default, --drift not set): a scaled Deployment is set
// back to the CR's size; once an HPA scales it, its replicas are the HPA's, and the manager
// leaves them alone.
func TestDriftRepairLeavesHPAReplicas(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator fights every HPA")
	}
	ns := env.Namespace(t)
	cr := newCR(t, "Memcached", ns, "drift", map[string]any{"size": int64(2)})
	if err := env.Client.Create(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, cr, "Deployed", "True")
	waitReplicas(t, ns, "drift", 2)

	scaleDeployment(t, ns, "drift", 4)
	waitReplicas(t, ns, "drift", 2) // repaired

	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drift"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "drift"},
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}}}
	if err := env.Client.Create(context.Background(), hpa); err != nil {
		t.Fatal(err)
	}
	// The HPA of the local control plane has no metrics to act on; whatever it does, the
	// manager must not set the chart's 2 back.
	scaleDeployment(t, ns, "drift", 4)
	holdReplicas(t, ns, "drift", 2)

	// The HPA gone, the chart owns the replicas again: the next change is repaired.
	if err := env.Client.Delete(context.Background(), hpa); err != nil {
		t.Fatal(err)
	}
	scaleDeployment(t, ns, "drift", 5)
	waitReplicas(t, ns, "drift", 2)
}

// A manager of its own, over a kind of its own (the memcached chart's copy): with an ignore
// rule on the Deployments' /spec/replicas a scaled Deployment is left alone; restarted in
// report mode, the drift of the replicas is reported on the CR (a Warning Event naming the
// path, the Drifted condition), and still not reverted.
func TestDriftIgnoreAndReport(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator has no drift settings")
	}
	ns, chart, lease := env.Namespace(t), env.NewChartCopy(t), "drift-e2e-"+rand.String(5)
	kind := framework.RolloutGVK.Kind
	var manager *framework.Process
	start := func(n int, drift string) {
		var err error
		manager, err = env.StartManager(framework.ProcessOptions{Name: fmt.Sprintf("%s-manager-%d", lease, n),
			WatchesFile: chart.WatchesFile(),
			Flags:       []string{"--leader-election-id=" + lease, "--drift=" + kind + "=" + drift}})
		if err != nil {
			t.Fatal(err)
		}
		processes = append(processes, manager)
	}
	start(1, "repair;ignore=Deployment:/spec/replicas")
	t.Cleanup(func() {
		if err := chart.DeleteCRs(context.Background(), ns); err != nil {
			t.Errorf("deleting the CRs: %v", err)
		}
		manager.Stop()
	})
	cr := chart.NewCR(ns, "drift") // size 1
	if err := chart.Client.Create(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "drift", 1)

	scaleDeployment(t, ns, "drift", 3)
	holdReplicas(t, ns, "drift", 1)

	manager.Stop()
	start(2, "report")
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(framework.RolloutGVK)
		if err := chart.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		if status, reason, msg := framework.Condition(got, "Drifted"); status != "True" {
			return fmt.Errorf("condition Drifted=%q (%s: %s), want True", status, reason, msg)
		}
		return nil
	})
	waitEvent(t, cr, "DriftDetected", "Deployment drift: /spec/replicas")
	holdReplicas(t, ns, "drift", 1)
}
