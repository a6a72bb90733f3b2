package framework

import (
	"context"
	"net"
	"strconv"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/hostconversion"
)

// LocalConversion serves a sidecar's conversion webhook, run on the host, to the local
// cluster's API server: a certificate, signed by a CA of the test's own, in the cert dir the
// sidecar serves from, named as a kubernetes.io/tls Secret names its files, as the sidecar
// reads them. (In the pod the sidecar's own rotator makes the certificate.)
//
// The certificate is for the webhook Service's DNS names and for localhost, so that a test
// reaches the sidecar either way:
//   - Register, as make run does (internal/hostconversion): the Service crdgen writes into
//     the CRDs, pointed by an EndpointSlice at this host and Port, and the CA in the CRDs'
//     caBundle;
//   - Point: a CRD whose webhook is https://localhost:<Port>/convert with that CA, as
//     cert-manager's CA injection would set it.
type LocalConversion struct {
	Port     int
	CertDir  string
	CABundle []byte // PEM
}

// NewLocalConversion makes the certificate in a temporary directory of t and picks a port.
func NewLocalConversion(t testing.TB) *LocalConversion {
	t.Helper()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	l := &LocalConversion{CertDir: t.TempDir()}
	if l.Port, err = strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	names := append(hostconversion.ServiceDNSNames(crdgen.WebhookServiceName, crdgen.WebhookServiceNamespace), "localhost")
	if l.CABundle, err = hostconversion.WriteCertificate(l.CertDir, names); err != nil {
		t.Fatal(err)
	}
	return l
}

// Flags are the sidecar's flags that serve the webhook from CertDir on Port, the
// certificate being another's (no --conversion-secret: not rotated by the sidecar).
func (l *LocalConversion) Flags() []string {
	return []string{"--conversion-webhook-port=" + strconv.Itoa(l.Port), "--conversion-cert-dir=" + l.CertDir}
}

// Register does what make run does before its sidecar starts (hack/hostconversion): the
// webhook's Service and an EndpointSlice at this host's first non-loopback IPv4 address and
// Port, and the CA in the caBundle of the CRDs of kinds whose strategy is Webhook, whose
// names it returns. The Service is the cluster's one: a make run against the same cluster
// is served by the last to register.
func (l *LocalConversion) Register(ctx context.Context, c client.Client, kinds ...schema.GroupKind) ([]string, error) {
	ip, err := hostconversion.HostIPv4()
	if err != nil {
		return nil, err
	}
	return hostconversion.Register(ctx, c, hostconversion.Target{IP: ip, Port: l.Port, CABundle: l.CABundle, Kinds: kinds})
}

// Point sets crd's conversion webhook, as crdgen generates it for the Service of the pod, to
// the host's sidecar at localhost.
func (l *LocalConversion) Point(crd *apiextensionsv1.CustomResourceDefinition) {
	url := "https://localhost:" + strconv.Itoa(l.Port) + crdgen.WebhookPath
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: l.CABundle}
}
