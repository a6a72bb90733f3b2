package main

import (
	"flag"
	"fmt"

	"transwarp.io/tos/warpdrive-operator/internal/handover"
	"transwarp.io/tos/warpdrive-operator/internal/mgropts"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
	"transwarp.io/tos/warpdrive-operator/sidecar"
)

// runSidecar is `manager sidecar`, the pod's second container: it writes the live state of
// each CR's workloads (replicas, readyReplicas, availableReplicas, selector and the
// RolledOut condition) into the CR's status, for every kind listed in watches.yaml (see
// sidecar/internal/workloadstatus), and keeps the books of each WarpdrivePool's claims in
// status.pool (see sidecar/internal/poolstatus). With --conversion-webhook-port it also serves,
// on every replica, the CRD conversion webhook of the kinds whose chart has a
// conversions.yaml (see sidecar/internal/conversionwebhook). sidecar composes them.
//
// It is a subcommand of the manager's binary, not a binary of its own, so that the node keeps
// one binary's pages for both containers: most of a process's resident memory here is its
// binary's text, and the two share the runtime, client-go and controller-runtime
// (docs/bench/findings.md, "One binary for both containers").
func runSidecar(args []string) {
	var (
		watchesFile string
		workers     int
		conv        sidecar.Conversion
		common      mgropts.Options
	)
	fs := flag.NewFlagSet("sidecar", flag.ExitOnError)
	fs.StringVar(&watchesFile, "watches-file", "./watches.yaml", "Path to the helm-operator's watches file; a status controller runs for each kind in it.")
	fs.IntVar(&workers, "max-concurrent-reconciles", sidecar.DefaultWorkers,
		"CRs of each kind whose status is synced at once; a sync mostly waits on its write to the API server.")
	fs.IntVar(&conv.Port, "conversion-webhook-port", 0,
		"Port of the CRD conversion webhook, served on every replica for the kinds whose chart has a conversions.yaml; 0 serves none.")
	fs.StringVar(&conv.CertDir, "conversion-cert-dir", "/tmp/conversion-webhook/certs",
		"Directory of the conversion webhook's tls.crt and tls.key, reloaded when they change: the mounted Secret of "+
			"--conversion-cert-secret, or of a cert-manager Certificate.")
	fs.StringVar(&conv.Secret, "conversion-cert-secret", "",
		"Secret, as <name> in the operator's namespace or <namespace>/<name>, where the sidecar keeps the conversion "+
			"webhook's CA and certificate, renews them, and injects the CA into the served CRDs (the leader does, with "+
			"--leader-elect); mount it at --conversion-cert-dir. Empty: the certificate is cert-manager's, not rotated here.")
	fs.StringVar(&conv.Service, "conversion-service-name", "",
		"Service of the conversion webhook, in the Secret's namespace; the certificate of --conversion-cert-secret is for its DNS names.")
	common.BindFlags(fs, mgropts.Flags{
		MetricsAddr:                  ":8082",
		MetricsAddrUsage:             "Address the metrics endpoint binds to; \"0\" disables it.",
		ProbeAddr:                    ":8083",
		ProbeAddrUsage:               "Address the /healthz and /readyz probes bind to.",
		LeaderElectUsage:             "Elect a leader through a Lease so that only one replica writes status.",
		LeaderElectionID:             "warpdrive-sidecar.transwarp.io",
		LeaderElectionNamespaceUsage: "Namespace of the leader election Lease; defaults to the pod's namespace in-cluster.",
	})
	_ = fs.Parse(args) // ExitOnError: exits on a bad flag
	log := setupLog(&common)

	ws, err := watchfile.Load(watchesFile)
	exitOn(err, log, "Unable to load watches")
	if workers < 1 {
		exitOn(fmt.Errorf("--max-concurrent-reconciles=%d: at least 1", workers), log, "Invalid flags")
	}
	exitOn(conv.Validate(), log, "Invalid flags")
	opts := sidecar.Options{Watches: ws, Workers: workers, Conversion: conv,
		LeaderElection: common.LeaderElect, LeaderElectionNamespace: common.LeaderElectionNamespace}

	mgrOpts := common.Manager()
	exitOn(sidecar.ManagerOptions(&mgrOpts, opts), log, "Unable to build the manager options")
	mgr := newManager(&common, mgrOpts, log)
	ctx := handover.SignalContext(mgr.GetConfig(), log)
	exitOn(sidecar.Setup(ctx, mgr, opts), log, "Unable to set up controllers")

	log.Info("Starting manager", "kinds", len(ws), "leaderElection", common.LeaderElect)
	exitOn(mgr.Start(ctx), log, "Manager exited with an error")
}
