package handover

import (
	"context"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
)

// YieldWait bounds what YieldToStandby may add to a process's start.
const YieldWait = 5 * time.Second

// YieldToStandby hands lock's Lease to a Ready standby when the process that held it before
// this one, in the same pod, ended without releasing it: a container the kubelet starts
// again after a crash (an OOM kill, a panic, a SIGKILL).
//
// The restarted process holds its Lease as the pod (internal/mgropts), so it would take the
// Lease back, but only once its cache is filled (controller-runtime asks for the Lease after
// that: about 20 s at 10,000 CRs, docs/bench/restart-10000), and nobody serves until then.
// Another pod of the Deployment that is Ready has its cache filled and its controllers'
// queues warmed up, and would take the Lease only once it expired, 15 s after the crash. So
// the restarted process writes that pod as the holder (podidentity.LeaseHolder, under which
// it takes its Leases): at its next try, within 2.2 s, the standby finds itself the holder
// and leads, and this process waits as the standby once its own cache is filled. Writing the
// holder is safe because the kubelet restarts a container only after its process ended, and
// the update is conditional on the Lease being as read. A pod that takes its Leases under
// another holder (an older version) finds the Lease held by nobody it knows until it
// expires, as without the hand-over.
//
// It does nothing outside a pod, when this pod does not hold the Lease, or when no other
// pod is Ready; an error is logged and the process starts as it would have.
func YieldToStandby(ctx context.Context, cfg *rest.Config, lock resourcelock.Interface, log logr.Logger) {
	name, ns := os.Getenv(podidentity.NameEnv), os.Getenv(podidentity.NamespaceEnv)
	if name == "" || ns == "" {
		return
	}
	log = log.WithName("handover")
	rec, _, err := lock.Get(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.Error(err, "not handing over the Lease", "lease", lock.Describe())
		}
		return
	}
	if rec.HolderIdentity != lock.Identity() {
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error(err, "not handing over the Lease", "lease", lock.Describe())
		return
	}
	selector, err := siblings(ctx, cs.CoreV1().Pods(ns), name)
	if err != nil {
		log.Error(err, "not handing over the Lease", "lease", lock.Describe())
		return
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		log.Error(err, "not handing over the Lease", "lease", lock.Describe())
		return
	}
	standby, _ := readyOther(name, pods.Items)
	if standby == nil {
		log.Info("taking back the Lease left by this pod's last process: no other pod is Ready", "lease", lock.Describe())
		return
	}
	to := podidentity.LeaseHolder(standby.Name, string(standby.UID))
	if err := lock.Update(ctx, handedTo(*rec, to, time.Now())); err != nil {
		log.Error(err, "not handing over the Lease", "lease", lock.Describe(), "to", to)
		return
	}
	lock.RecordEvent("handed over to the Ready standby " + to + " after a restart")
	log.Info("handed the Lease left by this pod's last process to a Ready standby", "lease", lock.Describe(), "to", to)
}

// handedTo is rec with to as its holder, acquired and renewed now: one transition more, the
// Lease's duration kept.
func handedTo(rec resourcelock.LeaderElectionRecord, to string, now time.Time) resourcelock.LeaderElectionRecord {
	rec.HolderIdentity = to
	rec.AcquireTime = metav1.NewTime(now)
	rec.RenewTime = metav1.NewTime(now)
	rec.LeaderTransitions++
	return rec
}

// readyOther is the first pod of pods that is Ready, neither the one named self nor being
// deleted, if any; and how many of pods are neither.
func readyOther(self string, pods []corev1.Pod) (*corev1.Pod, int) {
	others := 0
	for i := range pods {
		p := &pods[i]
		if p.Name == self || p.DeletionTimestamp != nil {
			continue
		}
		others++
		if podReady(p) {
			return p, others
		}
	}
	return nil, others
}
