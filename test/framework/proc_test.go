package framework

import (
	"os"
	"testing"
)

// TestProcStatusMiB reads this process's own status: VmRSS and VmHWM in the order asked,
// in MiB (a Go test binary holds a few MiB, far from the kB figure), the peak not below the
// RSS; a field the file does not have is an error.
func TestProcStatusMiB(t *testing.T) {
	v, err := ProcStatusMiB(os.Getpid(), "VmHWM", "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	peak, rss := v[0], v[1]
	if rss < 1 || rss > 1024 || peak < rss {
		t.Errorf("VmHWM %.1f MiB, VmRSS %.1f MiB: want 1 MiB <= VmRSS <= VmHWM, VmRSS under 1 GiB", peak, rss)
	}
	if _, err := ProcStatusMiB(os.Getpid(), "VmRSS", "NoSuchField"); err == nil {
		t.Error("a field /proc/<pid>/status does not have: no error")
	}
}
