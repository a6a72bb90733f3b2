package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

const (
	floorName = "kubectl apply"
	stockName = "stock helm-operator"
	ourName   = "warpdrive-operator"
)

// writeReport writes results.md (the figures and the ratios) and results.png (the ratios of
// this operator to the stock one) to dir, of results and of the sizes and variants that
// results.json in dir holds from earlier runs (mergeStored).
func writeReport(dir string, s settings, results []result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	results, err := mergeStored(filepath.Join(dir, "results.json"), results)
	if err != nil {
		return err
	}
	var sizes []int
	for _, r := range results {
		if !slices.Contains(sizes, r.n) {
			sizes = append(sizes, r.n)
		}
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Benchmark: warpdrive-operator vs the stock helm-operator vs kubectl apply\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s, the three variants one after the other on the same local cluster "+
		"(AppService CRs: a Deployment and a Service each; idle window %s; %d Deployments scaled by hand for drift). "+
		"Both operators run with the arguments of their pods: ours those of config/default's Deployment, the stock one "+
		"operator-sdk's scaffolded ones (docs/bench/README.md). Each size says when, and on which commit, its variants were measured.\n\n",
		host, s.idle, s.drift)
	b.WriteString("![idle CPU](idle-cpu.png) ![create CPU](create-cpu.png) ![edit CPU](edit-cpu.png) ![memory](memory.png)\n\n")
	for _, n := range sizes {
		byName := map[string]result{}
		for _, r := range results {
			if r.n == n {
				byName[r.variant] = r
			}
		}
		floor, stock, ours := byName[floorName], byName[stockName], byName[ourName]
		fmt.Fprintf(&b, "## N = %d CRs\n\n", n)
		b.WriteString(measuredLine(floor, stock, ours))
		if floor.replicas > 0 {
			fmt.Fprintf(&b, "%d replicas per CR; the edit sets %d.\n\n", floor.replicas, floor.replicas+1)
		} else {
			b.WriteString("0 replicas per CR (the cluster's nodes do not admit 3 pods per CR); the edit changes the pods' CPU request, a Helm upgrade all the same.\n\n")
		}
		for _, r := range []result{floor, stock, ours} {
			if r.unfinished != "" {
				fmt.Fprintf(&b, "**%s was stopped in its %s phase**: the run ended there, and that phase and those after it were not measured.\n\n",
					r.variant, r.unfinished)
			}
			if r.timedOut != "" {
				reached := "" // zero: a run from before the harness counted them
				if r.doneAtTimeout > 0 {
					reached = fmt.Sprintf(" (%.0f of the %d CRs were)", r.doneAtTimeout, n)
				}
				after := "within its run's timeout (not recorded)" // a result from before timeouts were stored
				if r.timeoutS > 0 {
					after = "after " + (time.Duration(r.timeoutS) * time.Second).String()
				}
				fmt.Fprintf(&b, "**%s did not converge**: its %s phase was not done %s%s, with %.0f CRs in its work queue; "+
					"by then it had used %.0f CPU-s in the phase, its memory (PSS) was %.0f MiB and its peak RSS %.0f MiB; the phases after it were not measured.\n\n",
					r.variant, r.timedOut, after, reached, r.queueAtTimeout, r.cpuAtTimeout, r.pssAtTimeoutMiB, r.peakRSSMiB)
			}
		}
		fmt.Fprintf(&b, "| work | %s | %s | %s | this / stock | this / kubectl |\n|---|---|---|---|---|---|\n", floorName, stockName, ourName)
		row := func(what, unit string, f, st, o float64, floorToo bool) {
			cell := func(v float64) string {
				if v == 0 {
					return "-"
				}
				return figure(v) + " " + unit
			}
			fl, ratioFloor := "-", "-"
			if floorToo {
				fl = cell(f)
				ratioFloor = ratio(o, f)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", what, fl, cell(st), cell(o), ratio(o, st), ratioFloor)
		}
		row("create -> all available", "s", floor.createS, stock.createS, ours.createS, true)
		row("  operator CPU for it", "CPU-s", 0, stock.createCPU, ours.createCPU, false)
		row("edit every CR -> all rolled out", "s", floor.editS, stock.editS, ours.editS, true)
		row("  operator CPU for it", "CPU-s", 0, stock.editCPU, ours.editCPU, false)
		row("  helm reconciles per edit", "", 0, stock.reconcilesPerEdit, ours.reconcilesPerEdit, false)
		row("  deepest work queue, create", "CRs", 0, stock.createQueuePeak, ours.createQueuePeak, false)
		row("  deepest work queue, edit", "CRs", 0, stock.editQueuePeak, ours.editQueuePeak, false)
		row("apiserver requests per CR created (every client)", "", floor.createRequests, stock.createRequests, ours.createRequests, true)
		row("apiserver requests per CR edit (every client)", "", floor.editRequests, stock.editRequests, ours.editRequests, true)
		row("etcd in use before the create", "MiB", floor.etcdStartMiB, stock.etcdStartMiB, ours.etcdStartMiB, true)
		row("etcd in use after the create", "MiB", floor.etcdCreateMiB, stock.etcdCreateMiB, ours.etcdCreateMiB, true)
		row("etcd in use after the edit wave", "MiB", floor.etcdEditMiB, stock.etcdEditMiB, ours.etcdEditMiB, true)
		perCR := func(v float64) float64 { return v / float64(n) }
		row("operator CPU per CR created", "CPU-ms", 0, 1000*perCR(stock.createCPU), 1000*perCR(ours.createCPU), false)
		row("operator CPU per CR edit", "CPU-ms", 0, 1000*perCR(stock.editCPU), 1000*perCR(ours.editCPU), false)
		row("idle CPU", "millicores", 0, stock.idleMilli, ours.idleMilli, false)
		row("  of which the sidecar", "millicores", 0, 0, ours.sidecarIdleMilli, false)
		row("memory after idle (PSS)", "MiB", 0, stock.pssMiB, ours.pssMiB, false)
		row("  of which the sidecar", "MiB", 0, 0, ours.sidecarPSSMiB, false)
		row("memory after idle per CR (PSS)", "MiB", 0, perCR(stock.pssMiB), perCR(ours.pssMiB), false)
		row("RSS after idle (VmRSS summed)", "MiB", 0, stock.rssMiB, ours.rssMiB, false)
		row("  of which the sidecar", "MiB", 0, 0, ours.sidecarRSSMiB, false)
		row("peak RSS", "MiB", 0, stock.peakRSSMiB, ours.peakRSSMiB, false)
		row("drift repaired, p50", "s", 0, stock.driftP50, ours.driftP50, false)
		row("drift repaired, max", "s", 0, stock.driftMax, ours.driftMax, false)
		row("delete -> all gone", "s", floor.deleteS, stock.deleteS, ours.deleteS, true)
		row("status follows the workload, p50", "s", 0, 0, ours.statusP50, false)
		row("status follows the workload, p99", "s", 0, 0, ours.statusP99, false)
		b.WriteString("\n")
	}
	b.WriteString("CPU and memory are the operator's processes (for this operator: manager + sidecar), read from /proc. " +
		"Memory is PSS (smaps_rollup), which counts a page the two processes share once: they run one binary, whose pages the node holds once; " +
		"summed VmRSS counts them twice. " +
		"A phase's CPU, and its apiserver requests (the apiserver's apiserver_request_total, from every client: the controllers, kwok and the benchmark's own count too, so kubectl apply is the floor), " +
		"run from its start to 10 s after all Deployments are available, so that trailing reconciles count. " +
		"etcd in use is etcd_mvcc_db_total_size_in_use_in_bytes, of the whole cluster. " +
		"The work queue is the operator's workqueue_depth, sampled every 2 s.\n")
	b.WriteString(marginalRSS(sizes, results))
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := plotVsN(dir, results); err != nil {
		return err
	}
	return plotRatios(filepath.Join(dir, "results.png"), sizes, results)
}

// measuredLine says when the variants of one size were measured: in one run, or in several,
// whose ratios then compare figures of different days or code.
func measuredLine(variants ...result) string {
	var seen, names, each []string
	for _, r := range variants {
		if r.variant == "" {
			continue
		}
		when := cmp.Or(r.measured, "(date not recorded)")
		if !slices.Contains(seen, when) {
			seen = append(seen, when)
		}
		names = append(names, r.variant)
		each = append(each, r.variant+" "+when)
	}
	switch {
	case len(seen) == 1 && len(names) == 3:
		return fmt.Sprintf("Measured %s, the three in one run.\n\n", seen[0])
	case len(seen) == 1:
		return fmt.Sprintf("Measured %s: %s only.\n\n", seen[0], strings.Join(names, ", "))
	default:
		return fmt.Sprintf("Measured in separate runs (%s): the ratios compare runs, not one run.\n\n", strings.Join(each, "; "))
	}
}

// figure prints v to three significant digits, and from 1000 up as a whole number: "2e+03 s"
// reads worse than "1999 s".
func figure(v float64) string {
	if math.Abs(v) >= 1000 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2g", a/b)
}

// plotRatios draws, per size, this operator's figure divided by the stock operator's for
// each measure: below 1 is better.
func plotRatios(path string, sizes []int, results []result) error {
	measures := []struct {
		name string
		get  func(result) float64
	}{
		{"create", func(r result) float64 { return r.createS }},
		{"edit CPU", func(r result) float64 { return r.editCPU }},
		{"idle CPU", func(r result) float64 { return r.idleMilli }},
		{"memory", func(r result) float64 { return r.pssMiB }},
		{"drift p50", func(r result) float64 { return r.driftP50 }},
		{"delete", func(r result) float64 { return r.deleteS }},
	}
	p := plot.New()
	p.Title.Text = "warpdrive-operator / stock helm-operator (below 1 is better)"
	p.Y.Label.Text = "ratio"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	names := make([]string, len(measures))
	for i, m := range measures {
		names[i] = m.name
	}
	p.NominalX(names...)
	width := vg.Points(14)
	palette := []color.Color{color.RGBA{R: 66, G: 133, B: 244, A: 255}, color.RGBA{R: 219, G: 68, B: 55, A: 255}, color.RGBA{R: 15, G: 157, B: 88, A: 255}}
	for si, n := range sizes {
		var stock, ours result
		for _, r := range results {
			if r.n == n && r.variant == stockName {
				stock = r
			}
			if r.n == n && r.variant == ourName {
				ours = r
			}
		}
		values := make(plotter.Values, len(measures))
		for i, m := range measures {
			values[i] = 1
			if a, b := m.get(ours), m.get(stock); a > 0 && b > 0 {
				values[i] = a / b
			}
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return err
		}
		bars.Color = palette[si%len(palette)]
		bars.Offset = width * vg.Length(float64(si)-float64(len(sizes)-1)/2)
		p.Add(bars)
		p.Legend.Add(fmt.Sprintf("N = %d", n), bars)
	}
	one, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(measures)) - 0.5, Y: 1}})
	if err != nil {
		return err
	}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(one)
	p.Legend.Add("stock = 1", one)
	p.Legend.Top = true
	return p.Save(18*vg.Centimeter, 10*vg.Centimeter, path)
}

// marginalRSS is what each further CR costs in memory (PSS), between consecutive sizes:
// memory per CR at one size also holds the process's fixed cost.
func marginalRSS(sizes []int, results []result) string {
	var b strings.Builder
	rss := map[string]map[int]float64{}
	for _, r := range results {
		if rss[r.variant] == nil {
			rss[r.variant] = map[int]float64{}
		}
		rss[r.variant][r.n] = r.pssMiB
	}
	for i := 1; i < len(sizes); i++ {
		lo, hi := sizes[i-1], sizes[i]
		for _, v := range []string{stockName, ourName} {
			a, z := rss[v][lo], rss[v][hi]
			if a > 0 && z > 0 && hi > lo {
				fmt.Fprintf(&b, "\n- %s: memory (PSS) grows by %.3g KiB per CR from %d to %d CRs.", v, (z-a)*1024/float64(hi-lo), lo, hi)
			}
		}
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// plotVsN draws, for both operators, a measure against the number of CRs, one PNG each, on
// logarithmic axes: a line that stays flat does not grow with N.
func plotVsN(dir string, results []result) error {
	for _, m := range []struct {
		file, title, unit string
		get               func(result) float64
	}{
		{"idle-cpu.png", "idle CPU", "millicores", func(r result) float64 { return r.idleMilli }},
		{"create-cpu.png", "CPU to create N CRs", "CPU-seconds", func(r result) float64 { return r.createCPU }},
		{"edit-cpu.png", "CPU to edit N CRs", "CPU-seconds", func(r result) float64 { return r.editCPU }},
		{"memory.png", "memory after idle (PSS)", "MiB", func(r result) float64 { return r.pssMiB }},
	} {
		p := plot.New()
		p.Title.Text = m.title
		p.X.Label.Text = "CRs"
		p.Y.Label.Text = m.unit
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, labelledTicks{}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		lines := 0
		for i, v := range []string{stockName, ourName} {
			var xys plotter.XYs
			for _, r := range results {
				if y := m.get(r); r.variant == v && y > 0 {
					xys = append(xys, plotter.XY{X: float64(r.n), Y: y})
				}
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			c := []color.Color{color.RGBA{R: 219, G: 68, B: 55, A: 255}, color.RGBA{R: 66, G: 133, B: 244, A: 255}}[i]
			line.Color, points.Color = c, c
			p.Add(line, points)
			p.Legend.Add(v, line, points)
			lines++
		}
		if lines == 0 {
			continue // neither operator measured it yet (kubectl apply's run alone): no axis to draw
		}
		if err := p.Save(12*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, m.file)); err != nil {
			return err
		}
	}
	return nil
}

// labelledTicks are the log scale's ticks when they label at least two values in the axis's
// range, else the linear ones: a range within one power of ten (RSS from 100 to 1000 CRs)
// has at most one labelled log tick, and the axis would show no values.
type labelledTicks struct{}

func (labelledTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.LogTicks{Prec: -1}.Ticks(min, max)
	labelled := 0
	for _, t := range ticks {
		if t.Label != "" && t.Value >= min && t.Value <= max {
			labelled++
		}
	}
	if labelled >= 2 {
		return ticks
	}
	return plot.DefaultTicks{}.Ticks(min, max)
}
