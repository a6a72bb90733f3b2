package framework

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/internal/podargs"
)

// flagValues maps each flag of args to its value ("" for a bare boolean flag); the last of a
// flag wins, as with Go's flag package. A subcommand before the flags is left out
// (subcommand).
func flagValues(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args[len(subcommand(args)):] {
		name := podargs.FlagName(a)
		if name == "" {
			t.Fatalf("argument %q is not a flag", a)
		}
		_, v, _ := strings.Cut(a, "=")
		m[name] = v
	}
	return m
}

// subcommand is the words of args before its first flag.
func subcommand(args []string) []string {
	i := slices.IndexFunc(args, func(a string) bool { return podargs.FlagName(a) != "" })
	if i < 0 {
		return args
	}
	return args[:i]
}

// The suites run the binaries with the flags of the Deployment that make deploy applies:
// every flag of the pod is passed with its value, except those podargs.Translated lists for
// the host, and no flag is added but those.
func TestSuitesRunThePodsFlags(t *testing.T) {
	root := RepoRoot()
	rendered, err := RenderPod(root)
	if err != nil {
		t.Fatal(err)
	}
	pod := rendered.Args
	e := &Env{PodArgs: pod, LeaseNamespace: "leases"}
	for _, c := range []struct {
		container string
		args      func(ProcessOptions) ([]string, error)
	}{{podargs.Manager, e.ManagerArgs}, {podargs.Sidecar, e.SidecarArgs}} {
		t.Run(c.container, func(t *testing.T) {
			host, err := c.args(ProcessOptions{MetricsAddr: "127.0.0.1:1"})
			if err != nil {
				t.Fatal(err)
			}
			if w, g := subcommand(pod[c.container]), subcommand(host); !slices.Equal(w, g) {
				t.Errorf("subcommand: the pod runs %q, the suites %q", w, g)
			}
			want, got := flagValues(t, pod[c.container]), flagValues(t, host)
			if len(want) < 3 {
				t.Fatalf("the pod's %s has flags %v: config/default not rendered as expected", c.container, want)
			}
			for name, v := range want {
				if _, ok := podargs.Translated[name]; ok {
					continue
				}
				if g, ok := got[name]; !ok || g != v {
					t.Errorf("--%s: the pod has %q, the suites pass %q (present: %v)", name, v, g, ok)
				}
			}
			for name, v := range got {
				if _, ok := podargs.Translated[name]; !ok && want[name] != v {
					t.Errorf("--%s=%s: passed by the suites, not by the pod", name, v)
				}
			}
			if got["watches-file"] != "watches.yaml" || got["metrics-bind-address"] != "127.0.0.1:1" ||
				got["health-probe-bind-address"] != "0" || got["leader-election-namespace"] != "leases" {
				t.Errorf("host translations: %v", got)
			}
			if _, ok := got["metrics-secure"]; ok {
				t.Errorf("--metrics-secure passed without SecureMetrics")
			}
		})
	}
}

// A suite may change only the flags of SuiteFlags, and those are replaced, not repeated.
func TestSuiteFlagsAreListed(t *testing.T) {
	e := &Env{PodArgs: map[string][]string{podargs.Manager: {"--leader-elect", "--leader-election-id=a", "--max-release-history=10"}}, LeaseNamespace: "ns"}
	args, err := e.ManagerArgs(ProcessOptions{Flags: []string{"--leader-election-id=b"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "--leader-election-id=b") || slices.Contains(args, "--leader-election-id=a") {
		t.Errorf("args %v: want the Lease replaced", args)
	}
	for _, f := range []string{"--max-cr-metrics=1", "--zap-log-level=debug", "--leader-election-id", "-leader-election-id=b"} {
		if _, err := e.ManagerArgs(ProcessOptions{Flags: []string{f}}); err == nil {
			t.Errorf("flag %s accepted", f)
		}
	}
}

// make run (hack/run.sh) gets its arguments and the containers' variables from hack/podargs,
// which gives the same command lines and variables as the suites', and names none of the
// pod's flags itself.
func TestMakeRunUsesThePodsFlags(t *testing.T) {
	root := RepoRoot()
	script, err := os.ReadFile(filepath.Join(root, "hack", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "go run ./hack/podargs") {
		t.Errorf("hack/run.sh does not run hack/podargs")
	}
	rendered, err := RenderPod(root)
	if err != nil {
		t.Fatal(err)
	}
	pod, podEnv := rendered.Args, rendered.Env
	e := &Env{PodArgs: pod, LeaseNamespace: "leases"}
	for _, container := range []string{podargs.Manager, podargs.Sidecar} {
		for name := range flagValues(t, pod[container]) {
			if _, ok := podargs.Translated[name]; !ok && strings.Contains(string(script), "--"+name) {
				t.Errorf("hack/run.sh sets --%s itself", name)
			}
		}
		cmd := exec.Command("go", "run", "./hack/podargs", "-container="+container,
			"-metrics-bind-address=127.0.0.1:1", "-leader-election-namespace=leases")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/podargs: %v", err)
		}
		want, err := e.hostArgs(pod[container], ProcessOptions{MetricsAddr: "127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(out)); !slices.Equal(got, want) {
			t.Errorf("%s: hack/podargs prints %v, the suites run %v", container, got, want)
		}

		cmd = exec.Command("go", "run", "./hack/podargs", "-container="+container, "-env")
		cmd.Dir = root
		if out, err = cmd.Output(); err != nil {
			t.Fatalf("hack/podargs -env: %v", err)
		}
		if got, want := strings.Fields(string(out)), podEnv[container]; len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("%s: hack/podargs -env prints %v, the suites run with %v", container, got, want)
		}
	}
	if !strings.Contains(string(script), "-container=manager -env") || !strings.Contains(string(script), "-container=sidecar -env") {
		t.Errorf("hack/run.sh does not give the processes the containers' variables (hack/podargs -env)")
	}
}

// The stock helm-operator keeps its own configuration, none of ours.
func TestStockKeepsItsConfiguration(t *testing.T) {
	e := &Env{PodArgs: map[string][]string{podargs.Manager: {"--reconcile-period=10h"}}, LeaseNamespace: "ns"}
	args, err := e.ManagerArgs(ProcessOptions{Stock: true})
	if err != nil {
		t.Fatal(err)
	}
	if args[0] != "run" || slices.Contains(args, "--reconcile-period=10h") || !slices.Contains(args, "--leader-election-id=warpdrive-operator") {
		t.Errorf("stock args %v", args)
	}
}

// PodFlag reads the pod's value of a flag as the binary would: the last one given wins.
func TestPodFlag(t *testing.T) {
	e := &Env{PodArgs: map[string][]string{podargs.Manager: {"--metrics-bind-address=0", "--leader-elect", "--metrics-bind-address=:8443"}}}
	if v, ok := e.PodFlag(podargs.Manager, "metrics-bind-address"); !ok || v != ":8443" {
		t.Errorf("metrics-bind-address: %q %v", v, ok)
	}
	if v, ok := e.PodFlag(podargs.Manager, "leader-elect"); !ok || v != "" {
		t.Errorf("leader-elect: %q %v", v, ok)
	}
	if _, ok := e.PodFlag(podargs.Manager, "reconcile-period"); ok {
		t.Error("reconcile-period found")
	}
}

// The suites and the benchmark run the binaries that users run: bin/manager and
// bin/helm-operator built as the images build theirs (static, trimmed paths, no symbol
// tables). A cgo build of the same source is another binary: the linker then keeps every
// exported symbol for Go plugins, and its memory and CPU figures would not be the pod's.
func TestSuitesRunTheImagesBinaries(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join(RepoRoot(), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", `go build -trimpath -ldflags "-s -w"`} {
		if !strings.Contains(string(dockerfile), want) {
			t.Fatalf("the Dockerfile's build no longer has %s: update the Makefile's GO_BUILD and this test", want)
		}
	}
	for _, bin := range []string{ManagerBinary(false), ManagerBinary(true)} {
		path := filepath.Join(RepoRoot(), "bin", bin)
		info, err := buildinfo.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			t.Skipf("%s is not built (make build helm-operator)", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range info.Settings {
			got[s.Key] = s.Value
		}
		for key, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true"} {
			if got[key] != want {
				t.Errorf("%s was built with %s=%q, the image's with %q: build it with make build helm-operator", path, key, got[key], want)
			}
		}
		// -trimpath keeps -ldflags out of the build information: "-s -w" shows as an ELF
		// file without a symbol table and without DWARF.
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, section := range []string{".symtab", ".debug_info"} {
			if f.Section(section) != nil {
				t.Errorf("%s has a %s section: built without -ldflags \"-s -w\"", path, section)
			}
		}
		f.Close()
	}
}

// The suites run the binaries with the environment the kubelet gives the pod's containers
// from their resources: the memory limit from which each process sets the Go runtime's soft
// limit (mgropts.SetMemoryLimit), so that the garbage collector works as it does in the pod.
func TestSuitesRunWithThePodsMemoryLimit(t *testing.T) {
	pod, err := RenderPod(RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{PodEnv: pod.Env}
	for container, got := range map[string][]string{podargs.Manager: e.ManagerEnv(ProcessOptions{}), podargs.Sidecar: e.PodEnv[podargs.Sidecar]} {
		i := slices.IndexFunc(got, func(v string) bool { return strings.HasPrefix(v, "MEMORY_LIMIT=") })
		if i < 0 {
			t.Errorf("%s: no MEMORY_LIMIT in %q", container, got)
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimPrefix(got[i], "MEMORY_LIMIT="), 10, 64); err != nil || n < 64<<20 {
			t.Errorf("%s: %s: want the container's memory limit in bytes", container, got[i])
		}
	}
	if got := e.ManagerEnv(ProcessOptions{Stock: true}); got != nil {
		t.Errorf("the stock helm-operator gets %q; its scaffold sets no variable", got)
	}
}

// ProbeAddr serves the probes where the caller says, as it does the metrics.
func TestProbeAddr(t *testing.T) {
	e := &Env{PodArgs: map[string][]string{podargs.Manager: {"--leader-elect", "--health-probe-bind-address=:8081"}}, LeaseNamespace: "ns"}
	args, err := e.ManagerArgs(ProcessOptions{ProbeAddr: "127.0.0.1:2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "--health-probe-bind-address=127.0.0.1:2") {
		t.Errorf("args %v: no probe address", args)
	}
}
