package workloadstatus

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func selector(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// Each kind's reader, and workloadOf, which picks it, read every field of the Workload from
// the field of the kind that holds it. Every field read has a value of its own, and the kinds'
// other counts (unavailable, current, misscheduled) yet others, so that a field read from the
// wrong place fails.
func TestFromWorkloads(t *testing.T) {
	for _, c := range []struct {
		obj  client.Object
		want Workload
	}{
		{
			obj: &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d", Generation: 7},
				Spec:       appsv1.DeploymentSpec{Selector: selector("app", "d"), Replicas: ptr.To[int32](9)},
				Status: appsv1.DeploymentStatus{ObservedGeneration: 6, Replicas: 5, UpdatedReplicas: 4, ReadyReplicas: 3, AvailableReplicas: 2,
					UnavailableReplicas: 11},
			},
			want: Workload{Kind: "Deployment", Name: "d", Selector: selector("app", "d"), Replicas: 5, ReadyReplicas: 3, AvailableReplicas: 2,
				Generation: 7, ObservedGeneration: 6, Desired: 9, Updated: 4},
		},
		{
			obj: &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 17},
				Spec:       appsv1.StatefulSetSpec{Selector: selector("app", "s"), Replicas: ptr.To[int32](19)},
				Status: appsv1.StatefulSetStatus{ObservedGeneration: 16, Replicas: 15, UpdatedReplicas: 14, ReadyReplicas: 13, AvailableReplicas: 12,
					CurrentReplicas: 21},
			},
			want: Workload{Kind: "StatefulSet", Name: "s", Selector: selector("app", "s"), Replicas: 15, ReadyReplicas: 13, AvailableReplicas: 12,
				Generation: 17, ObservedGeneration: 16, Desired: 19, Updated: 14},
		},
		{
			// A DaemonSet's spec has no replicas: it wants the nodes it is scheduled to.
			obj: &appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: "ds", Generation: 27},
				Spec:       appsv1.DaemonSetSpec{Selector: selector("app", "ds")},
				Status: appsv1.DaemonSetStatus{ObservedGeneration: 26, DesiredNumberScheduled: 25, UpdatedNumberScheduled: 24, NumberReady: 23,
					NumberAvailable: 22, CurrentNumberScheduled: 31, NumberUnavailable: 32, NumberMisscheduled: 33},
			},
			want: Workload{Kind: "DaemonSet", Name: "ds", Selector: selector("app", "ds"), Replicas: 25, ReadyReplicas: 23, AvailableReplicas: 22,
				Generation: 27, ObservedGeneration: 26, Desired: 25, Updated: 24},
		},
	} {
		t.Run(c.want.Kind, func(t *testing.T) {
			var got Workload
			switch o := c.obj.(type) {
			case *appsv1.Deployment:
				got = FromDeployment(o)
			case *appsv1.StatefulSet:
				got = FromStatefulSet(o)
			case *appsv1.DaemonSet:
				got = FromDaemonSet(o)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("From%s = %+v, want %+v", c.want.Kind, got, c.want)
			}
			if w, ok := workloadOf(c.obj); !ok || !reflect.DeepEqual(w, c.want) {
				t.Errorf("workloadOf = %+v, %v, want %+v, true", w, ok, c.want)
			}
		})
	}

	// spec.replicas defaults to 1 in the API; an object read without
	// defaulting must not be taken to want none.
	if got := FromDeployment(&appsv1.Deployment{}).Desired; got != 1 {
		t.Errorf("FromDeployment without spec.replicas: Desired = %d, want 1", got)
	}
	if got := FromStatefulSet(&appsv1.StatefulSet{}).Desired; got != 1 {
		t.Errorf("FromStatefulSet without spec.replicas: Desired = %d, want 1", got)
	}
}

// done returns a workload of n replicas, all of them updated and available,
// whose controller has seen its latest spec.
func done(kind, name string, sel *metav1.LabelSelector, n int32) Workload {
	return Workload{Kind: kind, Name: name, Selector: sel, Replicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Generation: 1, ObservedGeneration: 1, Desired: n, Updated: n}
}

func rolledOutCond(status metav1.ConditionStatus, reason, message string, deployed int64) metav1.Condition {
	return metav1.Condition{Type: "RolledOut", Status: status, Reason: reason, Message: message, ObservedGeneration: deployed}
}

func TestComputeStatus(t *testing.T) {
	web := func(f func(w *Workload)) Workload {
		w := done("Deployment", "web", selector("app", "web"), 3)
		f(&w)
		return w
	}
	cases := []struct {
		name      string
		deployed  int64
		revision  int64 // 0: the status names none
		workloads []Workload
		want      Status
	}{{
		name:     "nothing deployed yet: Unknown, whatever the workloads",
		deployed: 0,
		workloads: []Workload{
			done("Deployment", "web", selector("app", "web"), 2),
			web(func(w *Workload) { w.Name, w.Updated = "api", 0 }),
		},
		want: Status{Replicas: 5, ReadyReplicas: 5, AvailableReplicas: 5, Selector: "app=web",
			RolledOut: rolledOutCond("Unknown", "NothingDeployed", "no release is deployed yet", 0)},
	}, {
		name:     "nothing deployed yet, no workloads",
		deployed: 0,
		want:     Status{RolledOut: rolledOutCond("Unknown", "NothingDeployed", "no release is deployed yet", 0)},
	}, {
		name:     "no workloads: zeros, empty selector, rolled out",
		deployed: 4,
		want:     Status{RolledOut: rolledOutCond("True", "RolloutComplete", "0 workload(s) rolled out", 4)},
	}, {
		name:      "one deployment rolled out",
		deployed:  1,
		workloads: []Workload{done("Deployment", "web", selector("app", "web"), 3)},
		want: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, Selector: "app=web",
			RolledOut: rolledOutCond("True", "RolloutComplete", "1 workload(s) rolled out", 1)},
	}, {
		name:      "rolled out, at the release revision the manager deployed",
		deployed:  1,
		revision:  7,
		workloads: []Workload{done("Deployment", "web", selector("app", "web"), 3)},
		want: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, Selector: "app=web",
			RolledOut: rolledOutCond("True", "RolloutComplete", "release revision 7: 1 workload(s) rolled out", 1)},
	}, {
		name:      "rolling out, at the release revision the manager deployed",
		deployed:  1,
		revision:  8,
		workloads: []Workload{web(func(w *Workload) { w.Generation = 2 })},
		want: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, Selector: "app=web",
			RolledOut: rolledOutCond("False", "RollingOut", "release revision 8: Deployment web: its controller has not seen the new spec yet", 1)},
	}, {
		name:      "deployment's controller has not seen its new spec",
		deployed:  2,
		workloads: []Workload{web(func(w *Workload) { w.Generation = 2 })},
		want: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, Selector: "app=web",
			RolledOut: rolledOutCond("False", "RollingOut", "Deployment web: its controller has not seen the new spec yet", 2)},
	}, {
		name:      "unseen spec is reported before the counts",
		deployed:  2,
		workloads: []Workload{web(func(w *Workload) { w.Generation, w.Updated, w.AvailableReplicas = 2, 0, 0 })},
		want: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 0, Selector: "app=web",
			RolledOut: rolledOutCond("False", "RollingOut", "Deployment web: its controller has not seen the new spec yet", 2)},
	}, {
		name:      "fewer updated than desired",
		deployed:  2,
		workloads: []Workload{web(func(w *Workload) { w.Updated = 1 })},
		want: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, Selector: "app=web",
			RolledOut: rolledOutCond("False", "RollingOut", "Deployment web: 1 of 3 replicas updated", 2)},
	}, {
		name:      "all updated, old replicas still running",
		deployed:  2,
		workloads: []Workload{web(func(w *Workload) { w.Replicas, w.ReadyReplicas, w.AvailableReplicas = 5, 5, 5 })},
		want: Status{Replicas: 5, ReadyReplicas: 5, AvailableReplicas: 5, Selector: "app=web",
			RolledOut: rolledOutCond("False", "RollingOut", "Deployment web: 2 old replicas still running", 2)},
	}, {
		name:      "all updated, fewer available than desired",
		deployed:  2,
		workloads: []Workload{web(func(w *Workload) { w.ReadyReplicas, w.AvailableReplicas = 2, 1 })},
		want: Status{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, Selector: "app=web",
			RolledOut: rolledOutCond("False", "RollingOut", "Deployment web: 1 of 3 replicas available", 2)},
	}, {
		name:     "scaled to zero: rolled out",
		deployed: 3,
		workloads: []Workload{
			done("Deployment", "web", selector("app", "web"), 0),
			done("StatefulSet", "db", selector("app", "db"), 0),
		},
		want: Status{Selector: "app=web", RolledOut: rolledOutCond("True", "RolloutComplete", "2 workload(s) rolled out", 3)},
	}, {
		name:     "several waiting: the first in primary order, the others counted",
		deployed: 5,
		workloads: []Workload{
			{Kind: "DaemonSet", Name: "a-agent", Selector: selector("app", "agent"), Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 1,
				Generation: 1, ObservedGeneration: 1, Desired: 2, Updated: 2},
			done("Deployment", "z-web", selector("app", "web"), 2),
			{Kind: "StatefulSet", Name: "a-db", Selector: selector("app", "db"), Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
				Generation: 1, ObservedGeneration: 1, Desired: 3, Updated: 1},
			{Kind: "Deployment", Name: "b-api", Selector: selector("app", "api"), Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Generation: 4, ObservedGeneration: 3, Desired: 1, Updated: 1},
		},
		want: Status{Replicas: 8, ReadyReplicas: 8, AvailableReplicas: 7, Selector: "app=api",
			RolledOut: rolledOutCond("False", "RollingOut", "Deployment b-api: its controller has not seen the new spec yet (and 2 more workload(s) rolling out)", 5)},
	}, {
		name:     "two waiting",
		deployed: 5,
		workloads: []Workload{
			web(func(w *Workload) { w.Name, w.AvailableReplicas = "web-b", 0 }),
			web(func(w *Workload) { w.Name, w.AvailableReplicas = "web-a", 2 }),
		},
		want: Status{Replicas: 6, ReadyReplicas: 6, AvailableReplicas: 2, Selector: "app=web",
			RolledOut: rolledOutCond("False", "RollingOut", "Deployment web-a: 2 of 3 replicas available (and 1 more workload(s) rolling out)", 5)},
	}, {
		name:      "daemonset only",
		deployed:  2,
		workloads: []Workload{done("DaemonSet", "agent", selector("app", "agent"), 5)},
		want: Status{Replicas: 5, ReadyReplicas: 5, AvailableReplicas: 5, Selector: "app=agent",
			RolledOut: rolledOutCond("True", "RolloutComplete", "1 workload(s) rolled out", 2)},
	}, {
		name:     "mixed kinds sum up, deployment is primary whatever the order",
		deployed: 7,
		workloads: []Workload{
			done("DaemonSet", "a-agent", selector("app", "agent"), 2),
			done("StatefulSet", "a-db", selector("app", "db"), 3),
			done("Deployment", "z-web", selector("app", "web", "tier", "front"), 4),
		},
		want: Status{Replicas: 9, ReadyReplicas: 9, AvailableReplicas: 9, Selector: "app=web,tier=front",
			RolledOut: rolledOutCond("True", "RolloutComplete", "3 workload(s) rolled out", 7)},
	}, {
		name:     "statefulset before daemonset",
		deployed: 1,
		workloads: []Workload{
			done("DaemonSet", "a", selector("app", "ds"), 0),
			done("StatefulSet", "z", selector("app", "sts"), 0),
		},
		want: Status{Selector: "app=sts", RolledOut: rolledOutCond("True", "RolloutComplete", "2 workload(s) rolled out", 1)},
	}, {
		name:     "same kind: first by name",
		deployed: 1,
		workloads: []Workload{
			done("Deployment", "web-b", selector("app", "b"), 1),
			done("Deployment", "web-a", &metav1.LabelSelector{
				MatchLabels:      map[string]string{"app": "a"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "track", Operator: metav1.LabelSelectorOpIn, Values: []string{"stable", "canary"}}},
			}, 2),
		},
		want: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, Selector: "app=a,track in (canary,stable)",
			RolledOut: rolledOutCond("True", "RolloutComplete", "2 workload(s) rolled out", 1)},
	}, {
		name:      "primary without selector",
		deployed:  1,
		workloads: []Workload{done("Deployment", "web", nil, 1)},
		want:      Status{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, RolledOut: rolledOutCond("True", "RolloutComplete", "1 workload(s) rolled out", 1)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ComputeStatus(tc.deployed, tc.revision, tc.workloads); got != tc.want {
				t.Fatalf("ComputeStatus =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func crWithStatus(status map[string]interface{}) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "tos.transwarp.io/v1alpha1",
		"kind":       "WarpdrivePool",
		"metadata":   map[string]interface{}{"name": "pool-a", "namespace": "ns1"},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// upToDateStatus is a CR status in which the sidecar's fields hold
// upToDateDesired, next to the manager's fields.
func upToDateStatus() map[string]interface{} {
	return map[string]interface{}{
		"observedGeneration": int64(5),
		"deployedRelease":    map[string]interface{}{"name": "pool-a"},
		"conditions": []interface{}{
			map[string]interface{}{"type": "Deployed", "status": "True", "reason": "UpgradeSuccessful", "lastTransitionTime": "2025-01-01T00:00:00Z"},
			map[string]interface{}{"type": "Ready", "status": "False", "reason": "RollingOut", "observedGeneration": int64(5), "lastTransitionTime": "2025-01-01T00:00:00Z"},
			map[string]interface{}{
				"type": "RolledOut", "status": "True", "reason": "RolloutComplete", "message": "1 workload(s) rolled out",
				"observedGeneration": int64(5), "lastTransitionTime": "2025-01-01T00:00:00Z",
			},
		},
		"replicas":          int64(3),
		"readyReplicas":     int64(2),
		"availableReplicas": int64(1),
		"selector":          "app=web",
	}
}

var upToDateDesired = Status{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, Selector: "app=web",
	RolledOut: rolledOutCond("True", "RolloutComplete", "1 workload(s) rolled out", 5)}

func TestDiffers(t *testing.T) {
	withStatus := func(f func(s map[string]interface{})) map[string]interface{} {
		s := upToDateStatus()
		f(s)
		return s
	}
	// withRolledOut changes the RolledOut condition of the status.
	withRolledOut := func(field string, value interface{}) map[string]interface{} {
		return withStatus(func(s map[string]interface{}) {
			s["conditions"].([]interface{})[2].(map[string]interface{})[field] = value
		})
	}
	desiredWith := func(f func(d *Status)) Status {
		d := upToDateDesired
		f(&d)
		return d
	}
	cases := []struct {
		name    string
		status  map[string]interface{}
		desired Status
		want    bool
	}{{
		name:    "no status at all",
		status:  nil,
		desired: upToDateDesired,
		want:    true,
	}, {
		name: "only the manager's fields",
		status: map[string]interface{}{
			"observedGeneration": int64(5),
			"conditions":         []interface{}{map[string]interface{}{"type": "Deployed", "status": "True"}},
			"deployedRelease":    map[string]interface{}{"name": "pool-a", "manifest": "..."},
		},
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "up to date",
		status:  upToDateStatus(),
		desired: upToDateDesired,
		want:    false,
	}, {
		name: "up to date, numbers decoded as float64",
		status: withStatus(func(s map[string]interface{}) {
			s["replicas"], s["readyReplicas"], s["availableReplicas"] = float64(3), float64(2), float64(1)
			s["conditions"].([]interface{})[2].(map[string]interface{})["observedGeneration"] = float64(5)
		}),
		desired: upToDateDesired,
		want:    false,
	}, {
		name:   "lastTransitionTime alone is no difference",
		status: withRolledOut("lastTransitionTime", "2031-06-07T08:09:10Z"),
		desired: desiredWith(func(d *Status) {
			d.RolledOut.LastTransitionTime = metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
		}),
		want: false,
	}, {
		name: "the manager's fields are not compared",
		status: withStatus(func(s map[string]interface{}) {
			s["observedGeneration"] = int64(6)
			s["conditions"] = s["conditions"].([]interface{})[2:]
		}),
		desired: upToDateDesired,
		want:    false,
	}, {
		name:    "one field changed",
		status:  upToDateStatus(),
		desired: desiredWith(func(d *Status) { d.ReadyReplicas = 3 }),
		want:    true,
	}, {
		name:    "selector changed",
		status:  upToDateStatus(),
		desired: desiredWith(func(d *Status) { d.Selector = "app=api" }),
		want:    true,
	}, {
		name:    "RolledOut status differs",
		status:  withRolledOut("status", "False"),
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "RolledOut reason differs",
		status:  withRolledOut("reason", "RollingOut"),
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "RolledOut message differs",
		status:  withRolledOut("message", "2 workload(s) rolled out"),
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "RolledOut observedGeneration differs",
		status:  withRolledOut("observedGeneration", int64(4)),
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "RolledOut missing",
		status:  withStatus(func(s map[string]interface{}) { s["conditions"] = s["conditions"].([]interface{})[:2] }),
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "workloads gone: zeros and empty selector differ from the old values",
		status:  upToDateStatus(),
		desired: desiredWith(func(d *Status) { d.Replicas, d.ReadyReplicas, d.AvailableReplicas, d.Selector = 0, 0, 0, "" }),
		want:    true,
	}, {
		name: "zeros already present",
		status: withStatus(func(s map[string]interface{}) {
			s["replicas"], s["readyReplicas"], s["availableReplicas"], s["selector"] = int64(0), int64(0), int64(0), ""
		}),
		desired: desiredWith(func(d *Status) { d.Replicas, d.ReadyReplicas, d.AvailableReplicas, d.Selector = 0, 0, 0, "" }),
		want:    false,
	}, {
		name:    "zeros absent",
		status:  withStatus(func(s map[string]interface{}) { delete(s, "replicas") }),
		desired: desiredWith(func(d *Status) { d.Replicas = 0 }),
		want:    true,
	}, {
		name:    "mistyped count",
		status:  withStatus(func(s map[string]interface{}) { s["replicas"] = "3" }),
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "mistyped selector",
		status:  withStatus(func(s map[string]interface{}) { s["selector"] = map[string]interface{}{"app": "web"} }),
		desired: upToDateDesired,
		want:    true,
	}, {
		name:    "mistyped RolledOut",
		status:  withRolledOut("observedGeneration", "5"),
		desired: upToDateDesired,
		want:    true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := differs(crWithStatus(tc.status), tc.desired); got != tc.want {
				t.Fatalf("differs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestApplyObject(t *testing.T) {
	cr := crWithStatus(upToDateStatus())
	cr.SetResourceVersion("42")
	cr.SetUID("uid-a")
	cr.SetGeneration(6)
	cr.SetLabels(map[string]string{"shard": "a"})
	cr.SetFinalizers([]string{"uninstall-helm-release"})
	cr.Object["spec"] = map[string]interface{}{"replicaCount": int64(3)}
	before := cr.DeepCopy()

	desired := Status{Replicas: 4, ReadyReplicas: 3, AvailableReplicas: 2, Selector: "app=web",
		RolledOut: rolledOutCond("False", "RollingOut", "Deployment web: 2 of 4 replicas available", 5)}
	desired.RolledOut.LastTransitionTime = metav1.NewTime(time.Date(2025, 3, 4, 6, 7, 8, 0, time.FixedZone("UTC+1", 3600)))

	got := applyObject(cr, desired)
	want := map[string]interface{}{
		"apiVersion": "tos.transwarp.io/v1alpha1",
		"kind":       "WarpdrivePool",
		"metadata":   map[string]interface{}{"name": "pool-a", "namespace": "ns1"},
		"status": map[string]interface{}{
			"replicas":          int64(4),
			"readyReplicas":     int64(3),
			"availableReplicas": int64(2),
			"selector":          "app=web",
			"conditions": []interface{}{map[string]interface{}{
				"type":               "RolledOut",
				"status":             "False",
				"reason":             "RollingOut",
				"message":            "Deployment web: 2 of 4 replicas available",
				"observedGeneration": int64(5),
				"lastTransitionTime": "2025-03-04T05:07:08Z",
			}},
		},
	}
	if !reflect.DeepEqual(got.Object, want) {
		t.Fatalf("applyObject =\n%#v\nwant\n%#v", got.Object, want)
	}
	if !reflect.DeepEqual(cr, before) {
		t.Fatalf("applyObject changed the CR:\n%#v\nwas\n%#v", cr.Object, before.Object)
	}

	// Zeros and an empty selector are applied, not omitted: applying without
	// a field would give up its ownership and leave the old value.
	got = applyObject(cr, Status{RolledOut: rolledOutCond("True", "RolloutComplete", "0 workload(s) rolled out", 5)})
	st, _ := got.Object["status"].(map[string]interface{})
	for field, want := range map[string]interface{}{"replicas": int64(0), "readyReplicas": int64(0), "availableReplicas": int64(0), "selector": ""} {
		if v, ok := st[field]; !ok || v != want {
			t.Errorf("status.%s = %#v (present %v), want %#v", field, v, ok, want)
		}
	}
}
