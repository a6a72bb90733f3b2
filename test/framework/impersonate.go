package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// ImpersonateEnv names the variable that makes the suite run the operator's binaries as a
// ServiceAccount, "<namespace>/<name>" (the deploy e2e sets it to the manager's, after `make
// deploy` has created it and its RBAC). The binaries then get a kubeconfig whose user
// impersonates that ServiceAccount, so they have exactly the permissions config/rbac gives
// the pod; the suite's own client stays admin.
const ImpersonateEnv = "WARPDRIVE_E2E_IMPERSONATE"

// setupImpersonation reads $WARPDRIVE_E2E_IMPERSONATE and, when it is set, writes the
// operator's kubeconfig next to the admin one and points the leader-election Leases at the
// ServiceAccount's namespace, where config/rbac grants them.
func (e *Env) setupImpersonation() error {
	e.OperatorKubeconfig = e.Kubeconfig
	e.LeaseNamespace = "default"
	v := os.Getenv(ImpersonateEnv)
	if v == "" {
		return nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("%s=%q: want <namespace>/<serviceaccount>", ImpersonateEnv, v)
	}
	e.ServiceAccount = types.NamespacedName{Namespace: ns, Name: name}
	e.LeaseNamespace = ns
	e.OperatorKubeconfig = filepath.Join(filepath.Dir(e.Kubeconfig), "operator-"+ns+"-"+name+".kubeconfig")
	return WriteImpersonatingKubeconfig(e.Kubeconfig, e.OperatorKubeconfig, ns, name)
}

// Impersonating reports whether the operator's binaries run as a ServiceAccount.
func (e *Env) Impersonating() bool { return e.ServiceAccount.Name != "" }

// ServiceAccountUser is the user name the apiserver gives a ServiceAccount's tokens.
func ServiceAccountUser(ns, name string) string {
	return "system:serviceaccount:" + ns + ":" + name
}

// ServiceAccountGroups are the groups the apiserver gives a ServiceAccount's tokens.
func ServiceAccountGroups(ns string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// WriteImpersonatingKubeconfig copies the kubeconfig src to dst with the current context's
// user impersonating the ServiceAccount ns/name, with the groups its token would carry. The
// source user must be allowed to impersonate (the local cluster's admin is in
// system:masters).
func WriteImpersonatingKubeconfig(src, dst, ns, name string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return fmt.Errorf("%s: no current context", src)
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return fmt.Errorf("%s: no user %q", src, ctx.AuthInfo)
	}
	user = user.DeepCopy()
	user.Impersonate = ServiceAccountUser(ns, name)
	user.ImpersonateGroups = ServiceAccountGroups(ns)
	// A user entry of its own, so that nothing else using the file changes identity.
	userName := "as-" + ns + "-" + name
	cfg.AuthInfos[userName] = user
	ctx = ctx.DeepCopy()
	ctx.AuthInfo = userName
	cfg.Contexts[userName] = ctx
	cfg.CurrentContext = userName
	return clientcmd.WriteToFile(*cfg, dst)
}
