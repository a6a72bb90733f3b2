package mgropts

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
)

// In a pod the Lease's holder is the pod, the same across its containers' restarts; outside
// one, controller-runtime's random identity stays.
func TestPodIdentity(t *testing.T) {
	t.Setenv(podidentity.NameEnv, "warpdrive-operator-controller-manager-7d9f-x2k")
	t.Setenv(podidentity.UIDEnv, "6b1f0c2e-1111-4c5d-9e8f-0123456789ab")
	if got, want := podIdentity(), "warpdrive-operator-controller-manager-7d9f-x2k_6b1f0c2e-1111-4c5d-9e8f-0123456789ab"; got != want {
		t.Errorf("identity %q, want %q", got, want)
	}
	t.Setenv(podidentity.UIDEnv, "")
	if got := podIdentity(); got != "" {
		t.Errorf("identity %q without the pod's UID, want none (controller-runtime's)", got)
	}
}

// The lock is the Lease controller-runtime would take, under the given identity.
func TestLeaseLock(t *testing.T) {
	opts := ctrl.Options{LeaderElectionID: "warpdrive-operator.transwarp.io", LeaderElectionNamespace: "ops",
		RenewDeadline: ptr.To(4 * time.Second), LeaderElectionLabels: map[string]string{"a": "b"}}
	l, err := leaseLock(&rest.Config{Host: "https://127.0.0.1:1"}, opts, "pod_uid")
	if err != nil {
		t.Fatal(err)
	}
	if l.LeaseMeta.Namespace != "ops" || l.LeaseMeta.Name != opts.LeaderElectionID || l.Identity() != "pod_uid" ||
		l.Labels["a"] != "b" {
		t.Errorf("lock %+v", l)
	}
	if got := l.Describe(); got != "ops/warpdrive-operator.transwarp.io" {
		t.Errorf("lock of %s", got)
	}
}
