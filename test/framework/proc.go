package framework

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// ProcStatusMiB reads fields of /proc/<pid>/status that are given in kB (VmRSS, VmHWM,
// RssAnon), in MiB, in the order of fields. A field the file does not have is an error: a
// zombie's status has no VmRSS, and its 0 would read as a measure.
func ProcStatusMiB(pid int, fields ...string) ([]float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(fields))
	found := make([]bool, len(fields))
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for i, field := range fields {
			if field != key {
				continue
			}
			f := strings.Fields(value)
			if len(f) == 0 {
				return nil, fmt.Errorf("/proc/%d/status: %s has no value", pid, key)
			}
			kib, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/status: %s: %w", pid, key, err)
			}
			out[i], found[i] = kib/1024, true
		}
	}
	if i := slices.Index(found, false); i >= 0 {
		return nil, fmt.Errorf("no %s in /proc/%d/status", fields[i], pid)
	}
	return out, nil
}
