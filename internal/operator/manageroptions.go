package operator

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"transwarp.io/tos/warpdrive-operator/internal/operator/informers"
	"transwarp.io/tos/warpdrive-operator/internal/operator/values"
	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
)

// CacheOptions is the manager's cache (informers.CacheOptions): what the reconcilers read,
// and no more. A CR whose spec holds more than maxSpecValues values is kept without its spec
// (values.BoundSpec); 0 keeps every spec.
func CacheOptions(maxSpecValues int) cache.Options {
	return informers.CacheOptions(func(obj any) { values.BoundSpec(obj, maxSpecValues) })
}

// DefaultSigningKeyName is the Secret, in the operator's namespace, of the key that signs
// release records (internal/releasesign).
const DefaultSigningKeyName = "warpdrive-operator-release-signing-key"

// SigningKeySecret locates the signing key's Secret: flag is <name> or <namespace>/<name>; a
// bare name is in the operator's own namespace, which namespace editors cannot read.
func SigningKeySecret(flag, leaderElectionNamespace string) (types.NamespacedName, error) {
	if ns, name, ok := strings.Cut(flag, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: name}, nil
	}
	ns := os.Getenv(podidentity.NamespaceEnv)
	if ns == "" {
		if b, err := os.ReadFile(podidentity.NamespaceFile); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		ns = leaderElectionNamespace
	}
	if ns == "" {
		return types.NamespacedName{}, fmt.Errorf("out of a cluster, give --release-signing-key=<namespace>/<name> " +
			"or --leader-election-namespace: the key must live in a namespace only the operator's admins can read")
	}
	return types.NamespacedName{Namespace: ns, Name: flag}, nil
}
