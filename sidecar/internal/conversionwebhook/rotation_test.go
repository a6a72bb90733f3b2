package conversionwebhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// secretVolume writes a Secret's files into a directory as the kubelet does for a mounted
// Secret (its AtomicWriter): each version in a directory of its own, "..data" a symlink to
// the current one, swapped by a rename, and tls.crt and tls.key symlinks through "..data";
// so a reader sees the old pair or the new one, never half of each.
type secretVolume struct {
	dir string
	n   int
	cur string
}

// write makes cert and key the volume's files, removing the previous version's directory.
func (v *secretVolume) write(t *testing.T, cert, key []byte) {
	t.Helper()
	v.n++
	ts := fmt.Sprintf("..version_%d", v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{CertName: cert, KeyName: key} {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CertName, KeyName} {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v.cur != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, v.cur)); err != nil {
			t.Fatal(err)
		}
	}
	v.cur = ts
}

// newCA is a CA as the rotator makes it for testRotation.
func newCA(t *testing.T) *rotator.KeyPairArtifacts {
	t.Helper()
	now := time.Now()
	ca, err := certRotator(testRotation, nil).CreateCACert(now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// renew writes into v a new serving certificate of ca, as the rotator renews it, and
// returns it.
func renew(t *testing.T, v *secretVolume, ca *rotator.KeyPairArtifacts) *x509.Certificate {
	t.Helper()
	now := time.Now()
	certPEM, keyPEM, err := certRotator(testRotation, nil).CreateCertPEM(ca, now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	v.write(t, certPEM, keyPEM)
	return cert
}

// caBundle is a pool of the CAs, as the API server holds a CRD's caBundle.
func caBundle(cas ...*rotator.KeyPairArtifacts) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	return pool
}

// trustingClient is an HTTPS client of the webhook's Service name that verifies each new
// connection against the caBundle bundle holds at the time it dials. keepAlive false, every
// request is a new connection and handshake.
func trustingClient(bundle *atomic.Pointer[x509.CertPool], keepAlive bool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: !keepAlive,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			d := &tls.Dialer{Config: &tls.Config{
				RootCAs:    bundle.Load(),
				ServerName: "conv.ops.svc",
				MinVersion: tls.VersionTLS12,
			}}
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// served is the certificate a new connection to addr is served, verified against roots.
func served(addr string, roots *x509.CertPool) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "conv.ops.svc", MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// loadReview is the review of goroutine g's i-th request: two Memcacheds of v1alpha1 whose
// conversion to v1beta1 moves replicaCount and keeps legacyPort in the annotation.
func loadReview(g, i int) ([]byte, types.UID) {
	uid := types.UID(fmt.Sprintf("load-%d-%d", g, i))
	review := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request: &apiextensionsv1.ConversionRequest{
			UID:               uid,
			DesiredAPIVersion: "cache.example.com/v1beta1",
			Objects: []runtime.RawExtension{
				{Raw: marshal(cr("v1alpha1", "a"+strconv.Itoa(g), map[string]any{"replicaCount": g, "legacyPort": 7000 + g}))},
				{Raw: marshal(cr("v1alpha1", "b"+strconv.Itoa(g), map[string]any{"replicaCount": g + 100, "image": "memcached"}))},
			},
		},
	}
	return marshal(review), uid
}

// marshal is v in JSON; the test's values always encode.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// convertLoad posts body with c and returns the converted objects, decoded, of a response
// of uid.
func convertLoad(c *http.Client, url string, body []byte, uid types.UID) ([]map[string]any, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, data)
	}
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("not a review: %s", data)
	}
	if out.Response.UID != uid {
		return nil, fmt.Errorf("response uid %q, want %q", out.Response.UID, uid)
	}
	if out.Response.Result.Status != metav1.StatusSuccess {
		return nil, fmt.Errorf("review failed: %s", out.Response.Result.Message)
	}
	objs := make([]map[string]any, len(out.Response.ConvertedObjects))
	for i, raw := range out.Response.ConvertedObjects {
		if err := json.Unmarshal(raw.Raw, &objs[i]); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// TestCertificateRotationUnderLoad renews the serving certificate in the cert dir several
// times, as the rotator renews its Secret and the kubelet updates the mounted files, the
// CA once too, while goroutines send reviews continuously, some on kept-alive connections
// and some on a new connection each. Every review must succeed with the conversion the
// handler makes in process, and after each renewal new connections must be served the new
// certificate. For the new CA, the clients trust both CAs (the caBundle the API server holds
// during the hand-over) until the new certificate is served, and then the new CA alone.
func TestCertificateRotationUnderLoad(t *testing.T) {
	const goroutines = 8
	h := testHandler(t)

	vol := &secretVolume{dir: t.TempDir()}
	oldCA := newCA(t)
	cert := renew(t, vol, oldCA)
	addr := startServer(t, vol.dir)
	var bundle atomic.Pointer[x509.CertPool]
	bundle.Store(caBundle(oldCA))
	eventually(t, "serving from the cert dir", func() error {
		_, err := served(addr, bundle.Load())
		return err
	})

	// What each goroutine's review converts to, by the handler in process.
	want := make([][]map[string]any, goroutines)
	for g := range goroutines {
		body, uid := loadReview(g, 0)
		var review apiextensionsv1.ConversionReview
		if err := json.Unmarshal(body, &review); err != nil {
			t.Fatal(err)
		}
		raw := make([][]byte, len(review.Request.Objects))
		for i, o := range review.Request.Objects {
			raw[i] = o.Raw
		}
		want[g] = objects(t, post(t, h, uid, review.Request.DesiredAPIVersion, raw...))
		if want[g][0]["spec"].(map[string]any)["replicas"] != float64(g) {
			t.Fatalf("in process, goroutine %d's review converted to %v", g, want[g][0])
		}
	}

	var (
		ok, failed atomic.Int64
		mu         sync.Mutex
		failures   []string
		wg         sync.WaitGroup
	)
	stop := make(chan struct{})
	url := "https://" + addr + Path
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := trustingClient(&bundle, g%2 == 0)
			defer c.CloseIdleConnections()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body, uid := loadReview(g, i)
				got, err := convertLoad(c, url, body, uid)
				if err == nil {
					if diff := cmp.Diff(want[g], got); diff != "" {
						err = errors.New("converted otherwise than in process (-want +got):\n" + diff)
					}
				}
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if len(failures) < 10 {
						failures = append(failures, fmt.Sprintf("goroutine %d, review %d: %v", g, i, err))
					}
					mu.Unlock()
					continue
				}
				ok.Add(1)
			}
		}()
	}
	// underLoad waits until the goroutines have made n more successful reviews.
	underLoad := func(what string, n int64) {
		t.Helper()
		from := ok.Load()
		eventually(t, what, func() error {
			if got := ok.Load() - from; got < n {
				return fmt.Errorf("%d reviews so far", got)
			}
			return nil
		})
	}
	// servedNew waits until a new connection trusting roots is served next.
	servedNew := func(what string, next *x509.Certificate, roots *x509.CertPool) {
		t.Helper()
		eventually(t, what, func() error {
			got, err := served(addr, roots)
			if err == nil && !got.Equal(next) {
				err = errors.New("still an earlier certificate")
			}
			return err
		})
	}

	underLoad("reviews before the first renewal", 100)
	for i := range 3 {
		next := renew(t, vol, oldCA)
		if next.Equal(cert) {
			t.Fatal("the renewed certificate is the old one")
		}
		servedNew(fmt.Sprintf("serving renewal %d", i+1), next, bundle.Load())
		cert = next
		underLoad(fmt.Sprintf("reviews after renewal %d", i+1), 100)
	}

	// A new CA: the caBundle gets it beside the old one first, then the certificate changes,
	// then the old CA leaves the caBundle.
	newCA := newCA(t)
	bundle.Store(caBundle(oldCA, newCA))
	underLoad("reviews trusting both CAs", 100)
	next := renew(t, vol, newCA)
	servedNew("serving the new CA's certificate", next, caBundle(newCA))
	if _, err := served(addr, caBundle(oldCA)); err == nil {
		t.Error("a new connection trusting the old CA alone was served")
	}
	bundle.Store(caBundle(newCA))
	cert = next
	underLoad("reviews trusting the new CA alone", 100)
	for i := range 2 {
		next := renew(t, vol, newCA)
		servedNew(fmt.Sprintf("serving the new CA's renewal %d", i+1), next, bundle.Load())
		cert = next
		underLoad(fmt.Sprintf("reviews after the new CA's renewal %d", i+1), 100)
	}

	close(stop)
	wg.Wait()
	t.Logf("%d reviews converted, %d failed", ok.Load(), failed.Load())
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d reviews failed; the first:\n%s", n, n+ok.Load(), failures)
	}
	if got, err := served(addr, caBundle(newCA)); err != nil || !got.Equal(cert) {
		t.Errorf("finally served %v (%v), want the last renewal", got, err)
	}
}
