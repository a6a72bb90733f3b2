package hostconversion

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// DeploymentName is the operator's Deployment once config/default's namePrefix is applied,
// in crdgen.WebhookServiceNamespace: where it exists, the operator is deployed.
const DeploymentName = "warpdrive-operator-controller-manager"

// ErrDeployed is Register's refusal of a cluster where the operator is deployed.
var ErrDeployed = errors.New("the operator is deployed in this cluster")

// FieldOwner is the field manager of what Register applies.
const FieldOwner = "warpdrive-host-conversion"

// ManagedBy is the EndpointSlice's endpointslice.kubernetes.io/managed-by: not the
// EndpointSlice controller's (the Service has no selector, which it would follow).
const ManagedBy = "warpdrive-operator-host-conversion"

// validity of the certificates WriteCertificate makes; each run makes new ones.
const validity = 30 * 24 * time.Hour

// ServiceDNSNames are the names under which the API server calls the Service: it verifies
// the serving certificate for <service>.<namespace>.svc.
func ServiceDNSNames(service, namespace string) []string {
	return []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// WriteCertificate makes a CA and a serving certificate for dnsNames signed by it, writes the
// certificate and its key into dir as tls.crt and tls.key (created if missing), and returns
// the CA in PEM, the caBundle of the CRDs.
func WriteCertificate(dir string, dnsNames []string) (caBundle []byte, err error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("a serving certificate needs a DNS name")
	}
	ca, caKey, err := certificate(&x509.Certificate{Subject: pkix.Name{CommonName: "warpdrive-host-conversion-ca"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}, nil, nil)
	if err != nil {
		return nil, err
	}
	serving, key, err := certificate(&x509.Certificate{Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The key first: the sidecar reloads the pair when the certificate changes.
	files := []struct {
		name string
		data []byte
	}{
		{corev1.TLSPrivateKeyKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
		{corev1.TLSCertKey, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serving.Raw})},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), nil
}

// certificate makes a certificate of template with a new key, signed by parent (nil: by
// itself).
func certificate(template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Minute)
	template.NotAfter = time.Now().Add(validity)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// HostIPv4 is the first non-loopback IPv4 address of the host's interfaces, where the API
// server, on this host or another that routes to it, reaches the sidecar.
func HostIPv4() (net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	return firstIPv4(addrs)
}

// firstIPv4 is the first non-loopback IPv4 address of addrs.
func firstIPv4(addrs []net.Addr) (net.IP, error) {
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip := n.IP.To4(); ip != nil && !ip.IsLoopback() && !ip.IsUnspecified() && !ip.IsLinkLocalUnicast() {
			return ip, nil
		}
	}
	return nil, errors.New("the host has no non-loopback IPv4 address for the webhook's EndpointSlice (the API server refuses loopback endpoints)")
}

// Service is the webhook's Service without a selector: its endpoints are the EndpointSlice's.
// Its port is the one crdgen writes into the CRDs, forwarded to the host's port.
func Service(name, namespace string, port int) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: crdgen.WebhookPort, TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
}

// EndpointSlice is the Service's one endpoint, ip:port. The API server refuses a loopback
// endpoint, so does EndpointSlice: an unusable address is an error here.
func EndpointSlice(service, namespace string, ip net.IP, port int) (*discoveryv1.EndpointSlice, error) {
	ip4 := ip.To4()
	switch {
	case ip4 == nil:
		return nil, fmt.Errorf("endpoint %v: not an IPv4 address", ip)
	case ip4.IsLoopback() || ip4.IsUnspecified() || ip4.IsLinkLocalUnicast():
		return nil, fmt.Errorf("endpoint %v: an EndpointSlice refuses a loopback, unspecified or link-local address", ip4)
	case port <= 0 || port > 65535:
		return nil, fmt.Errorf("endpoint port %d: not a TCP port", port)
	}
	return &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: namespace, Labels: map[string]string{
			discoveryv1.LabelServiceName: service,
			discoveryv1.LabelManagedBy:   ManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip4.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr(""), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(port))}},
	}, nil
}

func ptr[T any](v T) *T { return &v }

// ServedKinds are the watched kinds whose chart has a conversions.yaml, the kinds the
// sidecar serves (as sidecar/internal/conversionwebhook's LoadKinds finds them; that one
// also validates the files, and fails the sidecar's start on a bad one). Chart paths are
// relative to root.
func ServedKinds(watches []watchfile.Watch, root string) ([]schema.GroupKind, error) {
	var kinds []schema.GroupKind
	for _, w := range watches {
		dir := w.Chart
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		_, err := os.Stat(filepath.Join(dir, conversion.FileName))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, w.GroupVersionKind().GroupKind())
	}
	return kinds, nil
}

// Target is where Register points the cluster.
type Target struct {
	// Service and Namespace of the webhook; empty, crdgen's.
	Service, Namespace string
	// IP and Port where the host's sidecar serves the webhook.
	IP   net.IP
	Port int
	// CABundle is the CA of the serving certificate (WriteCertificate's), in PEM.
	CABundle []byte
	// Kinds whose CRD gets the CABundle, where its strategy is Webhook.
	Kinds []schema.GroupKind
}

// Register refuses a cluster where the operator is deployed; otherwise it creates the
// namespace if missing, applies the Service and its EndpointSlice, and writes the CA into the
// caBundle of each CRD of t.Kinds whose conversion strategy is Webhook, whose names it
// returns, sorted. A kind without a CRD is skipped: make install has not run yet.
func Register(ctx context.Context, c client.Client, t Target) ([]string, error) {
	if t.Service == "" {
		t.Service = crdgen.WebhookServiceName
	}
	if t.Namespace == "" {
		t.Namespace = crdgen.WebhookServiceNamespace
	}
	slice, err := EndpointSlice(t.Service, t.Namespace, t.IP, t.Port)
	if err != nil {
		return nil, err
	}
	err = c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: DeploymentName}, &appsv1.Deployment{})
	switch {
	case err == nil:
		return nil, fmt.Errorf("%w (Deployment %s/%s): its sidecar serves the conversion webhook "+
			"and rotates its certificate and the CRDs' caBundle; the host's sidecar serves none (make undeploy removes the operator)",
			ErrDeployed, t.Namespace, DeploymentName)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("looking for the deployed operator: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("namespace %s: %w", t.Namespace, err)
	}
	for _, obj := range []client.Object{Service(t.Service, t.Namespace, t.Port), slice} {
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, t.Namespace, obj.GetName(), err)
		}
	}
	return injectCABundle(ctx, c, t.Kinds, t.CABundle)
}

// injectCABundle writes caBundle into the CRDs of kinds whose strategy is Webhook.
func injectCABundle(ctx context.Context, c client.Client, kinds []schema.GroupKind, caBundle []byte) ([]string, error) {
	if len(kinds) == 0 {
		return nil, nil
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(ctx, &crds); err != nil {
		return nil, fmt.Errorf("listing the CRDs: %w", err)
	}
	var names []string
	for i := range crds.Items {
		crd := &crds.Items[i]
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		conv := crd.Spec.Conversion
		if !slices.Contains(kinds, gk) || conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter ||
			conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
			continue
		}
		patch := client.MergeFrom(crd.DeepCopy())
		conv.Webhook.ClientConfig.CABundle = caBundle
		if err := c.Patch(ctx, crd, patch); err != nil {
			return nil, fmt.Errorf("caBundle of CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	slices.Sort(names)
	return names, nil
}
