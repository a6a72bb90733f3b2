// Package integration runs internal/operator in the test process, against the local cluster's
// apiserver (make cluster-up; $WARPDRIVE_KUBECONFIG), with a controller-runtime manager as
// cmd/manager builds one. It sits between the unit tests, whose fakes cannot tell how
// helm-operator-plugins sets up its watches, and the e2e suite, which runs the binaries.
// Without $WARPDRIVE_KUBECONFIG its tests are skipped; make test-e2e runs them.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"transwarp.io/tos/warpdrive-operator/internal/operator"
	"transwarp.io/tos/warpdrive-operator/internal/podargs"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// helmController is the name helm-operator-plugins gives the AppService reconciler's
// controller, the label of its controller-runtime metrics.
const helmController = "appservice-controller"

// newEnv connects to the local cluster, or skips t without one.
func newEnv(t *testing.T) *framework.Env {
	t.Helper()
	if os.Getenv(framework.KubeconfigEnv) == "" {
		t.Skipf("%s is not set: make test-e2e runs this test on the local cluster", framework.KubeconfigEnv)
	}
	env, err := framework.New()
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// TestStatusOnlyUpdatesSkipHelmReconciler fails when the informer event filters of
// internal/operator/informers (informerfilters.go) are no longer installed: they depend on helm-operator-plugins
// taking the CR kind's informer from the manager's cache, which operator.Setup wraps. A
// status-only write of a CR must not run the helm reconciler; a spec change must.
func TestStatusOnlyUpdatesSkipHelmReconciler(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	if err := env.InstallCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	// watches.yaml names its charts relative to the repository root.
	t.Chdir(env.Root)

	// The manager stops after the namespace's cleanup, which needs it to uninstall the
	// release: cleanups run last registered first.
	var stop func()
	t.Cleanup(func() {
		if stop != nil {
			stop()
		}
	})
	ns := env.Namespace(t)
	stop = startManager(t, env, ns)

	gvr := env.GVR("AppService")
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion(gvr.Group + "/" + gvr.Version)
	cr.SetKind("AppService")
	cr.SetNamespace(ns)
	cr.SetName("filtered")
	cr.Object["spec"] = map[string]any{"deploymentName": "filtered", "replicas": int64(1)}
	if err := env.Client.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}

	// Installed, and quiet: the count of reconciles has not moved for settle.
	const settle = 5 * time.Second
	var last float64
	lastChange := time.Now()
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		n, err := reconciles()
		if err != nil {
			return err
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(cr.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		if status, reason, msg := framework.Condition(got, "Deployed"); status != "True" {
			return fmt.Errorf("not deployed yet: Deployed=%q %s %s (%v reconciles)", status, reason, msg, n)
		}
		if n == 0 || time.Since(lastChange) < settle {
			return fmt.Errorf("%v reconciles, the last %s ago", n, time.Since(lastChange).Round(time.Second))
		}
		return nil
	})
	before := last

	// A status-only write, as the sidecar makes them.
	if err := env.Client.Status().Patch(ctx, cr, client.RawPatch(types.MergePatchType,
		[]byte(`{"status":{"availableReplicas":7}}`))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle) // the informer delivers the update, the queue would run it
	if n, err := reconciles(); err != nil {
		t.Fatal(err)
	} else if n != before {
		t.Fatalf("a status-only update ran the helm reconciler (%v reconciles, %v before): the event filters "+
			"of internal/operator/informers/informerfilters.go are not installed; does helm-operator-plugins still take the CR's "+
			"informer from the manager's cache?", n, before)
	}

	// The control: a spec change does reach it, so the count above could have moved.
	if err := env.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func(context.Context) error {
		n, err := reconciles()
		if err != nil {
			return err
		}
		if n == before {
			return fmt.Errorf("a spec change has not run the helm reconciler (%v reconciles)", n)
		}
		return nil
	})
}

// startManager runs operator.Setup's reconcilers in a manager of this process, its cache
// limited to namespace ns (as WATCH_NAMESPACE would limit it) so that it leaves every other
// CR of the cluster alone. It logs to <LogDir>/integration-manager.log.
func startManager(t *testing.T, env *framework.Env, ns string) (stop func()) {
	t.Helper()
	logFile, err := os.Create(filepath.Join(env.LogDir, "integration-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	// The period and the workers of the pod (config/default), as bin/manager runs with them.
	period, ok := env.PodFlag(podargs.Manager, "reconcile-period")
	workers, ok2 := env.PodFlag(podargs.Manager, "max-concurrent-reconciles")
	if !ok || !ok2 {
		t.Fatalf("config/default's manager sets no --reconcile-period or --max-concurrent-reconciles: %v", env.PodArgs[podargs.Manager])
	}
	reconcilePeriod, err := time.ParseDuration(period)
	if err != nil {
		t.Fatal(err)
	}
	maxConcurrent, err := strconv.Atoi(workers)
	if err != nil {
		t.Fatal(err)
	}
	err = operator.Setup(mgr, operator.Options{
		WatchesFile:             "watches.yaml",
		ReconcilePeriod:         reconcilePeriod,
		MaxConcurrentReconciles: maxConcurrent,
		MaxReleaseHistory:       10,
		// Release records read by name from the cache in every namespace, as in one crowded
		// with them (internal/releaserecords); bin/manager in the e2e suite lists them as Helm does.
		ReleaseListSecretsPerGET: 0,
		// The key bin/manager uses with --leader-election-namespace=LeaseNamespace, as the
		// e2e suite runs it: the releases of both are signed alike.
		SigningKey: types.NamespacedName{Namespace: env.LeaseNamespace, Name: "warpdrive-operator-release-signing-key"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
		_ = logFile.Close()
	}
}

// reconciles is how many reconciles the AppService helm controller has run in this process,
// from controller-runtime's metrics (whatever their result).
func reconciles() (float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == helmController {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum, nil
}
