package charts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"text/template"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kwokStagesFile holds the stages of the local cluster's kwok nodes: node-initialize sets
// what a node advertises. It is read from this repository, not from $WARPDRIVE_CHARTS_ROOT's
// copy, as kubeModFile is.
const kwokStagesFile = "../../hack/kwok/stages.yaml"

// kwokNodeStatus is the status node-initialize gives a kwok node, its template executed with
// stand-ins for kwok's functions (none of which sets a resource).
func kwokNodeStatus(t *testing.T) corev1.NodeStatus {
	t.Helper()
	data, err := os.ReadFile(kwokStagesFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var stage struct {
			Metadata struct{ Name string }
			Spec     struct {
				Next struct{ StatusTemplate string }
			}
		}
		if err := dec.Decode(&stage); err != nil {
			t.Fatalf("%s: no node-initialize stage: %v", kwokStagesFile, err)
		}
		if stage.Metadata.Name != "node-initialize" {
			continue
		}
		quote := func(v any) string { b, _ := json.Marshal(fmt.Sprint(v)); return string(b) }
		text := func() string { return "x" }
		tmpl, err := template.New("node-initialize").Funcs(template.FuncMap{
			"Now": text, "NodeIP": text, "NodeName": text, "Version": text, "Quote": quote,
			"NodeConditions": func() []map[string]any { return nil },
		}).Parse(stage.Spec.Next.StatusTemplate)
		if err != nil {
			t.Fatalf("%s: node-initialize: %v", kwokStagesFile, err)
		}
		var out bytes.Buffer
		if err := tmpl.Execute(&out, map[string]any{}); err != nil {
			t.Fatalf("%s: node-initialize: %v", kwokStagesFile, err)
		}
		var status corev1.NodeStatus
		if err := yaml.Unmarshal(out.Bytes(), &status); err != nil {
			t.Fatalf("%s: node-initialize's status: %v\n%s", kwokStagesFile, err, out.String())
		}
		return status
	}
}

// podRequests is what the scheduler counts a pod as requesting: the sum of its containers'
// requests or, above it, an init container's; a container that sets only a limit requests it
// (the apiserver defaults requests to limits).
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	requests := func(c corev1.Container) corev1.ResourceList {
		out := c.Resources.Limits.DeepCopy()
		if out == nil {
			out = corev1.ResourceList{}
		}
		for name, q := range c.Resources.Requests {
			out[name] = q
		}
		return out
	}
	total := corev1.ResourceList{}
	for _, c := range spec.Containers {
		for name, q := range requests(c) {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	for _, c := range spec.InitContainers {
		for name, q := range requests(c) {
			if have, ok := total[name]; !ok || q.Cmp(have) > 0 {
				total[name] = q
			}
		}
	}
	return total
}

// podSpecOf returns the pod spec of an object that creates pods, or nil.
func podSpecOf(obj runtime.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.Spec
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	case *appsv1.ReplicaSet:
		return &o.Spec.Template.Spec
	case *batchv1.Job:
		return &o.Spec.Template.Spec
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.Spec
	}
	return nil
}

// The local cluster's kwok nodes advertise what the pods of every kind's sample request, in
// capacity and allocatable, as a real node's kubelet does (ephemeral storage among them, which
// catalogue charts' resource presets request): else such a pod stays Pending for ever
// ("Insufficient ephemeral-storage"). On TestAddKind's copies this covers each added chart.
func TestSamplesFitKwokNodes(t *testing.T) {
	node := kwokNodeStatus(t)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods} {
		if _, ok := node.Allocatable[name]; !ok {
			t.Errorf("%s: kwok nodes' allocatable has no %s, which a real kubelet advertises", kwokStagesFile, name)
		}
		if _, ok := node.Capacity[name]; !ok {
			t.Errorf("%s: kwok nodes' capacity has no %s, which a real kubelet advertises", kwokStagesFile, name)
		}
	}
	for _, w := range watchList(t) {
		t.Run(w.Kind, func(t *testing.T) {
			s := loadSample(t, w)
			r := mustInstall(t, strings.ToLower(w.Kind), s.Name, s.Values)
			for key, obj := range r.all {
				spec := podSpecOf(obj)
				if spec == nil {
					continue
				}
				for name, q := range podRequests(spec) {
					if q.IsZero() {
						continue
					}
					if have, ok := node.Allocatable[name]; !ok || have.Cmp(q) < 0 {
						t.Errorf("%s: a pod requests %s of %s, kwok nodes allocate %s (%s): it would stay Pending",
							key, q.String(), name, have.String(), kwokStagesFile)
					}
					if have, ok := node.Capacity[name]; !ok || have.Cmp(q) < 0 {
						t.Errorf("%s: a pod requests %s of %s, kwok nodes' capacity is %s (%s)", key, q.String(), name, have.String(), kwokStagesFile)
					}
				}
			}
		})
	}
}
