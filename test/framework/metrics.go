package framework

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Metric scrapes the Prometheus endpoint at addr and sums the samples of metric name whose
// labels contain every one of labels (for example `controller="memcached"`). A metric with
// no samples sums to 0.
func Metric(addr, name string, labels ...string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	return SumMetric(resp.Body, name, labels...)
}

// SumMetric sums, in the Prometheus text exposition r, the samples of metric name whose labels
// contain every one of labels.
func SumMetric(r io.Reader, name string, labels ...string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		series, value, ok := strings.Cut(line[len(name):], " ")
		if !ok || !containsAll(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
