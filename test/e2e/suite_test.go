// Package e2e tests the operator end to end on the local cluster (make cluster-up): the CRDs
// from config/crd/bases, the helm-operator and the sidecar from bin/, real apiserver
// admission, and kwok nodes that make pods Ready.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

var (
	env *framework.Env
	// manager is the running manager; a test that restarts it replaces it.
	manager *framework.Process
	// sidecar is the leading sidecar; the failover test replaces it with its standby.
	sidecar *framework.Process
	// managerMetricsAddr is where the manager serves its metrics over HTTPS, to
	// authenticated and authorized scrapers only (--metrics-secure).
	managerMetricsAddr string
)

// TestMain sets the cluster up once for the whole suite, as kubebuilder's suite_test does.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = framework.New(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := env.InstallCRDs(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: installing CRDs:", err)
		return 1
	}
	stop, err := startOperator()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: starting the operator:", err)
		return 1
	}
	defer stop()
	code := m.Run()
	if code == 0 && env.Impersonating() {
		if err := rbacDenials(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			code = 1
		}
	}
	return code
}

// processes are the operator's processes the suite started.
var processes []*framework.Process

// rbacDenials fails the run when the apiserver refused the operator something: a request the
// tests do not look at (an Event, a retried write) would otherwise hide a gap in config/rbac.
func rbacDenials() error {
	var denied []string
	for _, p := range processes {
		out, err := p.Output()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(out, "\n") {
			// A write into a namespace being deleted is "forbidden" too, by the namespace
			// lifecycle, not by RBAC: a reconcile or an Event racing a test's cleanup.
			if strings.Contains(strings.ToLower(line), "forbidden") && !strings.Contains(line, "because it is being terminated") {
				denied = append(denied, p.Name+": "+line)
			}
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("running as %s, the operator was refused %d requests, e.g.\n%s",
			env.ServiceAccount, len(denied), strings.Join(denied[:min(len(denied), 5)], "\n"))
	}
	return nil
}

// startOperator runs the manager pod's two containers as `make run` does.
func startOperator() (stop func(), err error) {
	if managerMetricsAddr, err = framework.FreeAddr(); err != nil {
		return nil, err
	}
	if manager, err = startManager(); err != nil {
		return nil, err
	}
	if sidecar, err = startSidecar("sidecar", "0", false); err != nil {
		manager.Stop()
		return nil, err
	}
	// manager and sidecar as they are at the end: a test may have replaced them.
	return func() { sidecar.Stop(); manager.Stop() }, nil
}

// startManager runs the manager container as `make run` does, its metrics on
// managerMetricsAddr. A test that stops the manager starts it again with this, and sets
// manager to the result.
func startManager() (*framework.Process, error) {
	// As in the pod and `make run`: leader election (which the repair of pending releases
	// needs), with the Lease, and the release signing key, where config/rbac grants them;
	// metrics over HTTPS to authorized scrapers, as TestMetricsNeedAuthorization checks.
	o := framework.ProcessOptions{MetricsAddr: managerMetricsAddr, SecureMetrics: true}
	// The stock helm-operator, in its own configuration, to see which of the suite's
	// expectations it fails.
	o.Stock = os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock"
	op, err := env.StartManager(o)
	if err != nil {
		return nil, err
	}
	processes = append(processes, op)
	return op, nil
}

// startSidecar runs a sidecar as the pod does, its metrics on metricsAddr ("0": none), over
// HTTPS to authorized scrapers only with secureMetrics.
func startSidecar(name, metricsAddr string, secureMetrics bool) (*framework.Process, error) {
	p, err := env.StartSidecar(framework.ProcessOptions{Name: name, MetricsAddr: metricsAddr, SecureMetrics: secureMetrics})
	if err == nil {
		processes = append(processes, p)
	}
	return p, err
}
