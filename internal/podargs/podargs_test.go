package podargs

import (
	"slices"
	"testing"
)

const manifests = `apiVersion: v1
kind: Namespace
metadata:
  name: x-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: x-controller-manager
spec:
  template:
    spec:
      containers:
      - name: manager
        command: ["/manager"]
        args: ["--watches-file=/opt/helm/watches.yaml", "--leader-elect", "--metrics-bind-address=0", "--reconcile-period=10h", "--metrics-bind-address=:8443", "--metrics-secure"]
      - name: sidecar
        command: ["/manager", "sidecar"]
        args: ["--health-probe-bind-address=:8083"]
`

// The pod's arguments come from the Deployment; the host keeps all but the translated ones.
func TestHostArgs(t *testing.T) {
	pod, err := Parse([]byte(manifests))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Host{WatchesFile: "watches.yaml", MetricsAddr: "127.0.0.1:1", LeaseNamespace: "ns"}.HostArgs(pod[Manager])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--leader-elect", "--reconcile-period=10h", "--watches-file=watches.yaml",
		"--metrics-bind-address=127.0.0.1:1", "--health-probe-bind-address=0", "--leader-election-namespace=ns"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	// The sidecar's subcommand comes first, as in the pod.
	got, err = Host{WatchesFile: "w.yaml", SecureMetrics: true}.HostArgs(pod[Sidecar])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"sidecar", "--watches-file=w.yaml", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--metrics-secure"}; !slices.Equal(got, want) {
		t.Errorf("sidecar: got %v\nwant %v", got, want)
	}
	if _, err := (Host{}).HostArgs(pod[Manager]); err == nil {
		t.Error("leader election without a Lease namespace accepted")
	}
}

func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"no Deployment":   "kind: Service\nmetadata: {name: x-controller-manager}\n",
		"no sidecar":      "kind: Deployment\nmetadata: {name: x-controller-manager}\nspec: {template: {spec: {containers: [{name: manager, command: [/manager]}]}}}\n",
		"separate value":  "kind: Deployment\nmetadata: {name: x-controller-manager}\nspec: {template: {spec: {containers: [{name: manager, command: [/manager], args: [--reconcile-period, 1m]}, {name: sidecar, command: [/manager, sidecar]}]}}}\n",
		"other binary":    "kind: Deployment\nmetadata: {name: x-controller-manager}\nspec: {template: {spec: {containers: [{name: manager, command: [/manager]}, {name: sidecar, command: [/sidecar]}]}}}\n",
		"flag in command": "kind: Deployment\nmetadata: {name: x-controller-manager}\nspec: {template: {spec: {containers: [{name: manager, command: [/manager, --leader-elect]}, {name: sidecar, command: [/manager, sidecar]}]}}}\n",
		"two Deployments": manifests + "---\n" + manifests,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A process on the host gets the variables the kubelet computes from its container's
// resources, as the container does; the pod's paths and namespace stay the host's.
func TestEnv(t *testing.T) {
	const pod = `kind: Deployment
metadata: {name: x-controller-manager}
spec:
  template:
    spec:
      containers:
      - name: manager
        command: [/manager]
        env:
        - {name: MEMORY_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
        - {name: CPU_MILLIS, valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}}
        - {name: CPUS, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
        - {name: MEMORY_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
        - {name: HOME, value: /tmp}
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        resources: {requests: {cpu: 100m}, limits: {cpu: 1500m, memory: 512Mi}}
      - name: sidecar
        command: [/manager, sidecar]
        env:
        - {name: MEMORY_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
        resources: {limits: {memory: 256Mi}}
`
	env, err := Env([]byte(pod))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		Manager: {"MEMORY_LIMIT=536870912", "CPU_MILLIS=100", "CPUS=2", "MEMORY_MI=512"},
		Sidecar: {"MEMORY_LIMIT=268435456"},
	}
	for c, w := range want {
		if !slices.Equal(env[c], w) {
			t.Errorf("%s: env %q, want %q", c, env[c], w)
		}
	}

	// Without the limit the kubelet would give the node's allocatable memory, which has no
	// counterpart on the host.
	noLimit := "kind: Deployment\nmetadata: {name: x-controller-manager}\nspec: {template: {spec: {containers: [{name: manager, command: [/manager], env: [{name: MEMORY_LIMIT, valueFrom: {resourceFieldRef: {resource: limits.memory}}}]}]}}}\n"
	if _, err := Env([]byte(noLimit)); err == nil {
		t.Error("a resourceFieldRef of a limit the container does not set: accepted")
	}
}
