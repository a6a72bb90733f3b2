// Package podargs reads the command lines of the manager pod's two containers from the
// Deployment that config/default renders, and translates them for a process on the host.
//
// The rendered Deployment is the one source of the flags the operator runs with: `make
// deploy` applies it, and `make run`, the e2e, security, fault and bench suites start
// bin/manager with each container's arguments (the sidecar's begin with its subcommand), so
// that their figures and results describe the configuration that is deployed. Only what
// cannot be the same outside the pod differs, and HostArgs is the one place where it does.
// Env gives them, too, the variables the kubelet computes from the containers' resources:
// the memory limit from which each process sets the Go runtime's soft limit.
package podargs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The Deployment of the manager pod in config/default's output (kustomize prefixes its name
// with the project's), and its containers.
const (
	deploymentSuffix = "controller-manager"
	Manager          = "manager"
	Sidecar          = "sidecar"
	// Binary is the command of both containers: the image's one binary (bin/manager on the
	// host).
	Binary = "/manager"
)

// Pod is what the manager pod's Deployment gives each of its containers, by container name.
type Pod struct {
	Args map[string][]string // the command line after the binary (Parse)
	Env  map[string][]string // the variables from the container's resources (Env)
}

// Render runs kustomize (the binary make deploy uses) on dir (config/default) once and returns
// the arguments and variables of each container of the manager pod.
func Render(kustomize, dir string) (Pod, error) {
	cmd := exec.Command(kustomize, "build", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Pod{}, fmt.Errorf("%s build %s: %w: %s", kustomize, dir, err, stderr.String())
	}
	var pod Pod
	if pod.Args, err = Parse(out); err != nil {
		return Pod{}, err
	}
	if pod.Env, err = Env(out); err != nil {
		return Pod{}, err
	}
	return pod, nil
}

// Parse finds the manager pod's Deployment in a stream of YAML documents and returns the
// arguments of each of its containers, by container name: the words of its command after the
// binary (a subcommand: `/manager sidecar`), then its args. Both containers run the image's
// one binary, /manager.
func Parse(manifests []byte) (map[string][]string, error) {
	d, err := findDeployment(manifests)
	if err != nil {
		return nil, err
	}
	found := map[string][]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		if len(c.Command) == 0 || c.Command[0] != Binary {
			return nil, fmt.Errorf("container %s: command %q, want %s and its subcommand, if any", c.Name, c.Command, Binary)
		}
		for _, w := range c.Command[1:] {
			if FlagName(w) != "" {
				return nil, fmt.Errorf("container %s: command %q: flags belong in args", c.Name, c.Command)
			}
		}
		// HostArgs replaces flags by name: a value in an argument of its own would be
		// left behind.
		for _, a := range c.Args {
			if FlagName(a) == "" {
				return nil, fmt.Errorf("container %s: argument %q: write flags as --name=value", c.Name, a)
			}
		}
		found[c.Name] = append(append([]string(nil), c.Command[1:]...), c.Args...)
	}
	for _, c := range []string{Manager, Sidecar} {
		if _, ok := found[c]; !ok {
			return nil, fmt.Errorf("the %s Deployment has no container %q", deploymentSuffix, c)
		}
	}
	return found, nil
}

// Env returns, by container name, the variables of each container's env that the kubelet
// computes from the container's own resources (resourceFieldRef), as NAME=value: the
// memory limit from which both processes set the Go runtime's soft memory limit
// (MEMORY_LIMIT). A process on the host runs in no container, and without them it would
// collect its garbage against another target than the pod's. The other variables are the
// pod's paths and namespace, which the host has its own of, and the pod's name and UID,
// which a process on the host has none of (its Lease keeps controller-runtime's identity,
// internal/mgropts).
func Env(manifests []byte) (map[string][]string, error) {
	d, err := findDeployment(manifests)
	if err != nil {
		return nil, err
	}
	env := map[string][]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		env[c.Name] = []string{}
		for _, v := range c.Env {
			ref := v.ValueFrom
			if ref == nil || ref.ResourceFieldRef == nil {
				continue
			}
			value, err := resourceValue(c, *ref.ResourceFieldRef)
			if err != nil {
				return nil, fmt.Errorf("container %s: env %s: %w", c.Name, v.Name, err)
			}
			env[c.Name] = append(env[c.Name], v.Name+"="+value)
		}
	}
	return env, nil
}

// resourceValue is what the kubelet gives a resourceFieldRef of the container's own
// resources: the quantity over the divisor (1 by default), rounded up.
func resourceValue(c corev1.Container, ref corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		return "", fmt.Errorf("refers to container %s's resources", ref.ContainerName)
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := map[string]corev1.ResourceList{"limits": c.Resources.Limits, "requests": c.Resources.Requests}[kind]
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		// The kubelet would give the node's allocatable, which a process on the host has no
		// equivalent of.
		return "", fmt.Errorf("the container sets no %s", ref.Resource)
	}
	divisor := resource.MustParse("1")
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor
	}
	if name == "cpu" {
		return strconv.FormatInt((q.MilliValue()+divisor.MilliValue()-1)/divisor.MilliValue(), 10), nil
	}
	return strconv.FormatInt((q.Value()+divisor.Value()-1)/divisor.Value(), 10), nil
}

// findDeployment is the manager pod's Deployment in a stream of YAML documents.
func findDeployment(manifests []byte) (*appsv1.Deployment, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	var found *appsv1.Deployment
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, err
		}
		if head.Kind != "Deployment" || !strings.HasSuffix(head.Metadata.Name, deploymentSuffix) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("more than one Deployment named *%s", deploymentSuffix)
		}
		found = &appsv1.Deployment{}
		if err := yaml.Unmarshal(doc, found); err != nil {
			return nil, err
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no Deployment named *%s", deploymentSuffix)
	}
	return found, nil
}

// Host is what a process on the host uses where the pod's value cannot apply.
type Host struct {
	// WatchesFile is the watches file, relative to the directory the process runs in (the
	// repository root: the watches file names the charts relative to it).
	WatchesFile string
	// MetricsAddr and ProbeAddr are where the process serves its metrics and probes ("0":
	// nowhere).
	MetricsAddr, ProbeAddr string
	// SecureMetrics keeps the pod's --metrics-secure; without it the metrics are served over
	// plain HTTP, for a test to read without a token.
	SecureMetrics bool
	// LeaseNamespace is where the leader-election Lease is kept.
	LeaseNamespace string
}

// Translated lists the flags HostArgs changes, each with why the host cannot take the pod's
// value. Every other flag of the pod is passed unchanged.
var Translated = map[string]string{
	// The image holds watches.yaml (and the charts it names) under /opt/helm; on the host they
	// are the repository's.
	"watches-file": "the image's /opt/helm/watches.yaml is the repository's watches.yaml on the host",
	// In the pod the port is the pod's own; on the host the caller picks a free one (several
	// processes run side by side), on loopback.
	"metrics-bind-address": "the pod's port is its own; on the host the caller picks a free loopback port",
	// Over plain HTTP the suites read their processes' metrics without a token; the e2e suite
	// turns it on to test the authorization of the endpoint.
	"metrics-secure":            "kept only when asked for (Host.SecureMetrics): the suites read metrics without a token",
	"health-probe-bind-address": "nothing probes a process on the host; the caller picks an address or none",
	// In the pod the Lease lives in the pod's namespace, the default; off the cluster there is
	// no such default, so the flag is required.
	"leader-election-namespace": "the pod's namespace is the default in the pod; on the host it must be given",
	// The pod serves the CRD conversion webhook behind its Service, from the mounted Secret
	// that its rotator keeps; a process on the host has neither the mount nor the Service, and
	// its rotator would overwrite the deployed pod's Secret and the CRDs' caBundle. On the
	// host it serves none unless the caller gives its own port and cert dir
	// (internal/hostconversion: a certificate of its own for the Service, not rotated, and an
	// EndpointSlice of the Service at the host; make run and test/framework's LocalConversion).
	"conversion-webhook-port": "the pod's webhook is behind its Service; on the host it is served only where the caller gives a port",
	"conversion-cert-dir":     "the pod's mounted Secret is not on the host",
	"conversion-cert-secret":  "the host must not rotate the deployed pod's Secret and the CRDs' caBundle",
	"conversion-service-name": "the rotated certificate is for the pod's Service, which does not reach the host",
}

// HostArgs translates a container's arguments for a process on the host: the flags in
// Translated take the host's values (added when the pod leaves them to their defaults), every
// other argument is kept as it is, in order.
func (h Host) HostArgs(pod []string) ([]string, error) {
	var args []string
	leaderElect := false
	for _, a := range pod {
		if _, ok := Translated[FlagName(a)]; ok {
			continue
		}
		if a == "--leader-elect" || a == "--leader-elect=true" {
			leaderElect = true
		}
		args = append(args, a)
	}
	args = append(args, "--watches-file="+h.WatchesFile,
		"--metrics-bind-address="+orNone(h.MetricsAddr), "--health-probe-bind-address="+orNone(h.ProbeAddr))
	if h.SecureMetrics {
		args = append(args, "--metrics-secure")
	}
	if leaderElect {
		if h.LeaseNamespace == "" {
			return nil, errors.New("the pod elects a leader: the host needs the namespace of the Lease")
		}
		args = append(args, "--leader-election-namespace="+h.LeaseNamespace)
	}
	return args, nil
}

// FlagName is the name of the flag of argument a ("--name=value", "-name" or "--name"), or ""
// when a is not a flag.
func FlagName(a string) string {
	if !strings.HasPrefix(a, "-") {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	return name
}

func orNone(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}
