package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// What the real node's container runtime says about the operator's containers: the node's
// containerd (hack/node-up.sh) listens on $CLUSTER_DIR/node/containerd.sock, and its cgroups
// (cgroupfs driver) are this machine's.

// ociSpec is the part of a container's OCI runtime spec the tests read.
type ociSpec struct {
	Root struct {
		Readonly bool `json:"readonly"`
	} `json:"root"`
	Process struct {
		User struct {
			UID int `json:"uid"`
		} `json:"user"`
	} `json:"process"`
	Linux struct {
		CgroupsPath string `json:"cgroupsPath"`
	} `json:"linux"`
}

// ctr runs containerd's client against the real node's containerd, in the kubelet's
// namespace.
func ctr(args ...string) (string, error) {
	sock := filepath.Join(filepath.Dir(env.Kubeconfig), "node", "containerd.sock")
	out, err := exec.Command("ctr", append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// runtimeSpec returns the OCI spec the node's runtime ran a container with; containerID is
// the pod status' "containerd://<id>".
func runtimeSpec(t *testing.T, containerID string) ociSpec {
	t.Helper()
	id, ok := strings.CutPrefix(containerID, "containerd://")
	if !ok {
		t.Fatalf("container ID %q: not the real node's containerd", containerID)
	}
	out, err := ctr("containers", "info", id)
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Spec ociSpec `json:"Spec"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("ctr containers info %s: %v", id, err)
	}
	return info.Spec
}

// cgroupUsage is what a container's cgroups recorded: its memory peak and limit, and how
// often its CPU limit throttled it.
type cgroupUsage struct {
	MaxMemory, MemoryLimit, Throttled int64
}

// containerUsage reads a container's cgroups on this machine: the v1 hierarchies (the
// machines here), or the unified v2 one (memory.peak needs Linux 5.19).
func containerUsage(t *testing.T, containerID string) cgroupUsage {
	t.Helper()
	path := runtimeSpec(t, containerID).Linux.CgroupsPath
	if path == "" {
		t.Fatalf("container %s: no cgroups path in its spec", containerID)
	}
	read := func(dir, file string) int64 {
		data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", dir, path, file))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.TrimSpace(string(data))
		if file == "cpu.stat" {
			for _, line := range strings.Split(s, "\n") {
				if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
					s = v
				}
			}
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s of %s: %v", file, path, err)
		}
		return n
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return cgroupUsage{
			MaxMemory:   read("", "memory.peak"),
			MemoryLimit: read("", "memory.max"),
			Throttled:   read("", "cpu.stat"),
		}
	}
	return cgroupUsage{
		MaxMemory:   read("memory", "memory.max_usage_in_bytes"),
		MemoryLimit: read("memory", "memory.limit_in_bytes"),
		Throttled:   read("cpu", "cpu.stat"),
	}
}

// expectNoContainers checks that no container of the operator's namespace runs on the node
// any more.
func expectNoContainers(t *testing.T) {
	t.Helper()
	framework.Eventually(t, converge, func(context.Context) error {
		out, err := ctr("containers", "ls", "-q", fmt.Sprintf("labels.%q==%s", "io.kubernetes.pod.namespace", namespace))
		if err != nil {
			return err
		}
		ours := map[string]bool{}
		for _, id := range strings.Fields(out) {
			ours[id] = true
		}
		tasks, err := ctr("tasks", "ls")
		if err != nil {
			return err
		}
		var running []string
		for _, line := range strings.Split(tasks, "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && ours[f[0]] && f[2] == "RUNNING" {
				running = append(running, f[0])
			}
		}
		if len(running) > 0 {
			return fmt.Errorf("containers of %s still running on the node: %v", namespace, running)
		}
		return nil
	})
}
