package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The manager pod of config/manager as the deploy e2e applies it (no image runs on the
// development machine, so what the kubelet would do with it is checked here).

// managerManifests decodes config/manager/manager.yaml: the operator's Namespace and the
// manager Deployment.
func managerManifests(t *testing.T) (*corev1.Namespace, *appsv1.Deployment) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ns *corev1.Namespace
	var d *appsv1.Deployment
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := decoder.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("config/manager/manager.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			ns = o
		case *appsv1.Deployment:
			d = o
		}
	}
	if ns == nil || d == nil {
		t.Fatal("config/manager/manager.yaml lacks the Namespace or the Deployment")
	}
	return ns, d
}

// dockerfilePath is the manager image's Dockerfile. It is read from this repository, not from
// $WARPDRIVE_CHARTS_ROOT's copy, as kubeModFile is.
const dockerfilePath = "../../Dockerfile"

// The operator's namespace admits only restricted pods, and the manager pod is one: both
// containers non-root, without privilege escalation or capabilities, seccomp RuntimeDefault,
// read-only root filesystems with a writable /tmp (Helm's home, cache and config), probes
// and resources, ephemeral storage among them.
func TestManagerPodIsRestricted(t *testing.T) {
	ns, d := managerManifests(t)
	for _, mode := range []string{"enforce", "audit", "warn"} {
		if got := ns.Labels["pod-security.kubernetes.io/"+mode]; got != "restricted" {
			t.Errorf("namespace label pod-security.kubernetes.io/%s=%q, want restricted", mode, got)
		}
	}
	tmpl := &d.Spec.Template
	checkPod(t, "manager Deployment", tmpl)
	// The pod runs as the image's user and group (the Dockerfile's USER), which the image's
	// files (root's, readable by all) let run /manager and read the charts.
	dockerfile, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	var user string
	for _, line := range strings.Split(string(dockerfile), "\n") {
		if u, ok := strings.CutPrefix(line, "USER "); ok {
			user = strings.TrimSpace(u)
		}
	}
	if sc := tmpl.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil ||
		fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsGroup) != user {
		t.Errorf("pod securityContext %+v: want runAsUser:runAsGroup %s, the Dockerfile's USER", sc, user)
	}
	if len(tmpl.Spec.Containers) != 2 {
		t.Fatalf("containers %d, want the manager and the sidecar", len(tmpl.Spec.Containers))
	}
	for _, c := range tmpl.Spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: root filesystem not read-only", c.Name)
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" && !m.ReadOnly }) {
			t.Errorf("%s: no writable /tmp", c.Name)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["HOME"] != "/tmp" {
			t.Errorf("%s: HOME=%q, want the writable /tmp", c.Name, env["HOME"])
		}
		for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"} {
			if c.Name == "manager" && !strings.HasPrefix(env[v], "/tmp/") {
				t.Errorf("%s: %s=%q, want a directory under the writable /tmp", c.Name, v, env[v])
			}
		}
		for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("%s: no HTTP %s probe", c.Name, name)
				continue
			}
			if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return intstr.FromString(cp.Name) == p.HTTPGet.Port }) {
				t.Errorf("%s: %s probe on port %v, which the container does not declare", c.Name, name, p.HTTPGet.Port)
			}
			if !slices.Contains(c.Args, "--health-probe-bind-address=:"+portNumber(c, p.HTTPGet.Port)) {
				t.Errorf("%s: %s probe port %v is not where --health-probe-bind-address serves", c.Name, name, p.HTTPGet.Port)
			}
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
			if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
				t.Errorf("%s: %s request %v, limit %v; want both, request <= limit", c.Name, res, req.String(), lim.String())
			}
		}
	}
}

func portNumber(c corev1.Container, port intstr.IntOrString) string {
	for _, cp := range c.Ports {
		if intstr.FromString(cp.Name) == port {
			return strconv.Itoa(int(cp.ContainerPort))
		}
	}
	return port.String()
}

// Metrics are wired end to end: config/default's patch makes both containers serve HTTPS
// with authentication and authorization, the Service targets those ports, and the
// ServiceMonitor of config/prometheus scrapes each of them over HTTPS with a token.
func TestMetricsEndpointsWired(t *testing.T) {
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	readYAML(t, "config/default/manager_metrics_patch.yaml", &ops)
	args := map[string][]string{}
	ports := map[string]map[string]int{} // container index -> port name -> number
	for _, op := range ops {
		parts := strings.Split(op.Path, "/") // /spec/template/spec/containers/N/args/-
		if len(parts) != 8 || op.Op != "add" {
			t.Fatalf("unexpected patch operation %s %s", op.Op, op.Path)
		}
		switch parts[6] {
		case "args":
			args[parts[5]] = append(args[parts[5]], op.Value.(string))
		case "ports":
			m := op.Value.(map[string]any)
			if ports[parts[5]] == nil {
				ports[parts[5]] = map[string]int{}
			}
			ports[parts[5]][m["name"].(string)] = int(m["containerPort"].(float64))
		}
	}
	var served []int
	for _, i := range []string{"0", "1"} {
		if !slices.Contains(args[i], "--metrics-secure") {
			t.Errorf("container %s: metrics without --metrics-secure", i)
		}
		for name, n := range ports[i] {
			if !slices.Contains(args[i], "--metrics-bind-address=:"+strconv.Itoa(n)) {
				t.Errorf("container %s: port %s (%d) is not where its metrics are served", i, name, n)
			}
			served = append(served, n)
		}
	}

	var svc corev1.Service
	readYAML(t, "config/default/metrics_service.yaml", &svc)
	names := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		names[p.Name] = true
		found := false
		for i := range ports {
			for name, n := range ports[i] {
				if p.TargetPort == intstr.FromString(name) || p.TargetPort == intstr.FromInt32(int32(n)) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("Service port %s targets %v, which no container serves metrics on", p.Name, p.TargetPort)
		}
	}
	if len(svc.Spec.Ports) != len(served) {
		t.Errorf("Service has %d ports for %d metrics endpoints", len(svc.Spec.Ports), len(served))
	}

	var monitor struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port            string `json:"port"`
				Scheme          string `json:"scheme"`
				BearerTokenFile string `json:"bearerTokenFile"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	readYAML(t, "config/prometheus/monitor.yaml", &monitor)
	if len(monitor.Spec.Endpoints) != len(svc.Spec.Ports) {
		t.Errorf("ServiceMonitor scrapes %d endpoints, the Service has %d", len(monitor.Spec.Endpoints), len(svc.Spec.Ports))
	}
	for _, ep := range monitor.Spec.Endpoints {
		if !names[ep.Port] || ep.Scheme != "https" || ep.BearerTokenFile == "" {
			t.Errorf("ServiceMonitor endpoint %+v: want an https port of the Service with a bearer token", ep)
		}
	}
	for k, v := range monitor.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which the Service lacks", k, v)
		}
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
