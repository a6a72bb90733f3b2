package main

import (
	"os"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"transwarp.io/tos/warpdrive-operator/internal/mgropts"
)

// What the manager and `manager sidecar` do alike before and around their controllers.

// setupLog starts the logger of the flags in common, sets the garbage collector's target and
// the runtime's soft memory limit from the container's, stops heap profiling unless pprof
// serves it, and returns the log of the command's set-up.
func setupLog(common *mgropts.Options) logr.Logger {
	common.SetLogger()
	common.SetGCPercent()
	common.StopUnservedProfiling()
	log := ctrl.Log.WithName("setup")
	if limit := mgropts.SetMemoryLimit(); limit > 0 {
		log.Info("soft memory limit", "bytes", limit)
	}
	return log
}

// newManager is the controller-runtime manager of opts, with the idle memory release of
// common's flags.
func newManager(common *mgropts.Options, opts manager.Options, log logr.Logger) ctrl.Manager {
	mgr, err := mgropts.NewManager(opts, log)
	exitOn(err, log, "creating the manager")
	exitOn(common.AddMemoryRelease(mgr, log), log, "adding the memory release")
	return mgr
}

// exitOn logs err and exits when there is one: a command that cannot set itself up has
// nothing to run.
func exitOn(err error, log logr.Logger, msg string) {
	if err != nil {
		log.Error(err, msg)
		os.Exit(1)
	}
}
