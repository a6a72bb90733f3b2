// Package e2e tests the operator end to end on the local cluster (make cluster-up): the CRDs
// from config/crd/bases, the helm-operator and the sidecar from bin/, real apiserver
// admission, and kwok nodes that make pods Ready.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

var env *framework.Env

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
	return m.Run()
}

// startOperator runs the manager pod's two containers as `make run` does.
func startOperator() (stop func(), err error) {
	op, err := env.Run("helm-operator", "helm-operator", "run", "--watches-file=watches.yaml",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-devel=false")
	if err != nil {
		return nil, err
	}
	sc, err := env.Run("sidecar", "sidecar", "--watches-file=watches.yaml",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	if err != nil {
		op.Stop()
		return nil, err
	}
	return func() { sc.Stop(); op.Stop() }, nil
}
