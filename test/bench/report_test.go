package bench

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
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
// this operator to the stock one) to dir.
func writeReport(dir string, s settings, results []result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Benchmark: warpdrive-operator vs the stock helm-operator vs kubectl apply\n\n")
	fmt.Fprintf(&b, "Measured by `make bench` on %s, %s, one run, the three side by side on the same local cluster "+
		"(AppService CRs: a Deployment of 2 replicas and a Service each; idle window %s; %d Deployments scaled by hand for drift).\n\n",
		host, time.Now().UTC().Format("2006-01-02"), s.idle, s.drift)
	for _, n := range s.sizes {
		byName := map[string]result{}
		for _, r := range results {
			if r.n == n {
				byName[r.variant] = r
			}
		}
		floor, stock, ours := byName[floorName], byName[stockName], byName[ourName]
		fmt.Fprintf(&b, "## N = %d CRs\n\n", n)
		fmt.Fprintf(&b, "| work | %s | %s | %s | this / stock | this / kubectl |\n|---|---|---|---|---|---|\n", floorName, stockName, ourName)
		row := func(what, unit string, f, st, o float64, floorToo bool) {
			cell := func(v float64) string {
				if v == 0 {
					return "-"
				}
				return fmt.Sprintf("%.3g %s", v, unit)
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
		row("edit replicas 2 -> 3 on every CR -> all available", "s", floor.editS, stock.editS, ours.editS, true)
		row("  operator CPU for it", "CPU-s", 0, stock.editCPU, ours.editCPU, false)
		row("  helm reconciles per edit", "", 0, stock.reconcilesPerEdit, ours.reconcilesPerEdit, false)
		row("idle CPU", "millicores", 0, stock.idleMilli, ours.idleMilli, false)
		row("  of which the sidecar", "millicores", 0, 0, ours.sidecarIdleMilli, false)
		row("RSS after idle", "MiB", 0, stock.rssMiB, ours.rssMiB, false)
		row("  of which the sidecar", "MiB", 0, 0, ours.sidecarRSSMiB, false)
		row("peak RSS", "MiB", 0, stock.peakRSSMiB, ours.peakRSSMiB, false)
		row("drift repaired, p50", "s", 0, stock.driftP50, ours.driftP50, false)
		row("drift repaired, max", "s", 0, stock.driftMax, ours.driftMax, false)
		row("delete -> all gone", "s", floor.deleteS, stock.deleteS, ours.deleteS, true)
		row("status follows the workload, p50", "s", 0, 0, ours.statusP50, false)
		row("status follows the workload, p99", "s", 0, 0, ours.statusP99, false)
		b.WriteString("\n")
	}
	b.WriteString("CPU and RSS are the operator's processes (for this operator: manager + sidecar), read from /proc. " +
		"A phase's CPU runs from its start to 10 s after all Deployments are available, so that trailing reconciles count.\n")
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return plotRatios(filepath.Join(dir, "results.png"), s.sizes, results)
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
		{"RSS", func(r result) float64 { return r.rssMiB }},
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
