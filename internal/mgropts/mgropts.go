// Package mgropts holds what the two processes, the manager and `manager sidecar`, set up alike
// around their controller-runtime manager: the flags of the metrics endpoint, the health
// probes, leader election and logging; the manager options built from them; and the
// manager itself, with its health checks and the namespaces it watches.
//
// Each process keeps its own defaults and help texts for these flags (both run in one pod,
// so their ports and Leases differ), and adds its own cache options and controllers.
package mgropts

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	helmmgr "github.com/operator-framework/helm-operator-plugins/pkg/manager"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"transwarp.io/tos/warpdrive-operator/internal/handover"
	"transwarp.io/tos/warpdrive-operator/internal/idleheap"
	"transwarp.io/tos/warpdrive-operator/internal/metricsauth"
	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
)

// Leader election keeps a Lease (client-go's LeaseLock reads, creates and updates it;
// releasing it on exit is an update) and records its transitions as Events.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// --metrics-secure checks each scraper's token and its right to GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Options are the manager settings both processes take from their command line.
type Options struct {
	MetricsAddr             string
	SecureMetrics           bool
	ProbeAddr               string
	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	// PprofAddr is where the process serves net/http/pprof ("0": nowhere), to take heap and
	// CPU profiles of a running process (docs/bench/memory.md).
	PprofAddr string
	// MemoryRelease is how often the process looks whether it went idle holding free heap
	// to give back (internal/idleheap); 0 never.
	MemoryRelease time.Duration
	// GCPercent is the garbage collector's target, as GOGC sets it (which wins).
	GCPercent int
	Zap       zap.Options
}

// Flags is what differs between the two processes in the shared flags: the defaults, and
// the help texts each process has always printed. The flag names, and the help texts not
// listed here, are the same in both.
type Flags struct {
	MetricsAddr, MetricsAddrUsage string
	ProbeAddr, ProbeAddrUsage     string
	LeaderElectUsage              string
	LeaderElectionID              string
	LeaderElectionNamespaceUsage  string
}

// BindFlags registers the shared flags on fs, the logger's (zap's) included.
func (o *Options) BindFlags(fs *flag.FlagSet, f Flags) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", f.MetricsAddr, f.MetricsAddrUsage)
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", false,
		"Serve metrics over HTTPS, to clients the apiserver authenticates and authorizes (TokenReview, SubjectAccessReview).")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", f.ProbeAddr, f.ProbeAddrUsage)
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, f.LeaderElectUsage)
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", f.LeaderElectionID, "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", f.LeaderElectionNamespaceUsage)
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0",
		"Address of the pprof endpoints, /debug/pprof/ (0 disables them). They show the process's memory, which holds "+
			"the cached objects: bind them to a loopback address.")
	fs.DurationVar(&o.MemoryRelease, "idle-memory-release", 30*time.Second,
		"How often to look whether the process is idle with free heap left by a burst of work, and if so give it "+
			"back to the system (0: never; the Go runtime then keeps it until its next collections).")
	fs.IntVar(&o.GCPercent, "gc-percent", 100,
		"The garbage collector's target: how far the heap grows, in percent of the live heap after a collection, "+
			"before the next one (as GOGC, which wins). Higher costs memory during bursts of work, lower costs CPU; "+
			"the idle memory release gives a burst's heap back either way.")
	o.Zap.BindFlags(fs)
}

// AddMemoryRelease adds to mgr the releaser of --idle-memory-release, unless it is 0.
func (o *Options) AddMemoryRelease(mgr ctrl.Manager, log logr.Logger) error {
	if o.MemoryRelease <= 0 {
		return nil
	}
	log = log.WithName("memory")
	return mgr.Add(&idleheap.Releaser{
		Interval: o.MemoryRelease,
		Policy:   idleheap.Default,
		Released: func(held, live uint64) {
			log.V(1).Info("idle: heap given back", "heldMiB", held>>20, "liveMiB", live>>20)
		},
	})
}

// SetLogger makes the logger the flags describe controller-runtime's (ctrl.Log).
func (o *Options) SetLogger() {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.Zap)))
}

// StopUnservedProfiling turns the runtime's heap profiling off when no pprof endpoint serves
// it (--pprof-bind-address=0): the profile keeps a record of every sampled allocation site,
// a few MiB in a process that has run a while (the manager's BuckHashSys was 3.5 MiB at 1000
// CRs), which nothing could read. Call it before the controllers start.
func (o *Options) StopUnservedProfiling() {
	if o.PprofAddr == "" || o.PprofAddr == "0" {
		runtime.MemProfileRate = 0
	}
}

// SetGCPercent sets the garbage collector's target from --gc-percent, unless GOGC sets one.
func (o *Options) SetGCPercent() {
	if os.Getenv("GOGC") == "" && o.GCPercent > 0 {
		debug.SetGCPercent(o.GCPercent)
	}
}

// MemoryLimitEnv names the variable that holds the container's memory limit in bytes:
// config/manager/manager.yaml sets it for both containers from their resources
// (resourceFieldRef limits.memory).
const MemoryLimitEnv = "MEMORY_LIMIT"

// heapShareOfLimit is the part of the container's memory limit given to the Go runtime as its
// soft memory limit: the rest is the binary's own pages (RssFile, counted against the limit:
// 40-75 MiB for these binaries) and what the runtime cannot give back at once.
const heapShareOfLimit = 0.8

// SetMemoryLimit gives the Go runtime a soft memory limit of heapShareOfLimit of the
// container's (MemoryLimitEnv), unless GOMEMLIMIT sets one: near the limit the garbage
// collector then runs more often instead of letting the heap grow to twice its live size
// (GOGC), so that a burst (a wave of upgrades, a relist of every cached object) is not an
// OOM kill. It returns the limit set, 0 for none.
func SetMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0 // the runtime has read it
	}
	limit, err := strconv.ParseInt(os.Getenv(MemoryLimitEnv), 10, 64)
	if err != nil || limit <= 0 {
		return 0
	}
	soft := int64(float64(limit) * heapShareOfLimit)
	debug.SetMemoryLimit(soft)
	return soft
}

// LeaderRetryPeriod is how often a candidate tries to take the Lease and the leader renews it:
// one Lease write a second per process while leading, against controller-runtime's one every
// 2 s. The Lease's duration (15 s) and renew deadline (10 s) stay controller-runtime's; the
// deadline must exceed 1.2 times this period.
const LeaderRetryPeriod = time.Second

// Manager returns the manager options of the flags; the caller adds its cache options.
//
// Metrics: with --metrics-secure only clients the apiserver authenticates and authorizes
// may read them; in the pod both processes' endpoints are reachable from the whole cluster
// network, and metrics name every CR and namespace.
//
// Leader election: controllers start on the leader only, so a standby replica writes
// nothing. Releasing the Lease on exit lets a standby take over without waiting for the
// Lease to expire; this is safe because both processes end right after their manager stops.
// A candidate learns of the release only when it next tries the Lease, every RetryPeriod
// plus up to 1.2 times as much jitter (client-go's leaderelection): with controller-runtime's
// 2 s a rolling update's new pod reconciled first 3.8 to 4.7 s after the old one had ended
// (docs/bench/fairness.md, rolling restart); LeaderRetryPeriod shortens that wait, at the cost
// of the leader renewing its Lease as often.
//
// Warm-up: each controller starts its sources before its process is leader, so that a
// standby, or the new pod of a rolling update, has every object's event in its work queue
// (the initial list's at low priority, internal/fairqueue) when it takes the Lease. Without
// it, the leader hands each of its informers' objects to each controller's handlers first:
// at 10,000 CRs the sidecar's controllers started 19 s after it took the Lease, and the
// status of an edit made then waited for them (docs/bench/restart-10000).
//
// Caches fill from watch streams, client-go's default (WatchListClient), and not from lists,
// though a list takes less CPU: it is decoded whole before the caches' transforms trim an
// object, which at 10,000 CRs took the sidecar's peak memory to twice its limit
// (docs/bench/findings.md, "The initial list as a watch stream").
func (o *Options) Manager() ctrl.Options {
	metrics := metricsserver.Options{BindAddress: o.MetricsAddr, SecureServing: o.SecureMetrics}
	if o.SecureMetrics {
		metrics.FilterProvider = metricsauth.Filter
	}
	return ctrl.Options{
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.ProbeAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		RetryPeriod:                   ptr.To(LeaderRetryPeriod),
		PprofBindAddress:              o.PprofAddr,
		Controller:                    config.Controller{EnableWarmup: ptr.To(true)},
	}
}

// NewManager creates the manager of opts against the cluster of the kubeconfig (or the
// pod's), watching the namespaces of WATCH_NAMESPACE as the stock helm-operator reads it
// (empty: all), holding its Lease as the pod when it runs in one (podIdentity), with a
// /healthz check that answers while the process runs and a /readyz one that answers once its
// cache is filled (cacheSynced). In a pod, a Lease the pod's last process left held goes to
// another pod of the Deployment if one is Ready (handover.YieldToStandby), a standby takes
// its Lease when the leader's process ends (handover.Succession), a standby's elector tries
// the Lease as soon as it changes hands (handover.WakingLock), and a process whose Lease
// another pod has just taken fills its cache only once that pod has had time to start
// serving (handover.DeferredCache).
func NewManager(opts ctrl.Options, log logr.Logger) (ctrl.Manager, error) {
	helmmgr.ConfigureWatchNamespaces(&opts, log)
	cfg := ctrl.GetConfigOrDie()
	var lock *resourcelock.LeaseLock
	if id := podIdentity(); opts.LeaderElection && id != "" {
		var err error
		if lock, err = leaseLock(cfg, opts, id); err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		stamped := handover.StampedLock{Interface: lock, Since: metav1.Now()}
		waking, err := handover.NewWakingLock(stamped, cs, lock.LeaseMeta.Namespace, lock.LeaseMeta.Name, LeaderRetryPeriod)
		if err != nil {
			return nil, err
		}
		opts.LeaderElectionResourceLockInterface = waking
		opts.NewCache = handover.DeferCache(opts.NewCache, lock, log)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	if lock != nil {
		// The Events of the Lease's transitions, as controller-runtime's own lock records them.
		lock.LockConfig.EventRecorder = mgr.GetEventRecorderFor(lock.Identity())
		ctx, cancel := context.WithTimeout(context.Background(), handover.YieldWait)
		handover.YieldToStandby(ctx, cfg, lock, log)
		cancel()
		if err := addSuccession(mgr, cfg, opts, lock, log); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return nil, fmt.Errorf("adding the ready check: %w", err)
	}
	return mgr, nil
}

// addSuccession adds to mgr the runnable that takes lock's Lease from a leader whose process
// ended, through a lock of its own on the same Lease.
func addSuccession(mgr ctrl.Manager, cfg *rest.Config, opts ctrl.Options, lock *resourcelock.LeaseLock, log logr.Logger) error {
	own, err := leaseLock(cfg, opts, lock.Identity())
	if err != nil {
		return err
	}
	own.LockConfig.EventRecorder = lock.LockConfig.EventRecorder
	return mgr.Add(&handover.Succession{Config: cfg, Lock: own, Container: os.Getenv(podidentity.ContainerEnv),
		Elected: mgr.Elected(), Log: log})
}
