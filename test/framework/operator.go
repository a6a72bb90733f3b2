package framework

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"transwarp.io/tos/warpdrive-operator/internal/podargs"
)

// ProcessOptions say how to run one of the manager pod's containers: the manager (or the stock
// helm-operator) or the sidecar. Every suite starts them through StartManager, StartSidecar
// or StartOperator, with the arguments of the pod in config/default (Env.PodArgs), so that
// the command lines differ from the deployed ones only where internal/podargs must translate
// them for the host, and where a suite sets one of SuiteFlags.
type ProcessOptions struct {
	// Name tells apart several processes of one binary: the log is <LogDir>/<Name>.log.
	// Empty: the binary's name.
	Name string
	// Stock runs the stock helm-operator (bin/helm-operator run) in its own configuration,
	// StockArgs, instead of bin/manager, to see how it fares; StartSidecar ignores it.
	Stock bool
	// MetricsAddr is where the process serves its metrics; empty or "0": nowhere.
	MetricsAddr string
	// ProbeAddr is where it serves /healthz and /readyz; empty or "0": nowhere.
	ProbeAddr string
	// SecureMetrics serves them as the pod does, over HTTPS to authorized scrapers only;
	// without it, over plain HTTP, for the suites to read without a token.
	SecureMetrics bool
	// WatchesFile is the watches file the process reads, relative to the repository root
	// or absolute; empty: the repository's watches.yaml. The rollout tests point it at a copy
	// whose chart they change.
	WatchesFile string
	// Flags replace (or add) flags of the pod's command line; only those of SuiteFlags.
	Flags []string
}

// SuiteFlags are the flags a suite may set through ProcessOptions.Flags, each with the reason
// it may differ from the pod's. Any other flag is refused: a suite does not run with a setting
// nobody deploys without saying so here.
var SuiteFlags = map[string]string{
	// The fault and security suites run several managers and sidecars per test, and tests one
	// after the other: each test elects its leaders through Leases of its own, so that it
	// never waits for a Lease a process of an earlier test held.
	"leader-election-id": "a test's own Lease, so that it does not wait for another test's leader",
	// The security suite's takeover test runs a new version for the first time in a cluster.
	"release-signing-key": "the first run of a version in a cluster, with a signing key of its own",
	// test/bench's TestTunePeriod and TestTuneWorkers measure the candidates for config/manager/manager.yaml.
	"reconcile-period":          "test/bench TestTune measures the candidate values",
	"max-concurrent-reconciles": "test/bench TestTune measures the candidate values",
	// test/e2e's TestStatusHoldsNoRenderedData checks that the flag brings the manifest back.
	"status-release-manifest": "test/e2e checks that the stock status comes back with it",
	// The rollout tests (test/e2e, test/faults) roll a chart out in waves over their own kind.
	"rollout": "the rollout tests set a waved policy for the kind whose chart they change",
	// test/e2e's TestDriftIgnoreAndReport runs its own kind with an ignore rule, then in report mode.
	"drift": "test/e2e checks an ignore rule and the report mode on a kind of its own",
	// make test-security runs the attack suite a second time with 0: release records read by
	// name from the manager's cache, as in a namespace crowded with them (internal/releaserecords).
	"release-list-secrets-per-get": "the attack suite's second pass reads every release's records by name",
	// test/faults's TestFailover counts every revision of its releases, so it keeps them all.
	"max-release-history": "test/faults TestFailover counts every write of a release",
	// test/e2e's TestPoisonCRQuarantined turns the render bounds off, so that a template bomb
	// kills the manager and the quarantine is what stops the crash loop.
	"render-workers": "test/e2e lets a template bomb kill the manager, to check the quarantine",
	// test/security's TestTemplateBombsRefused waits for the CPU bomb's deadline: 5 s, not 30.
	"render-timeout": "test/security's CPU bomb is refused at a shorter deadline, the same path",
	// test/security's output bomb: far below the memory bound, which a 16 MiB output races.
	"render-max-output": "test/security's output bomb is refused at 4Mi, far from the memory bound",
	// The sidecar on the host serves the conversion webhook of a test's kind to the API server
	// (LocalConversion: through the webhook's Service, pointed at the host, or at localhost).
	"conversion-webhook-port": "a test's kind whose versions differ is converted by the host's sidecar",
	"conversion-cert-dir":     "the host's sidecar serves a certificate the test made",
}

// StockArgs is the stock helm-operator's configuration: the arguments operator-sdk's Helm
// scaffold (helm.sdk.operatorframework.io/v1) gives its manager container, with the metrics
// endpoint its config/default turns on. The reconcile period (1m) and the reconciles per
// kind (the node's CPU count) are the helm-operator's defaults, which the scaffold keeps.
// internal/podargs translates them for the host as it does ours.
var StockArgs = []string{
	"--leader-elect",
	"--leader-election-id=warpdrive-operator",
	"--health-probe-bind-address=:8081",
	"--metrics-bind-address=:8443",
}

// RenderPod renders root's config/default with root's bin/kustomize (the one make deploy
// uses) and returns the arguments of the manager pod's containers and the variables the
// kubelet gives them from their resources.
func RenderPod(root string) (podargs.Pod, error) {
	return podargs.Render(filepath.Join(root, "bin", "kustomize"), filepath.Join(root, "config", "default"))
}

// PodFlag is the value the pod gives flag name in container (the last one given wins, as
// with the binaries' flag parsing), and whether it gives one: for a suite that runs the
// manager's code in its own process.
func (e *Env) PodFlag(container, name string) (string, bool) {
	value, found := "", false
	for _, a := range e.PodArgs[container] {
		if podargs.FlagName(a) == name {
			_, value, _ = strings.Cut(a, "=")
			found = true
		}
	}
	return value, found
}

// ManagerBinary is the binary StartManager runs: bin/manager, or with stock the stock
// helm-operator.
func ManagerBinary(stock bool) string {
	if stock {
		return "helm-operator"
	}
	return "manager"
}

// StartManager runs the manager container from bin/, with no health probes (nothing probes
// them here).
func (e *Env) StartManager(o ProcessOptions) (*Process, error) {
	args, err := e.ManagerArgs(o)
	if err != nil {
		return nil, err
	}
	return e.RunWithEnv(processName(o, ManagerBinary(o.Stock)), ManagerBinary(o.Stock), e.ManagerEnv(o), args...)
}

// ManagerEnv is what StartManager adds to the manager's environment: the variables the pod's
// container gets from its resources (PodEnv), none for the stock helm-operator, whose
// scaffold sets none.
func (e *Env) ManagerEnv(o ProcessOptions) []string {
	if o.Stock {
		return nil
	}
	return e.PodEnv[podargs.Manager]
}

// StartSidecar runs the sidecar container as StartManager runs the manager: bin/manager, whose
// subcommand `sidecar` the container's arguments begin with.
func (e *Env) StartSidecar(o ProcessOptions) (*Process, error) {
	args, err := e.SidecarArgs(o)
	if err != nil {
		return nil, err
	}
	return e.RunWithEnv(processName(o, "sidecar"), ManagerBinary(false), e.PodEnv[podargs.Sidecar], args...)
}

// ManagerArgs is the command line StartManager runs the manager (or the stock helm-operator)
// with.
func (e *Env) ManagerArgs(o ProcessOptions) ([]string, error) {
	if o.Stock {
		args, err := e.hostArgs(StockArgs, o)
		return append([]string{"run"}, args...), err
	}
	return e.hostArgs(e.PodArgs[podargs.Manager], o)
}

// SidecarArgs is the command line StartSidecar runs the sidecar with.
func (e *Env) SidecarArgs(o ProcessOptions) ([]string, error) {
	return e.hostArgs(e.PodArgs[podargs.Sidecar], o)
}

// hostArgs translates a container's arguments for the host and applies o.Flags.
func (e *Env) hostArgs(pod []string, o ProcessOptions) ([]string, error) {
	if pod == nil {
		return nil, fmt.Errorf("no arguments for the container: Env.PodArgs is %v", e.PodArgs)
	}
	host := podargs.Host{
		WatchesFile:    cmp.Or(o.WatchesFile, "watches.yaml"), // the processes run in e.Root
		MetricsAddr:    o.MetricsAddr,
		ProbeAddr:      o.ProbeAddr,
		SecureMetrics:  o.SecureMetrics,
		LeaseNamespace: e.LeaseNamespace,
	}
	args, err := host.HostArgs(pod)
	if err != nil {
		return nil, err
	}
	return WithFlags(args, o.Flags)
}

// WithFlags replaces in args the flags of extra that args has, and appends the others; each
// must be one of SuiteFlags.
func WithFlags(args, extra []string) ([]string, error) {
	args = slices.Clone(args)
	for _, f := range extra {
		name := podargs.FlagName(f)
		if _, ok := SuiteFlags[name]; !ok || !strings.HasPrefix(f, "--"+name+"=") {
			return nil, fmt.Errorf("flag %q: a suite may set only the flags of framework.SuiteFlags, as --name=value", f)
		}
		i := slices.IndexFunc(args, func(a string) bool { return podargs.FlagName(a) == name })
		if i < 0 {
			args = append(args, f)
		} else {
			args[i] = f
		}
	}
	return args, nil
}

func processName(o ProcessOptions, binary string) string {
	if o.Name != "" {
		return o.Name
	}
	return binary
}

// Operator is the manager pod's two processes, started by StartOperator.
type Operator struct {
	Manager, Sidecar *Process
}

// StartOperator runs the manager and then the sidecar, as the pod and `make run` do; when the
// sidecar does not start, it stops the manager again.
func (e *Env) StartOperator(manager, sidecar ProcessOptions) (*Operator, error) {
	m, err := e.StartManager(manager)
	if err != nil {
		return nil, err
	}
	s, err := e.StartSidecar(sidecar)
	if err != nil {
		m.Stop()
		return nil, err
	}
	return &Operator{Manager: m, Sidecar: s}, nil
}

// Stop stops the sidecar, then the manager.
func (o *Operator) Stop() {
	o.Sidecar.Stop()
	o.Manager.Stop()
}
