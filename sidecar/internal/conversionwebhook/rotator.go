package conversionwebhook

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The rotator keeps the CA and the serving certificate in a Secret of the operator's
// namespace, through a cache of that namespace's Secrets (cert-controller's own), and
// writes the CA into the caBundle of each served CRD, which it watches to put it back. It
// updates the Secret, never creates it.
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;update

// Rotation is what Rotate needs to make and keep the webhook's certificate.
type Rotation struct {
	// Secret holds the CA and the serving certificate. It must exist, empty at first
	// (config/default ships it): cert-controller writes the certificates into it with an
	// update, and stops the sidecar at start if it cannot read it. It must be mounted
	// (optional: the volume is empty until the rotator has written it) at CertDir in every
	// replica's sidecar.
	Secret  types.NamespacedName
	CertDir string
	// Service is the name of the webhook's Service in Secret's namespace; the certificate is
	// for its in-cluster DNS names, which the API server dials.
	Service string
	// CRDs are the names of the served kinds' CRDs of strategy Webhook (CRDNames), whose
	// caBundle gets the CA; none, the rotator only keeps the Secret's certificate.
	CRDs []string
	// LeaderElection is whether the sidecar elects a leader; see Rotate.
	LeaderElection bool
}

// Rotate adds to mgr cert-controller's rotator: it makes the Secret's CA (valid ten
// years) and serving certificate (one year), renews each well before it expires, and keeps
// the CA in each CRD's spec.conversion.webhook.clientConfig.caBundle.
//
// With leader election the rotator, its cache and its CA injection run on the leader only
// (RequireLeaderElection), so that replicas do not race to write two CAs; every replica
// serves from the Secret mounted at CertDir (Server). Without it, each replica runs them:
// run one replica then. On the replica that runs it, the rotator stops the process if the
// Secret does not reach CertDir, or the CA the CRDs, within its retries (about 17 minutes):
// the pod lacks the volume, or the sidecar the rights.
func Rotate(mgr manager.Manager, r Rotation) error {
	if r.Secret.Namespace == "" || r.Secret.Name == "" || r.Service == "" || r.CertDir == "" {
		return fmt.Errorf("conversion webhook certificate rotation needs a Secret, a Service and a cert dir (have %+v)", r)
	}
	webhooks := make([]rotator.WebhookInfo, 0, len(r.CRDs))
	for _, crd := range r.CRDs {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: crd, Type: rotator.CRDConversion})
	}
	return rotator.AddRotator(mgr, certRotator(r, webhooks))
}

// certRotator is the rotator of r, apart from the manager AddRotator gives it.
func certRotator(r Rotation, webhooks []rotator.WebhookInfo) *rotator.CertRotator {
	svc := r.Service + "." + r.Secret.Namespace + ".svc"
	return &rotator.CertRotator{
		SecretKey:             r.Secret,
		CertDir:               r.CertDir,
		CertName:              CertName,
		KeyName:               KeyName,
		CAName:                "warpdrive-conversion-webhook-ca",
		CAOrganization:        "warpdrive-operator",
		DNSName:               svc,
		ExtraDNSNames:         []string{svc + ".cluster.local", r.Service + "." + r.Secret.Namespace},
		ExtKeyUsages:          &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsReady:               make(chan struct{}), // closed by the rotator; it must not be nil
		Webhooks:              webhooks,
		FieldOwner:            "warpdrive-sidecar",
		RequireLeaderElection: r.LeaderElection,
		ControllerName:        "conversion-cert-rotator",
	}
}

// CRDNames returns the names of the CRDs of kinds, <plural>.<group> as mapper knows their
// resources, whose conversion strategy is Webhook, sorted: the CRDs the rotator keeps the CA
// in. Each CRD is read through r, live (the API reader: the manager's cache has not started).
//
// A kind is served once its chart has a conversions.yaml, but its CRD is of strategy None
// when the versions share one schema (crdgen), as for the kinds of watches.yaml: it has no
// clientConfig to hold a caBundle, and the API server refuses one there. Named to the
// rotator, such a CRD fails every injection (cert-controller: "`conversion.webhook.clientConfig`
// field not found"), so the rotator never reports the CA injected and, after its retries
// (17 minutes or more), stops the sidecar. With no CRD named, the rotator only keeps the
// Secret's certificate, and reports ready.
func CRDNames(ctx context.Context, r client.Reader, mapper meta.RESTMapper, kinds Kinds) ([]string, error) {
	names := make([]string, 0, len(kinds))
	for gk := range kinds {
		m, err := mapper.RESTMapping(gk)
		if err != nil {
			return nil, fmt.Errorf("CRD of %s: %w", gk, err)
		}
		name := m.Resource.Resource + "." + gk.Group
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := r.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return nil, fmt.Errorf("CRD of %s: %w", gk, err)
		}
		strategy, _, err := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
		if err != nil {
			return nil, fmt.Errorf("CRD %s: %w", name, err)
		}
		if strategy == string(apiextv1.WebhookConverter) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Where a pod finds its namespace: the variable config/manager/manager.yaml sets from the
// downward API, and the service account's mount, where controller-runtime looks too.
const (
	namespaceEnv  = "POD_NAMESPACE"
	namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// SecretKey is the Secret of the flag value s, <name> in the operator's namespace
// (POD_NAMESPACE, the in-cluster namespace, or fallback) or <namespace>/<name>.
func SecretKey(s, fallback string) (types.NamespacedName, error) {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: name}, nil
	}
	ns := os.Getenv(namespaceEnv)
	if ns == "" {
		if b, err := os.ReadFile(namespaceFile); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = fallback
	}
	if ns == "" {
		return types.NamespacedName{}, fmt.Errorf("out of a cluster, give the conversion webhook's Secret as <namespace>/<name> " +
			"or --leader-election-namespace")
	}
	return types.NamespacedName{Namespace: ns, Name: s}, nil
}
