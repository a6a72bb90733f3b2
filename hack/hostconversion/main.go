// Command hostconversion readies $KUBECONFIG's cluster for the conversion webhook of make
// run's sidecar, which serves it from the host (internal/hostconversion): it writes a new
// serving certificate for the webhook Service's DNS names into -cert-dir, points the Service,
// through an EndpointSlice, at this host's first non-loopback IPv4 address and -port, and
// writes the certificate's CA into the caBundle of the served kinds' CRDs whose strategy is
// Webhook. Then it prints, one a line, the sidecar's flags that serve the webhook
// (--conversion-webhook-port, --conversion-cert-dir), which hack/run.sh adds to the pod's.
// It refuses a cluster where the operator is deployed, whose sidecar serves the webhook (make
// run's waits as a standby): it says so and prints no flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/hostconversion"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

func main() {
	var (
		watches, certDir string
		port             int
	)
	flag.StringVar(&watches, "watches-file", "watches.yaml", "The watches file of the host's sidecar; its chart paths are relative to the working directory.")
	flag.StringVar(&certDir, "cert-dir", "", "Where to write tls.crt and tls.key, the sidecar's --conversion-cert-dir.")
	flag.IntVar(&port, "port", 0, "The port the sidecar serves the webhook on, its --conversion-webhook-port.")
	flag.Parse()
	if err := run(watches, certDir, port); err != nil {
		fmt.Fprintln(os.Stderr, "hostconversion:", err)
		if errors.Is(err, hostconversion.ErrDeployed) {
			return // no flags: the sidecar serves no webhook
		}
		os.Exit(1)
	}
}

func run(watchesFile, certDir string, port int) error {
	if certDir == "" || port <= 0 {
		return fmt.Errorf("-cert-dir and -port are required")
	}
	w, err := watchfile.Load(watchesFile)
	if err != nil {
		return err
	}
	kinds, err := hostconversion.ServedKinds(w, ".")
	if err != nil {
		return err
	}
	ip, err := hostconversion.HostIPv4()
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	caBundle, err := hostconversion.WriteCertificate(certDir,
		hostconversion.ServiceDNSNames(crdgen.WebhookServiceName, crdgen.WebhookServiceNamespace))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crds, err := hostconversion.Register(ctx, c, hostconversion.Target{IP: ip, Port: port, CABundle: caBundle, Kinds: kinds})
	if err != nil {
		return err
	}
	fmt.Printf("--conversion-webhook-port=%d\n--conversion-cert-dir=%s\n", port, certDir)
	fmt.Fprintf(os.Stderr, "hostconversion: Service %s/%s -> %s:%d; caBundle written into %d CRD(s) %v\n",
		crdgen.WebhookServiceNamespace, crdgen.WebhookServiceName, ip, port, len(crds), crds)
	return nil
}
