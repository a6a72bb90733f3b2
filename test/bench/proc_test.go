package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on Linux.
const clockTicks = 100

// cpuSeconds is the CPU time (user + system) a process has used so far.
func cpuSeconds(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from its end.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %v %v", pid, err1, err2)
	}
	return (utime + stime) / clockTicks, nil
}

// rssMiB is a process's resident set size, and the most it has been (VmHWM), in MiB.
func rssMiB(pid int) (now, peak float64, err error) {
	v, err := framework.ProcStatusMiB(pid, "VmRSS", "VmHWM")
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

// pssMiB is a process's proportional set size in MiB (/proc/<pid>/smaps_rollup): its pages,
// each shared page divided by the number of processes that map it. The manager and the
// sidecar run one binary, whose pages the node holds once: summed, their PSS is what the pod
// costs the node, where summed VmRSS would count those pages twice.
func pssMiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if value, ok := strings.CutPrefix(line, "Pss:"); ok {
			kib, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
			return kib / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/smaps_rollup has no Pss", pid)
}

// processes is a set of processes measured together (the operator's pod: manager + sidecar).
type processes []int

func (p processes) cpu() float64 {
	var sum float64
	for _, pid := range p {
		s, err := cpuSeconds(pid)
		if err == nil {
			sum += s
		}
	}
	return sum
}

func (p processes) rss() (now, peak float64) {
	for _, pid := range p {
		n, h, err := rssMiB(pid)
		if err == nil {
			now += n
			peak += h
		}
	}
	return now, peak
}

func (p processes) pss() float64 {
	var sum float64
	for _, pid := range p {
		if v, err := pssMiB(pid); err == nil {
			sum += v
		}
	}
	return sum
}
