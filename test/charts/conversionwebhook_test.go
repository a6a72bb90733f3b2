package charts

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/podargs"
)

// builtObjects are the objects of a kustomize build, by kind and name.
type builtObjects map[string]map[string][]byte

func splitBuild(t *testing.T, out []byte) builtObjects {
	t.Helper()
	objs := builtObjects{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind == "" {
			continue
		}
		if objs[head.Kind] == nil {
			objs[head.Kind] = map[string][]byte{}
		}
		objs[head.Kind][head.Metadata.Name] = doc
	}
	return objs
}

// flagValue is the value the last --name=value of args gives, and whether one does.
func flagValue(args []string, name string) (string, bool) {
	value, found := "", false
	for _, a := range args {
		if podargs.FlagName(a) == name {
			_, value, _ = strings.Cut(a, "=")
			found = true
		}
	}
	return value, found
}

// TestConversionWebhookWiring: what make deploy applies (config/default) serves the CRD
// conversion webhook where the CRDs crdgen generates call it. The API server calls the
// Service crdgen.WebhookServiceName in crdgen.WebhookServiceNamespace on port
// crdgen.WebhookPort; the built Service has those names, and sends that port to the sidecar's
// conversion port on the operator's pods; the sidecar serves on that port, from the Secret
// that it rotates for that Service, mounted (optional) at its cert dir; and a NetworkPolicy
// lets any source in on that port, as the API server is outside any namespace. The names in
// the sidecar's args are written out (kustomize prefixes names, not args): this is where a
// renamed Service, Secret or namespace shows.
func TestConversionWebhookWiring(t *testing.T) {
	if os.Getenv(rootEnv) != "" {
		t.Skip("already running on a copy") // a new kind changes none of it; the copy has no bin/kustomize
	}
	objs := splitBuild(t, kustomizeBuild(t, "config/default"))

	var deploy appsv1.Deployment
	for name, doc := range objs["Deployment"] {
		if strings.HasSuffix(name, "controller-manager") {
			if err := yaml.UnmarshalStrict(doc, &deploy); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deploy.Name == "" {
		t.Fatal("config/default renders no controller-manager Deployment")
	}
	if deploy.Namespace != crdgen.WebhookServiceNamespace {
		t.Errorf("the pod runs in %s, the CRDs call the webhook in %s", deploy.Namespace, crdgen.WebhookServiceNamespace)
	}
	var sidecar *corev1.Container
	for i, c := range deploy.Spec.Template.Spec.Containers {
		if c.Name == podargs.Sidecar {
			sidecar = &deploy.Spec.Template.Spec.Containers[i]
		}
	}
	if sidecar == nil {
		t.Fatal("the Deployment has no sidecar container")
	}
	arg := func(name string) string {
		v, ok := flagValue(sidecar.Args, name)
		if !ok || v == "" {
			t.Errorf("the sidecar has no --%s", name)
		}
		return v
	}
	port, certDir, secret, service := arg("conversion-webhook-port"), arg("conversion-cert-dir"),
		arg("conversion-cert-secret"), arg("conversion-service-name")

	// The Service: crdgen's names and port, to the sidecar's conversion port on the pods.
	doc, ok := objs["Service"][crdgen.WebhookServiceName]
	if !ok {
		t.Fatalf("config/default renders no Service %s (crdgen.WebhookServiceName)", crdgen.WebhookServiceName)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(doc, &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Namespace != crdgen.WebhookServiceNamespace {
		t.Errorf("Service %s in %s, want %s", svc.Name, svc.Namespace, crdgen.WebhookServiceNamespace)
	}
	if service != crdgen.WebhookServiceName {
		t.Errorf("--conversion-service-name=%s: the rotated certificate would not be for %s", service, crdgen.WebhookServiceName)
	}
	if sel := labels.SelectorFromSet(svc.Spec.Selector); len(svc.Spec.Selector) == 0 || !sel.Matches(labels.Set(deploy.Spec.Template.Labels)) {
		t.Errorf("Service selector %v does not select the operator's pods %v", svc.Spec.Selector, deploy.Spec.Template.Labels)
	}
	var containerPort int32
	var target corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		if p.Port == crdgen.WebhookPort {
			target = p
		}
	}
	if target.Port == 0 {
		t.Fatalf("Service %s has no port %d (crdgen.WebhookPort): %v", svc.Name, crdgen.WebhookPort, svc.Spec.Ports)
	}
	for _, p := range sidecar.Ports {
		if (target.TargetPort.StrVal != "" && p.Name == target.TargetPort.StrVal) ||
			(target.TargetPort.StrVal == "" && p.ContainerPort == target.TargetPort.IntVal) {
			containerPort = p.ContainerPort
		}
	}
	if containerPort == 0 {
		t.Fatalf("the Service's target port %s is none of the sidecar's ports %v", target.TargetPort.String(), sidecar.Ports)
	}
	if port != strconv.Itoa(int(containerPort)) {
		t.Errorf("--conversion-webhook-port=%s, the Service sends to the sidecar's port %d", port, containerPort)
	}

	// The Secret: there (the rotator updates it, never creates it), the one the sidecar
	// rotates, mounted at its cert dir, optional.
	if _, ok := objs["Secret"][secret]; !ok {
		t.Errorf("--conversion-cert-secret=%s: config/default renders no such Secret (the rotator does not create it)", secret)
	}
	var mount *corev1.VolumeMount
	for i, m := range sidecar.VolumeMounts {
		if m.MountPath == certDir {
			mount = &sidecar.VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatalf("--conversion-cert-dir=%s: nothing is mounted there", certDir)
	}
	var volume *corev1.Volume
	for i, v := range deploy.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			volume = &deploy.Spec.Template.Spec.Volumes[i]
		}
	}
	switch {
	case volume == nil || volume.Secret == nil:
		t.Errorf("the cert dir's volume %s is not a Secret's", mount.Name)
	case volume.Secret.SecretName != secret:
		t.Errorf("the cert dir holds Secret %s, the sidecar rotates %s", volume.Secret.SecretName, secret)
	case volume.Secret.Optional == nil || !*volume.Secret.Optional:
		t.Errorf("the cert dir's Secret volume is not optional: a pod would wait for the rotator to fill it")
	}

	// A NetworkPolicy selecting the pods lets any source in on the conversion port.
	admitted := false
	for _, doc := range objs["NetworkPolicy"] {
		var np networkingv1.NetworkPolicy
		if err := yaml.UnmarshalStrict(doc, &np); err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(labels.Set(deploy.Spec.Template.Labels)) {
			continue
		}
		for _, rule := range np.Spec.Ingress {
			if len(rule.From) != 0 {
				continue
			}
			for _, p := range rule.Ports {
				if p.Port != nil && (p.Port.IntVal == containerPort || (p.Port.StrVal != "" && p.Port.StrVal == target.TargetPort.StrVal)) {
					admitted = true
				}
			}
		}
	}
	if len(objs["NetworkPolicy"]) != 0 && !admitted {
		t.Errorf("no NetworkPolicy admits the API server on the conversion port %d", containerPort)
	}
}
