package workloadstatus

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func selector(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func TestFromWorkloads(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec:       appsv1.DeploymentSpec{Selector: selector("app", "d")},
		Status:     appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1},
	}
	if got, want := FromDeployment(d), (Workload{Kind: "Deployment", Name: "d", Selector: d.Spec.Selector, Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1}); !workloadEqual(got, want) {
		t.Errorf("FromDeployment = %+v, want %+v", got, want)
	}
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec:       appsv1.StatefulSetSpec{Selector: selector("app", "s")},
		Status:     appsv1.StatefulSetStatus{Replicas: 5, ReadyReplicas: 4, AvailableReplicas: 3},
	}
	if got, want := FromStatefulSet(s), (Workload{Kind: "StatefulSet", Name: "s", Selector: s.Spec.Selector, Replicas: 5, ReadyReplicas: 4, AvailableReplicas: 3}); !workloadEqual(got, want) {
		t.Errorf("FromStatefulSet = %+v, want %+v", got, want)
	}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ds"},
		Spec:       appsv1.DaemonSetSpec{Selector: selector("app", "ds")},
		Status: appsv1.DaemonSetStatus{
			DesiredNumberScheduled: 4, CurrentNumberScheduled: 9, UpdatedNumberScheduled: 9,
			NumberReady: 3, NumberAvailable: 2, NumberUnavailable: 2,
		},
	}
	if got, want := FromDaemonSet(ds), (Workload{Kind: "DaemonSet", Name: "ds", Selector: ds.Spec.Selector, Replicas: 4, ReadyReplicas: 3, AvailableReplicas: 2}); !workloadEqual(got, want) {
		t.Errorf("FromDaemonSet = %+v, want %+v", got, want)
	}
}

func workloadEqual(a, b Workload) bool {
	return a.Kind == b.Kind && a.Name == b.Name && a.Selector == b.Selector &&
		a.Replicas == b.Replicas && a.ReadyReplicas == b.ReadyReplicas && a.AvailableReplicas == b.AvailableReplicas
}

func TestComputeStatus(t *testing.T) {
	cases := []struct {
		name      string
		gen       int64
		workloads []Workload
		want      Status
	}{{
		name: "no workloads: zeros, empty selector",
		gen:  4,
		want: Status{ObservedGeneration: 4},
	}, {
		name:      "one deployment",
		gen:       1,
		workloads: []Workload{{Kind: "Deployment", Name: "web", Selector: selector("app", "web"), Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2}},
		want:      Status{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 1, Selector: "app=web"},
	}, {
		name:      "daemonset only",
		gen:       2,
		workloads: []Workload{{Kind: "DaemonSet", Name: "agent", Selector: selector("app", "agent"), Replicas: 5, ReadyReplicas: 4, AvailableReplicas: 3}},
		want:      Status{Replicas: 5, ReadyReplicas: 4, AvailableReplicas: 3, ObservedGeneration: 2, Selector: "app=agent"},
	}, {
		name: "mixed kinds sum up, deployment is primary whatever the order",
		gen:  7,
		workloads: []Workload{
			{Kind: "DaemonSet", Name: "a-agent", Selector: selector("app", "agent"), Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2},
			{Kind: "StatefulSet", Name: "a-db", Selector: selector("app", "db"), Replicas: 3, ReadyReplicas: 1, AvailableReplicas: 1},
			{Kind: "Deployment", Name: "z-web", Selector: selector("app", "web", "tier", "front"), Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 3},
		},
		want: Status{Replicas: 9, ReadyReplicas: 7, AvailableReplicas: 6, ObservedGeneration: 7, Selector: "app=web,tier=front"},
	}, {
		name: "statefulset before daemonset",
		gen:  1,
		workloads: []Workload{
			{Kind: "DaemonSet", Name: "a", Selector: selector("app", "ds")},
			{Kind: "StatefulSet", Name: "z", Selector: selector("app", "sts")},
		},
		want: Status{ObservedGeneration: 1, Selector: "app=sts"},
	}, {
		name: "same kind: first by name",
		gen:  1,
		workloads: []Workload{
			{Kind: "Deployment", Name: "web-b", Selector: selector("app", "b"), Replicas: 1},
			{Kind: "Deployment", Name: "web-a", Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"app": "a"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "track", Operator: metav1.LabelSelectorOpIn, Values: []string{"stable", "canary"}}},
			}, Replicas: 2},
		},
		want: Status{Replicas: 3, ObservedGeneration: 1, Selector: "app=a,track in (canary,stable)"},
	}, {
		name:      "primary without selector",
		gen:       1,
		workloads: []Workload{{Kind: "Deployment", Name: "web", Replicas: 1}},
		want:      Status{Replicas: 1, ObservedGeneration: 1},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ComputeStatus(tc.gen, tc.workloads); got != tc.want {
				t.Fatalf("ComputeStatus = %+v, want %+v", got, tc.want)
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

func TestStatusPatch(t *testing.T) {
	desired := Status{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 5, Selector: "app=web"}
	current := func() map[string]interface{} {
		return map[string]interface{}{
			"conditions":         []interface{}{map[string]interface{}{"type": "Deployed", "status": "True"}},
			"deployedRelease":    map[string]interface{}{"name": "pool-a"},
			"replicas":           int64(3),
			"readyReplicas":      int64(2),
			"availableReplicas":  int64(1),
			"observedGeneration": int64(5),
			"selector":           "app=web",
		}
	}
	cases := []struct {
		name    string
		status  map[string]interface{}
		desired Status
		want    string // "" means no patch
	}{{
		name:    "no status at all",
		status:  nil,
		desired: desired,
		want:    `{"status":{"availableReplicas":1,"observedGeneration":5,"readyReplicas":2,"replicas":3,"selector":"app=web"}}`,
	}, {
		name:    "only the helm-operator's fields",
		status:  map[string]interface{}{"conditions": []interface{}{}, "deployedRelease": map[string]interface{}{"name": "pool-a", "manifest": "..."}},
		desired: desired,
		want:    `{"status":{"availableReplicas":1,"observedGeneration":5,"readyReplicas":2,"replicas":3,"selector":"app=web"}}`,
	}, {
		name:    "up to date",
		status:  current(),
		desired: desired,
		want:    "",
	}, {
		name: "up to date, numbers decoded as float64",
		status: func() map[string]interface{} {
			s := current()
			s["replicas"], s["observedGeneration"] = float64(3), float64(5)
			return s
		}(),
		desired: desired,
		want:    "",
	}, {
		name:    "one field changed",
		status:  current(),
		desired: Status{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 1, ObservedGeneration: 5, Selector: "app=web"},
		want:    `{"status":{"readyReplicas":3}}`,
	}, {
		name:    "new generation",
		status:  current(),
		desired: Status{Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, ObservedGeneration: 6, Selector: "app=web"},
		want:    `{"status":{"observedGeneration":6}}`,
	}, {
		name:    "workloads gone: zeros and empty selector are written, not omitted",
		status:  current(),
		desired: Status{ObservedGeneration: 5},
		want:    `{"status":{"availableReplicas":0,"readyReplicas":0,"replicas":0,"selector":""}}`,
	}, {
		name:    "zeros already present",
		status:  map[string]interface{}{"replicas": int64(0), "readyReplicas": int64(0), "availableReplicas": int64(0), "observedGeneration": int64(1), "selector": ""},
		desired: Status{ObservedGeneration: 1},
		want:    "",
	}, {
		name: "mistyped values are overwritten",
		status: func() map[string]interface{} {
			s := current()
			s["replicas"], s["selector"] = "3", map[string]interface{}{"app": "web"}
			return s
		}(),
		desired: desired,
		want:    `{"status":{"replicas":3,"selector":"app=web"}}`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StatusPatch(crWithStatus(tc.status), tc.desired)
			if err != nil {
				t.Fatalf("StatusPatch: %v", err)
			}
			if tc.want == "" {
				if got != nil {
					t.Fatalf("StatusPatch = %s, want no patch", got)
				}
				return
			}
			if string(got) != tc.want {
				t.Fatalf("StatusPatch = %s\nwant          %s", got, tc.want)
			}
		})
	}
}
