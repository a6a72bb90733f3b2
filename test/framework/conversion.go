package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
)

// LocalConversion serves a sidecar's conversion webhook, run on the host, to the local
// cluster's API server, which runs on the same host and so reaches it at localhost: a
// certificate for localhost, signed by a CA of the test's own, in the cert dir the sidecar
// serves from, and a CRD whose webhook is https://localhost:<Port>/convert with that CA, as
// cert-manager's CA injection would set it. (In the pod the sidecar's own rotator makes the
// certificate, and the API server calls the webhook's Service.) The files are named as a
// kubernetes.io/tls Secret names them, as the sidecar reads them.
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
	ca, caKey := certificate(t, &x509.Certificate{Subject: pkix.Name{CommonName: "warpdrive-e2e-ca"}, IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}, nil, nil)
	serving, servingKey := certificate(t, &x509.Certificate{Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey)
	l.CABundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	keyDER, err := x509.MarshalECPrivateKey(servingKey)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serving.Raw}),
		corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(l.CertDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// certificate makes a certificate of template with a new key, signed by parent (nil: by
// itself), valid for a day.
func certificate(t testing.TB, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Minute)
	template.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// Flags are the sidecar's flags that serve the webhook from CertDir on Port, the
// certificate being another's (no --conversion-secret: not rotated by the sidecar).
func (l *LocalConversion) Flags() []string {
	return []string{"--conversion-webhook-port=" + strconv.Itoa(l.Port), "--conversion-cert-dir=" + l.CertDir}
}

// Point sets crd's conversion webhook, as crdgen generates it for the Service of the pod, to
// the host's sidecar.
func (l *LocalConversion) Point(crd *apiextensionsv1.CustomResourceDefinition) {
	url := "https://localhost:" + strconv.Itoa(l.Port) + crdgen.WebhookPath
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: l.CABundle}
}
