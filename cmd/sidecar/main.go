// Command sidecar runs as a second container beside the helm-operator and
// writes the live state of each CR's workloads (replicas, readyReplicas,
// availableReplicas, selector and the RolledOut condition) into the CR's status, for
// every kind listed in watches.yaml (see internal/workloadstatus), and keeps
// the books of each WarpdrivePool's claims in status.pool (see
// internal/poolstatus).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	helmmgr "github.com/operator-framework/helm-operator-plugins/pkg/manager"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"transwarp.io/tos/warpdrive-operator/internal/poolstatus"
	"transwarp.io/tos/warpdrive-operator/internal/watches"
	"transwarp.io/tos/warpdrive-operator/internal/workloadstatus"
)

// Leader election keeps a Lease (client-go's LeaseLock reads, creates and updates it;
// releasing it on exit is an update) and records its transitions as Events.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// --metrics-secure checks each scraper's token and its right to GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

var setupLog = ctrl.Log.WithName("setup")

func main() {
	var (
		watchesFile             string
		metricsAddr             string
		probeAddr               string
		leaderElect             bool
		secureMetrics           bool
		leaderElectionID        string
		leaderElectionNamespace string
	)
	flag.StringVar(&watchesFile, "watches-file", "./watches.yaml", "Path to the helm-operator's watches file; a status controller runs for each kind in it.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8082", "Address the metrics endpoint binds to; \"0\" disables it.")
	flag.BoolVar(&secureMetrics, "metrics-secure", false,
		"Serve metrics over HTTPS, to clients the apiserver authenticates and authorizes (TokenReview, SubjectAccessReview).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8083", "Address the /healthz and /readyz probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader through a Lease so that only one replica writes status.")
	flag.StringVar(&leaderElectionID, "leader-election-id", "warpdrive-sidecar.transwarp.io", "Name of the leader election Lease.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease; defaults to the pod's namespace in-cluster.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	ws, err := watches.Load(watchesFile)
	if err != nil {
		setupLog.Error(err, "Unable to load watches")
		os.Exit(1)
	}
	gvks := make([]schema.GroupVersionKind, 0, len(ws))
	gks := make([]schema.GroupKind, 0, len(ws))
	for _, w := range ws {
		gvks = append(gvks, w.GroupVersionKind())
		gks = append(gks, w.GroupVersionKind().GroupKind())
	}
	kinds := workloadstatus.NewKindSet(gks...)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		setupLog.Error(err, "Unable to build scheme")
		os.Exit(1)
	}

	// The same protection as the manager's metrics: in the pod both endpoints are reachable
	// from the whole cluster network, and metrics name every CR and namespace.
	metrics := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics}
	if secureMetrics {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metrics,
		HealthProbeBindAddress: probeAddr,
		// Controllers only start on the leader, so a standby replica writes
		// nothing; its cache may still warm up. Releasing the Lease on exit
		// lets a standby take over without waiting for the lease to expire;
		// this is safe because the process ends right after the manager stops.
		LeaderElection:                leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       leaderElectionNamespace,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         poolstatus.CacheOptions(workloadstatus.CacheOptions(gvks), poolstatus.PoolKind),
		},
		// controller-runtime reads unstructured objects straight from the API
		// server unless told otherwise; the CRs are read on every sync, so
		// serve them from the (trimmed) cache too.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	}
	// Watch the same namespaces as the helm-operator (WATCH_NAMESPACE).
	helmmgr.ConfigureWatchNamespaces(&opts, setupLog)

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts)
	if err != nil {
		setupLog.Error(err, "Unable to create manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := setupControllers(ctx, mgr, ws, kinds); err != nil {
		setupLog.Error(err, "Unable to set up controllers")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		setupLog.Error(err, "Unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		setupLog.Error(err, "Unable to set up ready check")
		os.Exit(1)
	}

	setupLog.Info("Starting manager", "kinds", len(ws), "leaderElection", leaderElect)
	if err := mgr.Start(ctx); err != nil {
		setupLog.Error(err, "Manager exited with an error")
		os.Exit(1)
	}
}

// setupControllers registers the workload index and one status controller
// per watched kind.
func setupControllers(ctx context.Context, mgr ctrl.Manager, ws []watches.Watch, kinds workloadstatus.KindSet) error {
	if err := workloadstatus.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	for _, w := range ws {
		r := &workloadstatus.StatusReconciler{
			Client:   mgr.GetClient(),
			Live:     mgr.GetAPIReader(),
			GVK:      w.GroupVersionKind(),
			Kinds:    kinds,
			Selector: w.Selector,
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("status controller for %s: %w", w.GroupVersionKind(), err)
		}
		setupLog.Info("Configured status controller", "gvk", w.GroupVersionKind(), "chart", w.Chart)
		if w.GroupVersionKind().GroupKind() == poolstatus.PoolKind {
			if err := poolstatus.Setup(ctx, mgr, w.GroupVersionKind(), w.Selector); err != nil {
				return fmt.Errorf("pool bookkeeping for %s: %w", w.GroupVersionKind(), err)
			}
			setupLog.Info("Configured pool bookkeeping", "gvk", w.GroupVersionKind())
		}
	}
	return nil
}
