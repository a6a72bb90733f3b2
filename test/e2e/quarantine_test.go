package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// A CR whose render kills the manager (the render bounds off, a memory bomb in a value the
// chart renders through tpl, the manager's address space limited as a container's memory
// is) does not crash-loop the operator: restarted as a kubelet restarts it, the manager dies
// on it at most twice, then finds it quarantined (Stalled, Quarantined) and serves the other
// tenants: another CR's edit applies.
func TestPoisonCRQuarantined(t *testing.T) {
	ns := env.Namespace(t)
	env.InstallChartKind(t, passwordHolders)
	watches := passwordHolders.WatchesFile(t)
	start := func(life int) *framework.Process {
		t.Helper()
		mgr, err := env.StartManager(framework.ProcessOptions{Name: "manager-quarantine", WatchesFile: watches,
			Flags: []string{"--leader-election-id=manager-quarantine", "--render-workers=0"}})
		if err != nil {
			t.Fatal(err)
		}
		processes = append(processes, mgr)
		limitAddressSpace(t, mgr, 256<<20)
		t.Logf("manager life %d: pid %d", life, mgr.Pid())
		return mgr
	}

	mgr := start(1)
	t.Cleanup(func() { mgr.Stop() }) // the manager of the last life, after the CRs are deleted
	healthy := passwordHolder(ns, "healthy", "hello")
	env.Create(t, healthy)
	t.Cleanup(func() { deleteAndWait(t, healthy) })
	greeting := func(want string) {
		t.Helper()
		framework.Eventually(t, converge, func(ctx context.Context) error {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "healthy-settings"}, cm); err != nil {
				return err
			}
			if cm.Data["greeting"] != want {
				return fmt.Errorf("greeting %q, want %q", cm.Data["greeting"], want)
			}
			return nil
		})
	}
	greeting("hello")

	bomb := passwordHolder(ns, "bomb", `{{ len (repeat 300000000 "x") }}`)
	env.Create(t, bomb)
	t.Cleanup(func() { deleteAndWait(t, bomb) }) // an uninstall renders nothing: the quarantine lets it through

	quarantined := func(ctx context.Context) error {
		got, err := getCR(ctx, bomb)
		if err != nil {
			return err
		}
		if c := conditionOf(got, statuscontract.Stalled); c.status != "True" || c.reason != statuscontract.ReasonQuarantined {
			return fmt.Errorf("Stalled %+v, want True with reason %s", c, statuscontract.ReasonQuarantined)
		}
		return nil
	}
	deaths := 0
	framework.Eventually(t, 10*time.Minute, func(ctx context.Context) error {
		if mgr.Exited() { // the kubelet restarts the container
			deaths++
			if deaths > 2 {
				t.Fatalf("the manager died %d times on the poison CR, want at most 2", deaths)
			}
			time.Sleep(time.Duration(deaths) * 10 * time.Second) // the kubelet's back-off
			mgr = start(deaths + 1)
		}
		return quarantined(ctx)
	})
	if deaths == 0 {
		t.Fatalf("the manager never died on the bomb: the test did not test the quarantine")
	}

	patchSpec(t, healthy, map[string]any{"greeting": "edited"})
	greeting("edited")
	if mgr.Exited() {
		t.Fatalf("the manager died after the quarantine")
	}
	t.Logf("the manager died %d times, then quarantined the poison CR and served the others", deaths)
}

// limitAddressSpace limits the address space of p to what it maps now plus headroom, as a
// container's memory limit bounds it: an allocation past it makes the Go runtime die.
func limitAddressSpace(t *testing.T, p *framework.Process, headroom uint64) {
	t.Helper()
	time.Sleep(3 * time.Second) // its start-up mappings made
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	var size uint64
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmSize:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			size = kb << 10
		}
	}
	if size == 0 {
		t.Fatalf("no VmSize in /proc/%d/status", p.Pid())
	}
	limit := syscall.Rlimit{Cur: size + headroom, Max: size + headroom}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(p.Pid()), syscall.RLIMIT_AS,
		uintptr(unsafe.Pointer(&limit)), 0, 0, 0); errno != 0 {
		t.Fatalf("prlimit: %v", errno)
	}
}
