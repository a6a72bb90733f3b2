package sidecar

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

func TestConversionValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Conversion
		want string // in the error; empty: valid
	}{
		{"off by default", Conversion{}, ""},
		{"off, other flags ignored", Conversion{Secret: "s"}, ""},
		{"rotated", Conversion{Port: 9443, CertDir: "/certs", Secret: "conv-cert", Service: "conv"}, ""},
		{"cert-manager's", Conversion{Port: 9443, CertDir: "/certs"}, ""},
		{"negative port", Conversion{Port: -1, CertDir: "/certs"}, "--conversion-webhook-port=-1"},
		{"port too large", Conversion{Port: 70000, CertDir: "/certs"}, "--conversion-webhook-port=70000"},
		{"no cert dir", Conversion{Port: 9443}, "--conversion-cert-dir"},
		{"rotated without a Service", Conversion{Port: 9443, CertDir: "/certs", Secret: "conv-cert"}, "--conversion-service-name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// selfSigned writes into dir a certificate of 127.0.0.1 signed by its own key, as
// cert-manager would mount one, and returns the pool that trusts it.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "conversion webhook test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("tls.crt", "CERTIFICATE", der)
	write("tls.key", "PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// TestConversionWebhookServesFromTheCertDir sets the webhook up as `manager sidecar
// --conversion-webhook-port --conversion-cert-dir` does (cert-manager's certificate, no
// rotator, so no API server is needed), on a manager that elects a leader and is not
// leader, and converts a CR of a chart with a conversions.yaml over TLS.
func TestConversionWebhookServesFromTheCertDir(t *testing.T) {
	root := t.TempDir()
	chart := filepath.Join(root, "helm-charts", "memcached")
	if err := os.MkdirAll(chart, 0o755); err != nil {
		t.Fatal(err)
	}
	conversions := "- from: v1alpha1\n  to: v1beta1\n  moves: [{from: /replicaCount, to: /replicas}]\n"
	if err := os.WriteFile(filepath.Join(chart, "conversions.yaml"), []byte(conversions), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root) // watches.yaml's chart paths are relative to the working directory
	certDir := t.TempDir()
	roots := selfSigned(t, certDir)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	// Leader election on, against an API server that is not there: the webhook must serve
	// all the same, as on a replica that is not the leader.
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          true,
		LeaderElectionID:        "conversion-test",
		LeaderElectionNamespace: "ops",
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Watches:    []watchfile.Watch{{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached", Chart: "helm-charts/memcached"}},
		Conversion: Conversion{Port: port, CertDir: certDir},
	}
	if err := setupConversion(t.Context(), mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = mgr.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	review := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u1",` +
		`"desiredAPIVersion":"cache.example.com/v1beta1","objects":[{"apiVersion":"cache.example.com/v1alpha1",` +
		`"kind":"Memcached","metadata":{"name":"m"},"spec":{"replicaCount":3}}]}}`
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Post("https://127.0.0.1:"+strconv.Itoa(port)+"/convert", "application/json", strings.NewReader(review))
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), `"uid":"u1"`) || !strings.Contains(string(body), `"spec":{"replicas":3}`) {
				t.Fatalf("answer %s: want the CR converted, uid u1", body)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("conversion webhook not served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
