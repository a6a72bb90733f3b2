// Package faults is the fault suite (make test-faults): the operator on the local cluster
// (make cluster-up) through crashes in the middle of Helm operations, control-plane
// restarts, the loss of its leaders and churn, each test asserting the exact end state.
//
// Unlike the e2e suite it starts no operator for the whole run: each test starts (and kills)
// its own manager and sidecar processes from bin/, with a leader-election Lease of its own.
// The default sizes are those the suite was asked to survive (100 CRs through 18 kills, a
// wave of 100 edits through the restarts, 1000 churn cycles); WARPDRIVE_FAULTS_HEAVY=1 runs
// larger ones (200 CRs through 30 kills, 300 edits, 5000 cycles).
package faults

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

var (
	env *framework.Env
	// heavy selects the larger sizes ($WARPDRIVE_FAULTS_HEAVY=1).
	heavy = os.Getenv("WARPDRIVE_FAULTS_HEAVY") == "1"
	// stock runs the stock helm-operator instead of bin/manager
	// ($WARPDRIVE_FAULTS_OPERATOR=stock), to see which faults it does not survive.
	stock = os.Getenv("WARPDRIVE_FAULTS_OPERATOR") == "stock"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = framework.New(); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	if err := env.InstallCRDs(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "faults: installing CRDs:", err)
		return 1
	}
	return m.Run()
}

// size is n by default and heavyN with WARPDRIVE_FAULTS_HEAVY=1.
func size(n, heavyN int) int {
	if heavy {
		return heavyN
	}
	return n
}

// convergeTimeout bounds a wait for the operator to bring every CR of a test to its spec. It
// only stops a broken run from hanging; there is no timing goal here (see make bench).
func convergeTimeout() time.Duration {
	return time.Duration(size(20, 40)) * time.Minute
}
