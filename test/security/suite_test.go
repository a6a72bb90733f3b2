// Package security is the attack suite: it acts as a namespace editor (a ServiceAccount
// bound to the built-in "edit" ClusterRole in its own namespace only, with the operator's
// aggregated editor roles applied) and tries to make the operator, which has cluster-wide
// rights, act outside that namespace: forged, tampered and deleted Helm release records, two
// kinds racing for one release name, pools naming classes they do not own, oversized specs,
// a chart rollout steered by canary labels and a CR kept broken.
//
// Each case snapshots every object the operator may touch outside the tenant's namespace
// (and every cluster-scoped one) before the attack and compares after it: nothing may have
// changed. It also checks that the tenant's CR kept its own release and that an Event names
// what was refused.
//
// WARPDRIVE_SECURITY_OPERATOR=stock runs the suite against the stock helm-operator instead,
// to record how it fares: there an attack that succeeds is logged as "STOCK: VULNERABLE"
// (and written to $WARPDRIVE_SECURITY_REPORT if set) instead of failing the test.
//
// WARPDRIVE_SECURITY_MANAGER_FLAGS (space-separated) are added after the pod's flags of the
// manager: make test-security runs the attacks that meet release records (the Makefile's
// SECURITY_RECORD_TESTS) a second time with --release-list-secrets-per-get=0, so that they
// also meet the records read by name from the manager's cache, as in a namespace crowded
// with them (internal/releaserecords).
package security

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

var (
	env          *framework.Env
	stock        = os.Getenv("WARPDRIVE_SECURITY_OPERATOR") == "stock"
	managerFlags = strings.Fields(os.Getenv("WARPDRIVE_SECURITY_MANAGER_FLAGS"))
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if env, err = framework.New(); err != nil {
		fmt.Fprintln(os.Stderr, "security:", err)
		return 1
	}
	ctx := context.Background()
	if err := env.InstallCRDs(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "security: installing CRDs:", err)
		return 1
	}
	if err := applyUserRoles(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "security: applying the editor and viewer roles:", err)
		return 1
	}
	stop, err := startOperator()
	if err != nil {
		fmt.Fprintln(os.Stderr, "security: starting the operator:", err)
		return 1
	}
	defer stop()
	return m.Run()
}

// applyUserRoles applies config/rbac's editor and viewer ClusterRoles, which aggregate to
// "edit" and "view": what a namespace editor may do with the operator's kinds.
func applyUserRoles(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(env.Root, "config", "rbac", "*_role.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_editor_role.yaml") && !strings.HasSuffix(f, "_viewer_role.yaml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict(data, role); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		role.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRole"))
		if err := env.Client.Patch(ctx, role, client.Apply, client.FieldOwner("warpdrive-security"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", f, err)
		}
	}
	return nil
}

// processOptions are those of every process the suite runs: the pod's, with leader election
// through the suite's own Lease named lease.
func processOptions(name, lease string, flags ...string) framework.ProcessOptions {
	return framework.ProcessOptions{Name: name, Flags: append([]string{"--leader-election-id=" + lease}, flags...)}
}

// manager is the suite's manager (or stock helm-operator); a test may stop it for a while.
var manager *framework.Process

// startManager runs the manager, or the stock helm-operator, as the pod runs it.
func startManager() error {
	o := processOptions("security-"+framework.ManagerBinary(stock), "security-manager", managerFlags...)
	o.Stock = stock
	var err error
	manager, err = env.StartManager(o)
	return err
}

// startOperator runs the manager and the sidecar.
func startOperator() (stop func(), err error) {
	if err := startManager(); err != nil {
		return nil, err
	}
	sidecar, err := env.StartSidecar(processOptions("security-sidecar", "security-sidecar"))
	if err != nil {
		manager.Stop()
		return nil, err
	}
	return func() { sidecar.Stop(); manager.Stop() }, nil
}
