package handover

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
)

// MaxWait is how long a stopping process waits for its successor at the most; the pod's
// terminationGracePeriodSeconds leaves room for it and for the manager's graceful shutdown.
const MaxWait = 30 * time.Second

// appearWait is how long a stopping process waits for another pod to exist at all: a
// ReplicaSet creates the replacement of a deleted pod within a second or so.
const appearWait = 3 * time.Second

// pollEvery is how often the stopping process lists its Deployment's pods.
const pollEvery = 500 * time.Millisecond

// Rules of the namespaced Role the wait needs (config/rbac/leader_election_role.yaml).
// +kubebuilder:rbac:groups="",namespace=system,resources=pods,verbs=get;list

// SignalContext returns a context cancelled on SIGTERM or SIGINT, as
// controller-runtime's SetupSignalHandler, except that in a pod the first signal cancels it
// only once a successor is Ready (waitForSuccessor); a second signal cancels it at once and a
// third exits.
func SignalContext(cfg *rest.Config, log logr.Logger) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 3)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		done := make(chan struct{})
		go func() {
			defer close(done)
			waitForSuccessor(ctx, cfg, log)
		}()
		select {
		case <-done:
		case <-signals:
		}
		cancel()
		<-signals
		os.Exit(1)
	}()
	return ctx
}

// waitForSuccessor returns once another pod of this pod's Deployment is Ready, or none
// exists after appearWait, or after MaxWait; at once outside a pod or on any error, so that
// nothing here keeps a process from stopping.
func waitForSuccessor(ctx context.Context, cfg *rest.Config, log logr.Logger) {
	name, ns := os.Getenv(podidentity.NameEnv), os.Getenv(podidentity.NamespaceEnv)
	if name == "" || ns == "" {
		return
	}
	log = log.WithName("handover")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Error(err, "stopping without waiting for a successor")
		return
	}
	selector, err := siblings(ctx, cs.CoreV1().Pods(ns), name)
	if err != nil {
		log.Error(err, "stopping without waiting for a successor")
		return
	}
	start := time.Now()
	log.Info("stopping once a successor is Ready", "selector", selector.String(), "atMost", MaxWait)
	for {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			log.Error(err, "stopping without waiting for a successor")
			return
		}
		waited := time.Since(start)
		if done, why := decide(name, pods.Items, waited); done {
			log.Info("stopping", "why", why, "waited", waited.Round(time.Millisecond).String())
			return
		}
		time.Sleep(pollEvery)
	}
}

// siblings selects the pods of the Deployment of the pod named name, whichever ReplicaSet:
// that pod's labels but pod-template-hash, which the Deployment controller adds per
// ReplicaSet.
func siblings(ctx context.Context, pods corev1client.PodInterface, name string) (labels.Selector, error) {
	self, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	set := labels.Set{}
	for k, v := range self.Labels {
		if k != "pod-template-hash" {
			set[k] = v
		}
	}
	return labels.SelectorFromSet(set), nil
}

// decide says whether the pod named self, stopping for waited so far, may stop now that its
// Deployment's pods are pods, and why.
func decide(self string, pods []corev1.Pod, waited time.Duration) (bool, string) {
	next, others := readyOther(self, pods)
	switch {
	case next != nil:
		return true, "pod " + next.Name + " is Ready"
	case others == 0 && waited >= appearWait:
		return true, "no other pod"
	case waited >= MaxWait:
		return true, "no other pod Ready in time"
	}
	return false, ""
}

// podReady says whether every container of p answers its readiness probe.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
