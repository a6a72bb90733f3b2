package handover

import (
	"context"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
)

// Rules of the namespaced Role the succession needs (config/rbac/leader_election_role.yaml).
// +kubebuilder:rbac:groups="",namespace=system,resources=pods,verbs=watch

// Succession is a manager's runnable that makes a standby take its Lease as soon as the kubelet
// reports that the process holding it ended: the leader's container of the same name, in
// another pod of the Deployment, terminated or started again.
//
// Without it the standby waits for the restarted process to hand the Lease over
// (YieldToStandby): 2 to 5 s after the crash, while the kubelet starts the container again,
// and one more try of the standby's elector (docs/bench/restart-10000/fairness.md, "A crash
// with a standby"). The kubelet reports the end within about a second.
//
// Taking the Lease is safe when its holder is that pod and its acquire time is older than the
// end the kubelet reports: every process of this version stamps the Leases it writes with
// its start (StampedLock), so the record is the ended process's, or an earlier one's, and no
// process of that container in that pod runs under it. The update is conditional on the
// Lease being as read, so a process started since that writes first wins. The kubelet gives
// the end to the second, so a leader that took the Lease within the second before it ended
// is left to YieldToStandby.
//
// It runs once this process's cache is filled (a runnable that needs no leader election),
// until the process leads.
type Succession struct {
	// Config reaches the apiserver.
	Config *rest.Config
	// Lock is this process's Lease, held under its pod's identity; a lock of its own, not the
	// elector's, whose LeaseLock keeps the last record read unguarded.
	Lock resourcelock.Interface
	// Container names the container this process runs in, in every pod of the Deployment.
	Container string
	// Elected is closed once this process leads.
	Elected <-chan struct{}
	Log     logr.Logger
}

// NeedLeaderElection says that Succession runs on a standby.
func (*Succession) NeedLeaderElection() bool { return false }

// Start watches the other pods of this pod's Deployment until ctx ends or this process leads.
// Nothing here stops the process: an error is logged, and the standby then takes the Lease as it
// would have without Succession.
func (t *Succession) Start(ctx context.Context) error {
	name, ns := os.Getenv(podidentity.NameEnv), os.Getenv(podidentity.NamespaceEnv)
	if name == "" || ns == "" || t.Container == "" {
		return nil
	}
	log := t.Log.WithName("handover").WithValues("lease", t.Lock.Describe())
	cs, err := kubernetes.NewForConfig(t.Config)
	if err != nil {
		log.Error(err, "not watching the leader's pod")
		return nil
	}
	selector, err := siblings(ctx, cs.CoreV1().Pods(ns), name)
	if err != nil {
		log.Error(err, "not watching the leader's pod")
		return nil
	}
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector.String() }))
	_, err = pods.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*corev1.Pod)
			pod, _ := newObj.(*corev1.Pod)
			if old == nil || pod == nil || pod.Name == name {
				return
			}
			if end, ok := processEnded(old, pod, t.Container); ok {
				t.takeFrom(ctx, pod, end, log)
			}
		},
	})
	if err != nil {
		log.Error(err, "not watching the leader's pod")
		return nil
	}
	stop := make(chan struct{})
	pods.Start(stop)
	select {
	case <-ctx.Done():
	case <-t.Elected:
	}
	close(stop)
	pods.Shutdown()
	return nil
}

// takeFrom takes the Lease if pod holds it under a record older than end, when a process of
// pod's container ended.
func (t *Succession) takeFrom(ctx context.Context, pod *corev1.Pod, end time.Time, log logr.Logger) {
	from := podidentity.LeaseHolder(pod.Name, string(pod.UID))
	rec, _, err := t.Lock.Get(ctx)
	if err != nil {
		log.Error(err, "not taking over", "from", from)
		return
	}
	if !leftBy(*rec, from, end) {
		return
	}
	if err := t.Lock.Update(ctx, handedTo(*rec, t.Lock.Identity(), time.Now())); err != nil {
		log.Error(err, "not taking over", "from", from)
		return
	}
	t.Lock.RecordEvent("taken over from " + from + ", whose container " + t.Container + " ended")
	log.Info("took over the Lease from a pod whose process ended", "from", from, "container", t.Container)
}

// leftBy says whether rec is held by from under a record acquired before end, when a process
// of from's container ended: no process of that container runs under it (StampedLock).
func leftBy(rec resourcelock.LeaderElectionRecord, from string, end time.Time) bool {
	return rec.HolderIdentity == from && rec.AcquireTime.Time.Before(end)
}

// processEnded says whether the process of container that old shows running has ended in new,
// terminated or followed by another, and when the last process of that container ended.
func processEnded(old, new *corev1.Pod, container string) (time.Time, bool) {
	was, is := containerStatus(old, container), containerStatus(new, container)
	if was == nil || is == nil || was.State.Running == nil {
		return time.Time{}, false
	}
	if is.State.Running != nil && is.ContainerID == was.ContainerID {
		return time.Time{}, false
	}
	switch {
	case is.State.Terminated != nil:
		return is.State.Terminated.FinishedAt.Time, true
	case is.LastTerminationState.Terminated != nil:
		return is.LastTerminationState.Terminated.FinishedAt.Time, true
	}
	return time.Time{}, false
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}
