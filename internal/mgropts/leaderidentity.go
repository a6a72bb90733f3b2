package mgropts

import (
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"

	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
)

// podIdentity is who holds the Lease from a pod: "<pod name>_<pod UID>", or "" outside a
// pod (either variable unset).
//
// controller-runtime's identity is "<host name>_<random UUID>", new at every start of the
// process. A container that crashed (an OOM kill, a panic) and was restarted by the kubelet
// then finds the Lease held by its former self under another name, and waits for it to
// expire, 15 s after the last renewal, before it reconciles anything. The pod's UID is the
// same across its containers' restarts and never shared by two pods (a pod made again under
// the same name has a new one), and the kubelet starts a container again only once its
// process has ended: with it, the restarted process renews its own Lease at its first try.
// Outside a pod two processes may share a host name, so they keep the random identity.
func podIdentity() string {
	name, uid := os.Getenv(podidentity.NameEnv), os.Getenv(podidentity.UIDEnv)
	if name == "" || uid == "" {
		return ""
	}
	return podidentity.LeaseHolder(name, uid)
}

// leaseLock is the Lease lock controller-runtime would make for opts, held under identity
// id: the same Lease, client and timeouts. Its EventRecorder is left for the caller to set
// once the manager, which provides it, exists.
func leaseLock(cfg *rest.Config, opts ctrl.Options, id string) (*resourcelock.LeaseLock, error) {
	ns := opts.LeaderElectionNamespace
	if ns == "" {
		b, err := os.ReadFile(podidentity.NamespaceFile)
		if err != nil {
			return nil, fmt.Errorf("the Lease's namespace: no --leader-election-namespace and %w", err)
		}
		ns = strings.TrimSpace(string(b))
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// As controller-runtime does: a hung request must not outlast half the renew deadline.
	deadline := 10 * time.Second // controller-runtime's default
	if opts.RenewDeadline != nil {
		deadline = *opts.RenewDeadline
	}
	cfg.Timeout = max(time.Second, deadline/2)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: opts.LeaderElectionID},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		Labels:     opts.LeaderElectionLabels,
	}, nil
}
