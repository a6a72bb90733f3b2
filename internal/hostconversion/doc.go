// Package hostconversion serves the sidecar's CRD conversion webhook from a process on the
// host (make run, make demo, the e2e suite) to a cluster, through the same Service the
// API server calls in the pod's case, as crdgen writes it into each CRD
// (crdgen.WebhookServiceName in crdgen.WebhookServiceNamespace, port crdgen.WebhookPort):
//
//   - WriteCertificate makes a CA of its own and a serving certificate, signed by it, for the
//     Service's DNS names (ServiceDNSNames), in the cert dir the sidecar serves from
//     (--conversion-cert-dir), named as a kubernetes.io/tls Secret names its files;
//   - Register gives the cluster a Service without a selector and an EndpointSlice of it that
//     points at this host's first non-loopback IPv4 address (HostIPv4: an EndpointSlice
//     refuses loopback) and the sidecar's port (--conversion-webhook-port), and writes the CA
//     into spec.conversion.webhook.clientConfig.caBundle of each served kind's CRD whose
//     strategy is Webhook, leaving the Service reference crdgen wrote as it is.
//
// The API server reaches the Service at its endpoints when it routes to them
// (--enable-aggregator-routing=true, as hack/cluster-up.sh runs it). Unlike a CRD turned to a
// URL, nothing here has to be undone when the host's process is killed: the CRDs keep their
// Service, whose endpoint is the next run's.
//
// A cluster where the operator is deployed (its Deployment, DeploymentName, exists) is
// refused: the deployed sidecar's rotator owns the Service's certificate and the caBundle.
package hostconversion
