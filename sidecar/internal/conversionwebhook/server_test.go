package conversionwebhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// testRotation is the rotation of a Service "conv" in "ops".
var testRotation = Rotation{
	Secret:  types.NamespacedName{Namespace: "ops", Name: "conv-cert"},
	Service: "conv",
}

// rotatorCert writes into dir a CA and serving certificate made as the rotator makes
// them for testRotation (its Secret's tls.crt and tls.key, as mounted), and returns the CA.
func rotatorCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	cr := certRotator(testRotation, nil)
	now := time.Now()
	ca, err := cr.CreateCACert(now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := cr.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// Each file is replaced whole, as the kubelet replaces a mounted Secret's files.
	for name, data := range map[string][]byte{CertName: cert, KeyName: key} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// freePort is a TCP port of 127.0.0.1 no one listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startServer runs a Server of dir on a free port until the test ends, and returns its
// address.
func startServer(t *testing.T, dir string) string {
	t.Helper()
	port := freePort(t)
	srv := NewServer("127.0.0.1", port, dir, testHandler(t), logr.Discard())
	if srv.NeedLeaderElection() {
		t.Error("the conversion webhook would serve on the leader only")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// convertOver posts a one-object review to addr over TLS, trusting roots for the Service's
// name as the API server dials it, and returns the response's uid and the certificate served.
func convertOver(addr string, roots *x509.CertPool) (types.UID, *x509.Certificate, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:    roots,
		ServerName: "conv.ops.svc",
	}}}
	defer client.CloseIdleConnections()
	review := apiextensionsv1.ConversionReview{Request: &apiextensionsv1.ConversionRequest{
		UID:               "tls-uid",
		DesiredAPIVersion: "cache.example.com/v1beta1",
		Objects:           []runtime.RawExtension{{Raw: []byte(`{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","spec":{"replicaCount":2}}`)}},
	}}
	body, _ := json.Marshal(review)
	resp, err := client.Post("https://"+addr+Path, "application/json", bytes.NewReader(body))
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", nil, errors.New(resp.Status + ": " + string(data))
	}
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		return "", nil, errors.New("not a review: " + string(data))
	}
	return out.Response.UID, resp.TLS.PeerCertificates[0], nil
}

// eventually retries f for up to 20 s, the certificate watcher's reload included.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestServesWithTheRotatorsCertificateOnceMountedAndReloadsIt(t *testing.T) {
	dir := t.TempDir()
	addr := startServer(t, dir) // before the Secret is mounted, as on a new pod

	time.Sleep(3 * certPoll / 2)
	if _, _, err := convertOver(addr, x509.NewCertPool()); err == nil {
		t.Fatal("served without a certificate")
	}

	first := rotatorCert(t, dir)
	var served *x509.Certificate
	eventually(t, "serving with the mounted certificate", func() error {
		uid, cert, err := convertOver(addr, first)
		if err == nil && uid != "tls-uid" {
			err = errors.New("response uid " + string(uid))
		}
		served = cert
		return err
	})

	// The rotator renews the Secret; the kubelet updates the files; new connections get
	// the new certificate, trusted by the new CA only.
	second := rotatorCert(t, dir)
	eventually(t, "serving with the renewed certificate", func() error {
		_, cert, err := convertOver(addr, second)
		if err == nil && cert.Equal(served) {
			err = errors.New("still the first certificate")
		}
		return err
	})
}

func TestCertDirOfCertManager(t *testing.T) {
	// cert-manager's Certificate mounted: tls.crt and tls.key of a self-made CA.
	dir := t.TempDir()
	roots := rotatorCert(t, dir)
	addr := startServer(t, dir)
	eventually(t, "serving from the cert dir", func() error {
		_, _, err := convertOver(addr, roots)
		return err
	})
	if _, _, err := convertOver(addr, x509.NewCertPool()); err == nil {
		t.Error("a client that does not trust the CA was served")
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "conv.ops.svc", NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1 (HTTP/2 off)", p)
	}
}

func TestRotatorCertificateIsForTheService(t *testing.T) {
	cr := certRotator(testRotation, []rotator.WebhookInfo{{Name: "memcacheds.cache.example.com", Type: rotator.CRDConversion}})
	if cr.RequireLeaderElection != testRotation.LeaderElection {
		t.Error("RequireLeaderElection is not the sidecar's leader election")
	}
	if cr.DNSName != "conv.ops.svc" || cr.SecretKey != testRotation.Secret || cr.IsReady == nil {
		t.Errorf("rotator %+v: want DNS name conv.ops.svc, Secret ops/conv-cert and a ready channel", cr)
	}
	lead := testRotation
	lead.LeaderElection = true
	if !certRotator(lead, nil).RequireLeaderElection {
		t.Error("with leader election, every replica would write the Secret and the CRDs")
	}
}
