// Command manager is the helm-operator of warpdrive-operator: it reconciles every kind in
// watches.yaml into Helm releases of its chart, with helm-operator-plugins as the Helm
// engine (see internal/operator for how it differs from the stock `helm-operator run`).
// Its flags are those of `helm-operator run`, so either binary runs with the same arguments.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/mgropts"
	"transwarp.io/tos/warpdrive-operator/internal/operator"
)

func main() {
	var (
		opts       operator.Options
		common     mgropts.Options
		pprofAddr  string
		signingKey string
	)
	flag.StringVar(&opts.WatchesFile, "watches-file", "./watches.yaml", "Path to the watches file.")
	// The stock helm-operator re-renders and dry-runs every CR every minute, which costs CPU in
	// proportion to the number of CRs while nothing happens. Drift is repaired from watch
	// events on the rendered objects, so the periodic pass is only a safety net here.
	flag.DurationVar(&opts.ReconcilePeriod, "reconcile-period", 10*time.Hour,
		"How often every CR is reconciled even without events (a watch's reconcilePeriod overrides it).")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", runtime.NumCPU(),
		"Reconciles run at once, per kind (a watch's maxConcurrentReconciles overrides it).")
	flag.IntVar(&opts.MaxReleaseHistory, "max-release-history", 10,
		"Revisions kept per release; older release Secrets are deleted (0: keep all).")
	common.BindFlags(flag.CommandLine, mgropts.Flags{
		MetricsAddr:                  ":8080",
		MetricsAddrUsage:             "Address of the metrics endpoint (0 disables it).",
		ProbeAddr:                    ":8081",
		ProbeAddrUsage:               "Address of /healthz and /readyz (0 disables them).",
		LeaderElectUsage:             "Elect a leader, so that only one replica reconciles.",
		LeaderElectionID:             "warpdrive-operator.transwarp.io",
		LeaderElectionNamespaceUsage: "Namespace of the Lease (default: the pod's namespace; required out of cluster with --leader-elect).",
	})
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address of the pprof endpoints (0 disables them).")
	flag.StringVar(&signingKey, "release-signing-key", defaultSigningKeyName,
		"Secret holding the key that signs release records, as <name> in the operator's namespace (POD_NAMESPACE, the "+
			"in-cluster namespace, or --leader-election-namespace) or <namespace>/<name>; created if missing.")
	flag.Parse()
	common.SetLogger()
	log := ctrl.Log.WithName("setup")
	opts.LeaderElection = common.LeaderElect
	var err error
	if opts.SigningKey, err = signingKeySecret(signingKey, common.LeaderElectionNamespace); err != nil {
		log.Error(err, "locating the release signing key")
		os.Exit(1)
	}

	mgrOpts := common.Manager()
	mgrOpts.PprofBindAddress = pprofAddr
	mgrOpts.Cache = cache.Options{
		// Nothing reads managedFields or kubectl's last-applied copy from the cache; they are
		// a large part of every object (see stripUnread).
		DefaultTransform: stripUnread,
		// The reconcilers watch Secrets only to notice deleted release Secrets (Helm reads
		// releases through its own client): without a selector the cache would hold every
		// Secret of the cluster, and with their data every release, chart included.
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Label:     labels.SelectorFromSet(labels.Set{"owner": "helm"}),
				Transform: dropSecretData,
			},
		},
	}
	mgr, err := mgropts.NewManager(mgrOpts, log)
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	if err := operator.Setup(mgr, opts); err != nil {
		log.Error(err, "setting up the reconcilers")
		os.Exit(1)
	}
	log.Info("starting the manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}

// defaultSigningKeyName is the Secret, in the operator's namespace, of the key that signs
// release records (internal/releasesign).
const defaultSigningKeyName = "warpdrive-operator-release-signing-key"

// signingKeySecret locates the signing key's Secret: flag is <name> or <namespace>/<name>; a
// bare name is in the operator's own namespace, which namespace editors cannot read.
func signingKeySecret(flag, leaderElectionNamespace string) (types.NamespacedName, error) {
	if ns, name, ok := strings.Cut(flag, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: name}, nil
	}
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = leaderElectionNamespace
	}
	if ns == "" {
		return types.NamespacedName{}, fmt.Errorf("out of a cluster, give --release-signing-key=<namespace>/<name> " +
			"or --leader-election-namespace: the key must live in a namespace only the operator's admins can read")
	}
	return types.NamespacedName{Namespace: ns, Name: flag}, nil
}

// lastApplied is the annotation in which `kubectl apply` keeps a copy of what it applied.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// stripUnread drops from every cached object what the manager never reads: managed fields
// and kubectl's last-applied copy of the object. A CR applied with kubectl carries its spec
// twice; the cache of a CR kind is as large as a tenant makes its CRs, and is shared by every
// tenant, so only what is read is kept.
func stripUnread(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a[lastApplied] != "" {
			delete(a, lastApplied)
			m.SetAnnotations(a)
		}
	}
	return obj, nil
}

// dropSecretData keeps a cached Secret's metadata only (and, like every cached object, no
// managed fields: a per-object transform replaces the default one).
func dropSecretData(obj any) (any, error) {
	if s, ok := obj.(*corev1.Secret); ok {
		s.Data, s.StringData = nil, nil
	}
	return stripUnread(obj)
}
