// Command podargs prints, one a line, the arguments `make run` gives one of the manager pod's
// containers on the host: those of config/default's Deployment, translated by
// internal/podargs (the watches file, the metrics and probe addresses, the Lease's namespace).
// With -env it prints instead the variables the kubelet gives the container from its
// resources, NAME=value (podargs.Env).
package main

import (
	"flag"
	"fmt"
	"os"

	"transwarp.io/tos/warpdrive-operator/internal/podargs"
)

func main() {
	var (
		kustomize, dir, container string
		host                      podargs.Host
		env                       bool
	)
	flag.StringVar(&kustomize, "kustomize", "bin/kustomize", "The kustomize binary.")
	flag.StringVar(&dir, "dir", "config/default", "The kustomization that holds the manager pod's Deployment.")
	flag.StringVar(&container, "container", podargs.Manager, "The container: manager or sidecar.")
	flag.StringVar(&host.WatchesFile, "watches-file", "watches.yaml", "The watches file on the host.")
	flag.StringVar(&host.MetricsAddr, "metrics-bind-address", "0", "Where the process serves its metrics.")
	flag.BoolVar(&host.SecureMetrics, "metrics-secure", false, "Keep the pod's HTTPS metrics with authorization.")
	flag.StringVar(&host.ProbeAddr, "health-probe-bind-address", "0", "Where the process serves its probes.")
	flag.StringVar(&host.LeaseNamespace, "leader-election-namespace", "", "The namespace of the leader-election Lease.")
	flag.BoolVar(&env, "env", false, "Print the container's variables from its resources instead of its arguments.")
	flag.Parse()

	if err := run(kustomize, dir, container, host, env); err != nil {
		fmt.Fprintln(os.Stderr, "podargs:", err)
		os.Exit(1)
	}
}

// run prints the container's arguments on the host, or with env its variables.
func run(kustomize, dir, container string, host podargs.Host, env bool) error {
	pod, err := podargs.Render(kustomize, dir)
	if err != nil {
		return err
	}
	args, ok := pod.Args[container]
	if !ok {
		return fmt.Errorf("no container %q", container)
	}
	lines := pod.Env[container]
	if !env {
		if lines, err = host.HostArgs(args); err != nil {
			return err
		}
	}
	for _, l := range lines {
		fmt.Println(l)
	}
	return nil
}
