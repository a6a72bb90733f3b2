package conversionwebhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The files of a serving certificate in a cert directory, as a kubernetes.io/tls Secret
// mounted as a volume holds them: the rotator's Secret, or cert-manager's Certificate.
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
)

// certPoll is how often Server looks for the certificate files before it serves.
const certPoll = time.Second

// Server serves a Handler on a port over TLS from a cert dir's CertName and KeyName, which
// controller-runtime's certificate watcher reloads when they change: a rotated Secret
// reaches the mounted files within the kubelet's sync period, and no connection is dropped.
//
// It is controller-runtime's webhook server, so that the manager starts it before it waits
// for its caches: the sidecar's own informers list the kinds it serves, and a list of objects
// stored at another version waits for this webhook's conversions.
//
// It runs on every replica (NeedLeaderElection is false): the API server calls whichever
// pod its Service picks. It waits for the files before it serves, as the rotator of the
// leader creates the Secret after the pod started, and the kubelet then writes it into the
// (optional) volume; a replica that served without them could not start at all.
type Server struct {
	webhook.Server
	certDir string
	log     logr.Logger
}

// The manager tells a webhook server by its interface.
var _ webhook.Server = (*Server)(nil)

// NewServer is the Server of h on host (empty: every interface) and port, its certificate in
// certDir.
func NewServer(host string, port int, certDir string, h http.Handler, log logr.Logger) *Server {
	srv := webhook.NewServer(webhook.Options{
		Host:     host,
		Port:     port,
		CertDir:  certDir,
		CertName: CertName,
		KeyName:  KeyName,
		TLSOpts:  []func(*tls.Config){http1Only},
	})
	srv.Register(Path, h)
	return &Server{Server: srv, certDir: certDir, log: log}
}

// Start serves, once the certificate is there, until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	if err := s.waitForCert(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}
	return s.Server.Start(ctx)
}

// http1Only turns HTTP/2 off, which controller-runtime offers by default: its stream
// handling was the way in of the HTTP/2 Rapid Reset and CONTINUATION flood attacks, and the
// API server speaks HTTP/1.1 to webhooks just as well.
func http1Only(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = tls.VersionTLS12
}

// waitForCert returns once the cert dir holds both files, logging once while it waits.
func (s *Server) waitForCert(ctx context.Context) error {
	logged := false
	for {
		missing := ""
		for _, name := range []string{CertName, KeyName} {
			if _, err := os.Stat(filepath.Join(s.certDir, name)); errors.Is(err, os.ErrNotExist) {
				missing = name
			} else if err != nil {
				return fmt.Errorf("conversion webhook certificate: %w", err)
			}
		}
		if missing == "" {
			return nil
		}
		if !logged {
			s.log.Info("Waiting for the conversion webhook's certificate", "dir", s.certDir, "missing", missing)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(certPoll):
		}
	}
}
