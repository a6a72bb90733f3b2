package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/podargs"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// replicaStatus is what the sidecar reports on a CR.
type replicaStatus struct {
	replicas, ready, available, observedGeneration int64
	availableSet                                   bool
	selector                                       string
}

func readStatus(cr *unstructured.Unstructured) replicaStatus {
	var s replicaStatus
	s.replicas, _, _ = unstructured.NestedInt64(cr.Object, "status", "replicas")
	s.ready, _, _ = unstructured.NestedInt64(cr.Object, "status", "readyReplicas")
	s.available, s.availableSet, _ = unstructured.NestedInt64(cr.Object, "status", "availableReplicas")
	s.observedGeneration, _, _ = unstructured.NestedInt64(cr.Object, "status", "observedGeneration")
	s.selector, _, _ = unstructured.NestedString(cr.Object, "status", "selector")
	return s
}

// waitStatus waits until the CR's status reports want replicas, all ready and available, for
// its current generation.
func waitStatus(t testing.TB, cr *unstructured.Unstructured, want int64) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var err error
		if got, err = getCR(ctx, cr); err != nil {
			return err
		}
		s := readStatus(got)
		if s.replicas != want || s.ready != want || s.available != want || s.observedGeneration != got.GetGeneration() || s.selector == "" {
			return fmt.Errorf("%s %s: status %+v, want %d replicas ready and available at generation %d",
				cr.GetKind(), cr.GetName(), s, want, got.GetGeneration())
		}
		return nil
	})
	return got
}

// TestStatusFollowsWorkloads: every kind reports its workload's replicas, ready and
// available counts and pod selector once kwok makes the pods Ready.
func TestStatusFollowsWorkloads(t *testing.T) {
	for _, kc := range kinds {
		t.Run(kc.kind, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			cr := kc.newCR(t, ns, "status", map[string]any{kc.replicasField: int64(2)})
			env.Create(t, cr)
			got := waitStatus(t, cr, 2)

			w := kc.workload(cr)
			if err := get(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			want, err := metav1.LabelSelectorAsSelector(workloadSelector(w))
			if err != nil {
				t.Fatal(err)
			}
			if s := readStatus(got); s.selector != want.String() {
				t.Errorf("status.selector %q, want the workload's %q", s.selector, want.String())
			}
		})
	}
}

func workloadSelector(obj client.Object) *metav1.LabelSelector {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return w.Spec.Selector
	case *appsv1.StatefulSet:
		return w.Spec.Selector
	}
	panic("not a workload")
}

// TestScaleSubresource: `kubectl scale` on a CR changes its spec (a Helm upgrade), the
// workload follows and so does the status; the scale subresource reports the selector of
// exactly the CR's pods, as a HorizontalPodAutoscaler needs.
func TestScaleSubresource(t *testing.T) {
	for _, kc := range kinds {
		t.Run(kc.kind, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			cr := kc.newCR(t, ns, "scale", map[string]any{kc.replicasField: int64(1)})
			env.Create(t, cr)
			waitStatus(t, cr, 1)

			resource := env.GVR(kc.kind).Resource
			if _, err := env.Kubectl("scale", "-n", ns, resource+"/"+cr.GetName(), "--replicas=4"); err != nil {
				t.Fatal(err)
			}
			got := waitStatus(t, cr, 4)
			if n, _, _ := unstructured.NestedInt64(got.Object, "spec", kc.replicasField); n != 4 {
				t.Errorf("spec.%s = %d after kubectl scale, want 4", kc.replicasField, n)
			}
			waitWorkload(t, kc, cr, 4)

			gvr := env.GVR(kc.kind)
			raw, err := env.Kubectl("get", "--raw", fmt.Sprintf("/apis/%s/%s/namespaces/%s/%s/%s/scale", gvr.Group, gvr.Version, ns, gvr.Resource, cr.GetName()))
			if err != nil {
				t.Fatal(err)
			}
			var scale struct {
				Spec   struct{ Replicas int64 }
				Status struct {
					Replicas int64
					Selector string
				}
			}
			if err := json.Unmarshal([]byte(raw), &scale); err != nil {
				t.Fatal(err)
			}
			if scale.Spec.Replicas != 4 || scale.Status.Replicas != 4 || scale.Status.Selector == "" {
				t.Fatalf("scale subresource %+v, want 4 desired and current replicas and a selector", scale)
			}
			pods := &corev1.PodList{}
			sel, err := labels.Parse(scale.Status.Selector)
			if err != nil {
				t.Fatal(err)
			}
			if err := env.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 4 {
				t.Errorf("the scale selector %q matches %d pods, want the CR's 4", scale.Status.Selector, len(pods.Items))
			}
		})
	}
}

// TestStatusDoesNotFlap records every version of a CR through install, scale up, scale down,
// an upgrade of another value and a drift repair. Once status.availableReplicas is set it
// must be on every later version, and never 0 while the workload has available pods, even
// on the versions where the helm-operator writes its own status fields.
func TestStatusDoesNotFlap(t *testing.T) {
	ns := env.Namespace(t)
	memcached := kinds[4]
	cr := memcached.newCR(t, ns, "noflap", map[string]any{"size": int64(2)})

	rec := env.Record(t, env.GVR(cr.GetKind()), cr.GetName(), ns)
	env.Create(t, cr)
	waitStatus(t, cr, 2)

	t.Log("scale up, scale down, upgrade another value")
	for i, step := range []map[string]any{{"size": int64(4)}, {"size": int64(3)}, {"image": "memcached:1.6.39-alpine"}} {
		patchSpec(t, cr, step)
		waitRevision(t, ns, cr.GetName(), i+2)
		waitStatus(t, cr, map[bool]int64{true: 4, false: 3}[i == 0])
	}

	t.Log("drift repair: the Deployment scaled by hand is scaled back")
	d := deployment(cr, cr.GetName())
	// As kubectl edit would: the Deployment controller may write between the read and the
	// update (the upgrade's rollout), which is a conflict to retry, not a failure.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(context.Background(), d); err != nil {
			return err
		}
		setWorkloadReplicas(d, 6)
		return env.Client.Update(context.Background(), d)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitWorkload(t, memcached, cr, 3)
	waitStatus(t, cr, 3)

	rec.Stop()
	var versions []*unstructured.Unstructured
	for _, v := range rec.All() {
		if v.Obj != nil {
			versions = append(versions, v.Obj)
		}
	}
	set, helmWrites := false, 0
	var lastHelmStatus string
	for _, v := range versions {
		s := readStatus(v)
		conditions, _, _ := unstructured.NestedSlice(v.Object, "status", "conditions")
		release, _, _ := unstructured.NestedMap(v.Object, "status", "deployedRelease")
		helmStatus := fmt.Sprint(conditions, release)
		if set && helmStatus != lastHelmStatus {
			helmWrites++ // a status write of the helm-operator's after the sidecar's first
		}
		lastHelmStatus = helmStatus
		if !set {
			// From the sidecar's first report of an available pod on: the first reports may
			// say 0 while the pods start, and the manager's writes come in between.
			set = s.availableSet && s.available >= 1
			continue
		}
		if !s.availableSet || s.available < 1 {
			t.Errorf("resourceVersion %s: availableReplicas %v (present: %v) after it was set; sidecar status %+v",
				v.GetResourceVersion(), s.available, s.availableSet, s)
		}
	}
	if !set {
		t.Fatalf("availableReplicas never set in %d versions", len(versions))
	}
	// The point of the test: the helm-operator did write its status after the sidecar's.
	if helmWrites < 3 {
		t.Errorf("only %d helm-operator status writes after the sidecar's first: the test did not exercise the overwrite", helmWrites)
	}
	t.Logf("%d versions recorded, %d helm-operator status writes after availableReplicas was set", len(versions), helmWrites)
}

// sidecarLease is the sidecar's Lease: its default --leader-election-id, which
// config/manager keeps (cmd/manager/sidecar.go).
const sidecarLease = "warpdrive-sidecar.transwarp.io"

// TestSidecarFailover: a standby sidecar writes nothing while the leader lives, though its
// controllers have queued the CRs; when the leader is killed it takes the Lease over and
// status keeps following.
func TestSidecarFailover(t *testing.T) {
	ns := env.Namespace(t)
	memcached := kinds[4]
	addr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// The suite's sidecar, the only candidate yet, holds the Lease before the standby runs:
	// run first, right after a run whose sidecar let the Lease go, the two would race for it.
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var lease coordinationv1.Lease
		key := client.ObjectKey{Namespace: env.LeaseNamespace, Name: sidecarLease}
		if err := env.Client.Get(ctx, key, &lease); err != nil {
			return err
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
			return fmt.Errorf("Lease %s held by no one yet", key)
		}
		return nil
	})
	standby, err := startSidecar("sidecar-standby", addr, false)
	if err != nil {
		t.Fatal(err)
	}
	leader := sidecar
	framework.Eventually(t, converge, func(context.Context) error {
		_, err := framework.Metric(addr, "leader_election_master_status")
		return err
	})

	cr := memcached.newCR(t, ns, "failover", map[string]any{"size": int64(2)})
	env.Create(t, cr)
	waitStatus(t, cr, 2) // written by the leader
	// Warmed up (internal/mgropts): the standby's status controller queues the CRs' events
	// while the leader lives, so that it has them when it takes the Lease.
	queue := fmt.Sprintf(`name="status-%s.`, strings.ToLower(memcached.kind))
	framework.Eventually(t, converge, func(context.Context) error {
		if n, err := framework.Metric(addr, "workqueue_adds_total", queue); err != nil || n == 0 {
			return fmt.Errorf("the standby's status controller has queued %v requests (%v)", n, err)
		}
		return nil
	})
	if n, err := framework.Metric(addr, "controller_runtime_reconcile_total"); err != nil || n != 0 {
		t.Fatalf("the standby ran %v reconciles while the leader lived (%v)", n, err)
	}
	if n, _ := framework.Metric(addr, "leader_election_master_status"); n != 0 {
		t.Fatalf("the standby reports itself leader while the leader lives")
	}

	t.Log("killing the leader")
	leader.Kill()
	sidecar = standby
	patchSpec(t, cr, map[string]any{"size": int64(3)})
	waitStatus(t, cr, 3)
	if n, err := framework.Metric(addr, "leader_election_master_status"); err != nil || n != 1 {
		t.Fatalf("the standby is not leader after the failover (%v, %v)", n, err)
	}
	if n, _ := framework.Metric(addr, "controller_runtime_reconcile_total"); n == 0 {
		t.Fatal("status followed, but not through the standby's reconciles")
	}
	// It syncs as many CRs at once as the pod's flag says: one at a time, the status of a
	// wave of rollouts fell seconds behind (sidecar/internal/workloadstatus, DefaultWorkers).
	want, ok := env.PodFlag(podargs.Sidecar, "max-concurrent-reconciles")
	if !ok {
		t.Fatalf("config/default's sidecar sets no --max-concurrent-reconciles: %v", env.PodArgs[podargs.Sidecar])
	}
	controller := fmt.Sprintf(`controller="status-%s.`, strings.ToLower(memcached.kind))
	if n, err := framework.Metric(addr, "controller_runtime_max_concurrent_reconciles", controller); err != nil || strconv.FormatFloat(n, 'f', -1, 64) != want {
		t.Fatalf("the standby's status controller runs %v syncs at once (%v), the pod's flag says %s", n, err, want)
	}
}
