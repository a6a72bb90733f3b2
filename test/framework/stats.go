package framework

import (
	"sort"
	"time"
)

// Percentile is the p-th percentile (0-100) of ds in seconds, the nearest rank below; 0 for
// no durations.
func Percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p/100)].Seconds()
}
