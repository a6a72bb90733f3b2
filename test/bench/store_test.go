package bench

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The report is drawn from results.json beside it, which keeps each variant's latest figures
// at each size: a run measures some sizes and variants (at 10,000 CRs one variant takes about
// an hour, the three more than a working session), and the report shows every size measured
// so far, each variant with the date and commit it was measured on.

// stored is a result as results.json holds it.
type stored struct {
	Variant    string             `json:"variant"`
	N          int                `json:"n"`
	Replicas   int                `json:"replicas"`
	TimedOut   string             `json:"timedOut,omitempty"`
	Unfinished string             `json:"unfinished,omitempty"`
	Measured   string             `json:"measured"`
	Figures    map[string]float64 `json:"figures"`
}

// figures names each number of a result, for results.json.
func (r *result) figures() map[string]*float64 {
	return map[string]*float64{
		"queueAtTimeout": &r.queueAtTimeout, "doneAtTimeout": &r.doneAtTimeout, "createQueuePeak": &r.createQueuePeak, "editQueuePeak": &r.editQueuePeak,
		"cpuAtTimeout": &r.cpuAtTimeout, "pssAtTimeoutMiB": &r.pssAtTimeoutMiB, "timeoutS": &r.timeoutS,
		"createRequests": &r.createRequests, "editRequests": &r.editRequests,
		"etcdStartMiB": &r.etcdStartMiB, "etcdCreateMiB": &r.etcdCreateMiB, "etcdEditMiB": &r.etcdEditMiB,
		"createS": &r.createS, "createCPU": &r.createCPU, "editS": &r.editS, "editCPU": &r.editCPU,
		"reconcilesPerEdit": &r.reconcilesPerEdit, "idleMilli": &r.idleMilli, "sidecarIdleMilli": &r.sidecarIdleMilli,
		"rssMiB": &r.rssMiB, "peakRSSMiB": &r.peakRSSMiB, "sidecarRSSMiB": &r.sidecarRSSMiB,
		"pssMiB": &r.pssMiB, "sidecarPSSMiB": &r.sidecarPSSMiB,
		"driftP50": &r.driftP50, "driftMax": &r.driftMax, "deleteS": &r.deleteS,
		"statusP50": &r.statusP50, "statusP99": &r.statusP99,
	}
}

func (r result) store() stored {
	s := stored{Variant: r.variant, N: r.n, Replicas: r.replicas, TimedOut: r.timedOut, Unfinished: r.unfinished, Measured: r.measured, Figures: map[string]float64{}}
	for name, v := range r.figures() {
		if *v != 0 {
			s.Figures[name] = *v
		}
	}
	return s
}

func (s stored) result() result {
	r := result{variant: s.Variant, n: s.N, replicas: s.Replicas, timedOut: s.TimedOut, unfinished: s.Unfinished, measured: s.Measured}
	for name, v := range r.figures() {
		*v = s.Figures[name]
	}
	return r
}

// mergeStored returns results together with those in the file at path for the sizes and
// variants that results do not have, one per variant and size, sorted by size and then
// variant, and writes them back to path.
func mergeStored(path string, results []result) ([]result, error) {
	var old []stored
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(data, &old); err != nil {
			return nil, err
		}
	}
	// One result per variant and size: a later one replaces an earlier, the file's first.
	var merged []result
	at := map[string]int{}
	for _, r := range append(storedResults(old), results...) {
		key := fmt.Sprintf("%s/%d", r.variant, r.n)
		if i, ok := at[key]; ok {
			merged[i] = r
			continue
		}
		at[key] = len(merged)
		merged = append(merged, r)
	}
	order := []string{floorName, stockName, ourName}
	slices.SortStableFunc(merged, func(a, b result) int {
		return cmp.Or(cmp.Compare(a.n, b.n), cmp.Compare(slices.Index(order, a.variant), slices.Index(order, b.variant)))
	})
	out := make([]stored, len(merged))
	for i, r := range merged {
		out[i] = r.store()
	}
	data, err = json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	return merged, os.WriteFile(path, append(data, '\n'), 0o644)
}

func storedResults(old []stored) []result {
	out := make([]result, len(old))
	for i, o := range old {
		out[i] = o.result()
	}
	return out
}

// measuredNow says when and on what a result is measured: today's date and the commit
// checked out, marked when the tree has changes that are not committed.
func measuredNow() string {
	at := time.Now().UTC().Format("2006-01-02")
	commit, err := exec.Command("git", "-C", framework.RepoRoot(), "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return at
	}
	at += " on " + strings.TrimSpace(string(commit))
	if changes, err := exec.Command("git", "-C", framework.RepoRoot(), "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(changes) > 0 {
		at += " with uncommitted changes"
	}
	return at
}

// A run of one size and variant replaces that result in results.json and keeps the others,
// each with its figures and when it was measured; the report shows every size.
func TestReportKeepsEarlierRuns(t *testing.T) {
	dir := t.TempDir()
	s := settings{idle: time.Minute, drift: 10}
	first := []result{
		{variant: floorName, n: 100, replicas: 2, measured: "day 1 on aaa", createS: 24, deleteS: 1},
		{variant: stockName, n: 100, replicas: 2, measured: "day 1 on aaa", createS: 25, editCPU: 40, pssMiB: 95},
		{variant: ourName, n: 100, replicas: 2, measured: "day 1 on aaa", createS: 26, editCPU: 5, pssMiB: 90},
	}
	if err := writeReport(dir, s, first); err != nil {
		t.Fatal(err)
	}
	second := []result{
		{variant: ourName, n: 10000, measured: "day 2 on bbb", createS: 1800, editCPU: 500, pssMiB: 300},
		{variant: stockName, n: 10000, measured: "day 2 on bbb", timedOut: "create", queueAtTimeout: 4000, doneAtTimeout: 6200, cpuAtTimeout: 2500, timeoutS: 2700},
		{variant: floorName, n: 10000, measured: "day 2 on bbb", unfinished: "edit", createS: 2000},
	}
	if err := writeReport(dir, s, second); err != nil {
		t.Fatal(err)
	}
	got, err := mergeStored(filepath.Join(dir, "results.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(first), second[2], second[1], second[0])
	if len(got) != len(want) {
		t.Fatalf("results.json holds %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}

	third := []result{{variant: ourName, n: 100, replicas: 2, measured: "day 3 on ccc", createS: 20, editCPU: 4, pssMiB: 80}}
	if err := writeReport(dir, s, third); err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"## N = 100 CRs",
		"Measured in separate runs (kubectl apply day 1 on aaa; stock helm-operator day 1 on aaa; warpdrive-operator day 3 on ccc)",
		"| create -> all available | 24 s | 25 s | 20 s | 0.8 | 0.83 |",
		"## N = 10000 CRs",
		"Measured day 2 on bbb, the three in one run.",
		"**kubectl apply was stopped in its edit phase**",
		"**stock helm-operator did not converge**: its create phase",
		"its create phase was not done after 45m0s (", // the run's timeout, stored with its result
		" (6200 of the 10000 CRs were), with 4000 CRs in its work queue; by then it had used 2500 CPU-s",
	} {
		if !strings.Contains(string(report), line) {
			t.Errorf("results.md lacks %q:\n%s", line, report)
		}
	}
}

func TestMeasuredLine(t *testing.T) {
	one := func(v, when string) result { return result{variant: v, measured: when} }
	for _, tc := range []struct {
		rs   []result
		want string
	}{
		{[]result{one(floorName, "d1"), one(stockName, "d1"), one(ourName, "d1")}, "Measured d1, the three in one run.\n\n"},
		{[]result{{}, {}, one(ourName, "d1")}, "Measured d1: warpdrive-operator only.\n\n"},
		{[]result{one(floorName, ""), {}, one(ourName, "d1")}, "Measured in separate runs (kubectl apply (date not recorded); warpdrive-operator d1): the ratios compare runs, not one run.\n\n"},
	} {
		if got := measuredLine(tc.rs...); got != tc.want {
			t.Errorf("measuredLine(%+v) = %q, want %q", tc.rs, got, tc.want)
		}
	}
}

// A result given twice, or already twice in the file, is kept once: the latest.
func TestMergeKeepsOneResultPerVariantAndSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	older := result{variant: ourName, n: 10000, measured: "day 1 on aaa", createS: 2000}
	twice := []stored{older.store(), older.store()}
	data, err := json.Marshal(twice)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	newer := result{variant: ourName, n: 10000, measured: "day 2 on bbb", createS: 1900}
	got, err := mergeStored(path, []result{newer, newer})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != newer {
		t.Fatalf("merged %+v, want the newer result once", got)
	}
	if got, _ = mergeStored(path, nil); len(got) != 1 || got[0] != newer {
		t.Fatalf("results.json then holds %+v, want the newer result once", got)
	}
}
