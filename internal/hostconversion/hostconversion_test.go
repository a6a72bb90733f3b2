package hostconversion

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
)

// The serving certificate is for the Service's names, signed by the CA the CRDs get, and the
// sidecar can load the pair from the directory.
func TestCertificateIsForTheServicesNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	names := ServiceDNSNames(crdgen.WebhookServiceName, crdgen.WebhookServiceNamespace)
	if want := []string{"warpdrive-operator-webhook-service.warpdrive-operator-system.svc",
		"warpdrive-operator-webhook-service.warpdrive-operator-system.svc.cluster.local"}; !slices.Equal(names, want) {
		t.Fatalf("ServiceDNSNames = %v, want %v", names, want)
	}
	caBundle, err := WriteCertificate(dir, names)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, corev1.TLSCertKey), filepath.Join(dir, corev1.TLSPrivateKeyKey))
	if err != nil {
		t.Fatalf("the sidecar cannot load the pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		t.Fatal("the caBundle holds no certificate")
	}
	for _, name := range names {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots}); err != nil {
			t.Errorf("the certificate does not verify for %s with the caBundle: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: roots}); err == nil {
		t.Error("the certificate verifies for localhost, a name it was not made for")
	}
	if fi, err := os.Stat(filepath.Join(dir, corev1.TLSPrivateKeyKey)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
}

func TestEndpointSliceOfTheService(t *testing.T) {
	ip := net.IPv4(192, 0, 2, 7)
	s, err := EndpointSlice("svc", "ns", ip, 9443)
	if err != nil {
		t.Fatal(err)
	}
	if s.APIVersion != "discovery.k8s.io/v1" || s.Kind != "EndpointSlice" || s.Namespace != "ns" ||
		s.Labels[discoveryv1.LabelServiceName] != "svc" || s.Labels[discoveryv1.LabelManagedBy] == "endpointslice-controller.k8s.io" {
		t.Errorf("EndpointSlice %s %s/%s labels %v: want discovery.k8s.io/v1 in ns, of Service svc, not the controller's",
			s.APIVersion, s.Namespace, s.Name, s.Labels)
	}
	if s.AddressType != discoveryv1.AddressTypeIPv4 || len(s.Endpoints) != 1 ||
		!slices.Equal(s.Endpoints[0].Addresses, []string{"192.0.2.7"}) || s.Endpoints[0].Conditions.Ready == nil || !*s.Endpoints[0].Conditions.Ready {
		t.Errorf("endpoints %+v, want one ready at 192.0.2.7", s.Endpoints)
	}
	svc := Service("svc", "ns", 9443)
	if svc.Spec.Selector != nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != crdgen.WebhookPort ||
		svc.Spec.Ports[0].TargetPort.IntValue() != 9443 {
		t.Errorf("Service spec %+v, want no selector, port %d to 9443", svc.Spec, crdgen.WebhookPort)
	}
	// The slice's port is matched to the Service's by name.
	if len(s.Ports) != 1 || *s.Ports[0].Port != 9443 || *s.Ports[0].Name != svc.Spec.Ports[0].Name || *s.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want TCP 9443 named as the Service's port", s.Ports)
	}
}

func TestRefusesLoopback(t *testing.T) {
	for _, ip := range []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 1, 2, 3), net.IPv4zero, net.IPv4(169, 254, 1, 1), net.ParseIP("::1"), net.ParseIP("2001:db8::1")} {
		if _, err := EndpointSlice("svc", "ns", ip, 9443); err == nil {
			t.Errorf("EndpointSlice at %v: no error", ip)
		}
	}
	if _, err := EndpointSlice("svc", "ns", net.IPv4(192, 0, 2, 7), 0); err == nil {
		t.Error("EndpointSlice at port 0: no error")
	}
	lo := &net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(8, 32)}
	v6 := &net.IPNet{IP: net.ParseIP("2001:db8::1"), Mask: net.CIDRMask(64, 128)}
	eth := &net.IPNet{IP: net.IPv4(10, 1, 2, 3), Mask: net.CIDRMask(24, 32)}
	if ip, err := firstIPv4([]net.Addr{lo, v6, eth}); err != nil || !ip.Equal(eth.IP) {
		t.Errorf("firstIPv4 = %v, %v; want %v", ip, err, eth.IP)
	}
	if ip, err := firstIPv4([]net.Addr{lo, v6}); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("firstIPv4 of loopback and IPv6 alone = %v, %v; want an error", ip, err)
	}
}

func crd(group, kind string, strategy apiextensionsv1.ConversionStrategyType) *apiextensionsv1.CustomResourceDefinition {
	c := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind) + "s." + group}}
	c.Spec.Group, c.Spec.Names.Kind = group, kind
	c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: strategy}
	if strategy == apiextensionsv1.WebhookConverter {
		port := int32(crdgen.WebhookPort)
		c.Spec.Conversion.Webhook = &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{
			Service: &apiextensionsv1.ServiceReference{Name: crdgen.WebhookServiceName, Namespace: crdgen.WebhookServiceNamespace, Port: &port}}}
	}
	return c
}

func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

// Register injects the CA into the served kinds' CRDs of strategy Webhook alone, the Service
// reference left as crdgen wrote it.
func TestRegisterInjectsTheServedWebhookCRDs(t *testing.T) {
	ctx := context.Background()
	served := crd("a.example.com", "Served", apiextensionsv1.WebhookConverter)
	none := crd("a.example.com", "SameSchema", apiextensionsv1.NoneConverter)
	other := crd("b.example.com", "NotServed", apiextensionsv1.WebhookConverter)
	c := fakeClient(t, served, none, other)
	crds, err := injectCABundle(ctx, c, []schema.GroupKind{{Group: "a.example.com", Kind: "Served"}, {Group: "a.example.com", Kind: "SameSchema"}}, []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crds, []string{served.Name}) {
		t.Errorf("injected %v, want [%s]", crds, served.Name)
	}
	for _, want := range []struct {
		crd *apiextensionsv1.CustomResourceDefinition
		ca  string
	}{{served, "CA"}, {other, ""}} {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(want.crd), live); err != nil {
			t.Fatal(err)
		}
		cc := live.Spec.Conversion.Webhook.ClientConfig
		if string(cc.CABundle) != want.ca || cc.URL != nil || cc.Service == nil || cc.Service.Name != crdgen.WebhookServiceName {
			t.Errorf("%s: clientConfig %+v, want caBundle %q and crdgen's Service", live.Name, cc, want.ca)
		}
	}
}

func TestRegisterRefusesADeployedOperator(t *testing.T) {
	deployed := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: DeploymentName, Namespace: crdgen.WebhookServiceNamespace}}
	_, err := Register(context.Background(), fakeClient(t, deployed), Target{IP: net.IPv4(192, 0, 2, 7), Port: 9443})
	if err == nil || !strings.Contains(err.Error(), "deployed") {
		t.Errorf("Register with the operator deployed: %v, want a refusal", err)
	}
}
