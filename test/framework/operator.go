package framework

// ProcessOptions say how to run one of the manager pod's containers: the manager (or the stock
// helm-operator) or the sidecar. Every suite starts them through StartManager, StartSidecar
// or StartOperator, so that the command lines differ only where a suite means them to.
type ProcessOptions struct {
	// Name tells apart several processes of one binary: the log is <LogDir>/<Name>.log.
	// Empty: the binary's name.
	Name string
	// Stock runs the stock helm-operator (bin/helm-operator run) instead of bin/manager, to
	// see how it fares; StartSidecar ignores it.
	Stock bool
	// LeaderElect elects a leader through a Lease in Env.LeaseNamespace, as in the pod.
	LeaderElect bool
	// MetricsAddr is where the process serves its metrics; empty or "0": nowhere.
	MetricsAddr string
	// Flags are further flags, after the ones above.
	Flags []string
}

// ManagerBinary is the binary StartManager runs: bin/manager, or with stock the stock
// helm-operator.
func ManagerBinary(stock bool) string {
	if stock {
		return "helm-operator"
	}
	return "manager"
}

// StartManager runs the manager container from bin/, reading watches.yaml, with no health
// probes (nothing probes them here).
func (e *Env) StartManager(o ProcessOptions) (*Process, error) {
	var args []string
	if o.Stock {
		args = []string{"run"}
	}
	return e.start(ManagerBinary(o.Stock), o, args)
}

// StartSidecar runs the sidecar container from bin/ as StartManager runs the manager.
func (e *Env) StartSidecar(o ProcessOptions) (*Process, error) {
	return e.start("sidecar", o, nil)
}

// start runs binary with args and the flags o asks for.
func (e *Env) start(binary string, o ProcessOptions, args []string) (*Process, error) {
	name := o.Name
	if name == "" {
		name = binary
	}
	metrics := o.MetricsAddr
	if metrics == "" {
		metrics = "0"
	}
	args = append(args, "--watches-file=watches.yaml")
	if o.LeaderElect {
		args = append(args, "--leader-elect", "--leader-election-namespace="+e.LeaseNamespace)
	}
	args = append(args, "--metrics-bind-address="+metrics, "--health-probe-bind-address=0")
	return e.Run(name, binary, append(args, o.Flags...)...)
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
