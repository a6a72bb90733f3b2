package sidecar

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"transwarp.io/tos/warpdrive-operator/sidecar/internal/conversionwebhook"
)

// Conversion configures the CRD conversion webhook the sidecar serves, on every replica,
// for the kinds whose chart has a conversions.yaml (sidecar/internal/conversionwebhook).
// Port 0, the default, serves none: a kind with one version needs none.
type Conversion struct {
	// Port the webhook listens on; 0 serves none.
	Port int
	// CertDir holds tls.crt and tls.key: the mounted Secret of the rotator, or of a
	// cert-manager Certificate.
	CertDir string
	// Secret, <name> in the operator's namespace or <namespace>/<name>, is where the
	// sidecar's own rotator keeps the CA and certificate; empty, the certificate is
	// another's (cert-manager's, its CA injected by cert-manager) and is not rotated here.
	Secret string
	// Service is the webhook's Service in the Secret's namespace, whose DNS names the
	// rotator's certificate is for.
	Service string
}

// Validate reports flags that cannot serve the webhook.
func (c Conversion) Validate() error {
	switch {
	case c.Port == 0:
		return nil
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("--conversion-webhook-port=%d: a TCP port, or 0 to serve no conversion webhook", c.Port)
	case c.CertDir == "":
		return errors.New("--conversion-cert-dir: the conversion webhook needs the directory of its certificate")
	case c.Secret != "" && c.Service == "":
		return errors.New("--conversion-service-name: the rotated certificate is for the webhook's Service, which has no name")
	}
	return nil
}

// setupConversion adds to mgr the conversion webhook's server, and its certificate's
// rotator unless the certificate is another's. The rotator injects its CA into the CRDs of
// the served kinds whose strategy is Webhook, as the API server has them now: a kind whose
// CRD changes strategy is injected once the sidecar restarts, as it does when a new version
// of the operator is deployed with the CRD.
//
// watches.yaml's chart paths are relative to the working directory, as the helm-operator
// reads them (/opt/helm in the image).
func setupConversion(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	c := opts.Conversion
	log := ctrl.Log.WithName("conversion-webhook")
	kinds, err := conversionwebhook.LoadKinds(opts.Watches, ".")
	if err != nil {
		return err
	}
	server := conversionwebhook.NewServer("", c.Port, c.CertDir, &conversionwebhook.Handler{Kinds: kinds, Log: log}, log)
	if err := mgr.Add(server); err != nil {
		return fmt.Errorf("conversion webhook server: %w", err)
	}
	if c.Secret == "" {
		log.Info("Serving conversions with the certificate of the cert dir, rotated by another", "kinds", len(kinds), "port", c.Port, "certDir", c.CertDir)
		return nil
	}
	secret, err := conversionwebhook.SecretKey(c.Secret, opts.LeaderElectionNamespace)
	if err != nil {
		return err
	}
	crds, err := conversionwebhook.CRDNames(ctx, mgr.GetAPIReader(), mgr.GetRESTMapper(), kinds)
	if err != nil {
		return err
	}
	if err := conversionwebhook.Rotate(mgr, conversionwebhook.Rotation{
		Secret:         secret,
		CertDir:        c.CertDir,
		Service:        c.Service,
		CRDs:           crds,
		LeaderElection: opts.LeaderElection,
	}); err != nil {
		return fmt.Errorf("conversion webhook certificate rotation: %w", err)
	}
	log.Info("Serving conversions with a rotated certificate", "kinds", len(kinds), "port", c.Port, "secret", secret, "crds", crds)
	return nil
}
