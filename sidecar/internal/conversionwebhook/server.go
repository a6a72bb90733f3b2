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

// Server serves Handler on Port over TLS from CertDir's CertName and KeyName, which
// controller-runtime's certificate watcher reloads when they change: a rotated Secret
// reaches the mounted files within the kubelet's sync period, and no connection is dropped.
//
// It runs on every replica (NeedLeaderElection is false): the API server calls whichever
// pod its Service picks. It waits for the files before it serves, as the rotator of the
// leader creates the Secret after the pod started, and the kubelet then writes it into the
// (optional) volume; a replica that served without them could not start at all.
type Server struct {
	Host    string // empty: every interface
	Port    int
	CertDir string
	Handler http.Handler
	Log     logr.Logger
}

// NeedLeaderElection is false: every replica serves conversions.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	if err := s.waitForCert(ctx); err != nil {
		return err
	}
	srv := webhook.NewServer(webhook.Options{
		Host:     s.Host,
		Port:     s.Port,
		CertDir:  s.CertDir,
		CertName: CertName,
		KeyName:  KeyName,
		TLSOpts:  []func(*tls.Config){http1Only},
	})
	srv.Register(Path, s.Handler)
	return srv.Start(ctx)
}

// http1Only turns HTTP/2 off, which controller-runtime offers by default: its stream
// handling was the way in of the HTTP/2 Rapid Reset and CONTINUATION flood attacks, and the
// API server speaks HTTP/1.1 to webhooks just as well.
func http1Only(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
	c.MinVersion = tls.VersionTLS12
}

// waitForCert returns once CertDir holds both files, logging once while it waits.
func (s *Server) waitForCert(ctx context.Context) error {
	logged := false
	for {
		missing := ""
		for _, name := range []string{CertName, KeyName} {
			if _, err := os.Stat(filepath.Join(s.CertDir, name)); errors.Is(err, os.ErrNotExist) {
				missing = name
			} else if err != nil {
				return fmt.Errorf("conversion webhook certificate: %w", err)
			}
		}
		if missing == "" {
			return nil
		}
		if !logged {
			s.Log.Info("Waiting for the conversion webhook's certificate", "dir", s.CertDir, "missing", missing)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(certPoll):
		}
	}
}
