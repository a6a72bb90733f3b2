// Command pause is the pod sandbox ("pause") process of the local cluster's real node
// (hack/node-up.sh). No image registry is reachable there, so the node cannot pull the usual
// pause image: this one is built from source and loaded into the node's containerd.
//
// A sandbox process holds the pod's namespaces open for the pod's lifetime. It runs as PID 1
// of the pod when the pod shares its process namespace, so it also reaps the children that
// are re-parented to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		return
	}
}

// reap collects every child that has exited, so that none stays a zombie.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
