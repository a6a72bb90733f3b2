package addversion

import (
	"fmt"
	"io"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

// Print writes the report for a person: what changed, and the step to review before
// committing, since only a person knows where a renamed field's value went.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nAdded version %s to %s: %s is the storage version and the one watches.yaml names; %s is still served.\n",
		r.Kind.Version, r.Kind.GroupKind(), r.Kind.Version, r.Previous)
	if r.Chart != "" {
		fmt.Fprintf(w, "Chart %s copied to %s.\n", r.Chart, r.ChartDir)
		for _, a := range r.Annotations {
			fmt.Fprintf(w, "  Chart.yaml annotation %s\n", a)
		}
	}
	fmt.Fprintln(w, "\nFiles written:")
	for _, f := range r.Written {
		fmt.Fprintf(w, "  %s\n", f)
	}
	fmt.Fprintf(w, "\nTo review in %s/%s, the step from %s to %s:\n", r.ChartDir, conversion.FileName, r.Previous, r.Kind.Version)
	if len(r.Moves) == 0 && len(r.Drops) == 0 {
		fmt.Fprintln(w, "  nothing moves: the versions share one schema.")
	}
	for _, m := range r.Moves {
		fmt.Fprintf(w, "  move %s -> %s (same name, same type)\n", m.From, m.To)
	}
	for _, d := range r.Drops {
		fmt.Fprintf(w, "  drop %s\n", d)
	}
	if len(r.Drops) > 0 {
		fmt.Fprintln(w, "  A drop keeps the value in an annotation, out of the chart's values: make it a move where the value lives on, then run make manifests.")
		if r.Sample != "" {
			fmt.Fprintf(w, "  %s was converted with the step as proposed, without the dropped values: put back those a move keeps.\n", r.Sample)
		}
	}
	if r.OverridesDiffer {
		fmt.Fprintf(w, "\nThe new chart's safe default, the overrideValues that keep it from rendering cluster-scoped or RBAC objects it does not declare, is %v;\n", r.Overrides)
		fmt.Fprintf(w, "the %s entry of watches.yaml has other overrideValues, which add-version left as they are: set them.\n", r.Kind.Kind)
	}
	fmt.Fprintln(w, "\nThen run go test ./internal/gen/... ./test/charts/...")
}
