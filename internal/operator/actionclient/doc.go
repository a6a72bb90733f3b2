// Package actionclient is the plumbing every layer of a CR's pipeline is made with: a layer
// wraps the action clients (helm-operator-plugins' ActionInterface) of the layer below, one
// for each CR it serves (Wrap), and some act only on a real upgrade, not on the dry run by
// which the reconciler decides whether to upgrade (IsDryRun).
//
// It knows nothing of any one layer, and imports nothing of internal/operator, so that the
// layers, wherever they are kept, depend on it and never on the package that assembles them.
package actionclient
