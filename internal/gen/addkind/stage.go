package addkind

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
)

// Chart is a chart read from where a person gave it, with the Chart.yaml annotations its
// kind needs set, not yet written: make add-kind copies it into a new chart directory, make
// add-version over the kind's current one.
type Chart struct {
	// Chart is the chart as read, before its annotations were set.
	Chart *chart.Chart
	// Annotations are the changes to its Chart.yaml ("key: old → new", "key: value").
	Annotations []string

	src   string
	files []chartFile
}

// PrepareChart reads the chart at src, a directory or a packaged chart (.tgz), but for the
// record of the versions its kind has had (conversion.IsVersionHistory: a new kind has one version), for the kind kind, and sets the annotations of its Chart.yaml: crdgen's plural, the category, and
// chartpolicy's template functions. It refuses a chart that does not load, declares a
// dependency it does not vendor, or has a template that does not parse. kept are the
// crdgen annotations of the kind's current chart, when src replaces it: a new chart without
// them keeps the CRD's names, columns and scale subresource, and one with its own keeps
// those.
func PrepareChart(src, kind string, kept map[string]string) (*Chart, error) {
	all, err := readChartFiles(src)
	if err != nil {
		return nil, fmt.Errorf("reading chart %s: %w", src, err)
	}
	var files []chartFile
	for _, f := range all {
		if !conversion.IsVersionHistory(f.Name) {
			files = append(files, f)
		}
	}
	c, err := loadChartFiles(files)
	if err != nil {
		return nil, fmt.Errorf("chart %s does not load: %w", src, err)
	}
	if missing := missingDependencies(c); len(missing) > 0 {
		return nil, fmt.Errorf("chart %s declares dependencies that are not vendored in its charts/ directory, "+
			"and the operator never downloads one:\n  %s\nrun `helm dependency build %s` where there is network, then run make again",
			src, strings.Join(missing, "\n  "), src)
	}

	calls, unparsed := FunctionsCalled(c)
	if len(unparsed) > 0 {
		return nil, fmt.Errorf("chart %s: templates that do not parse: %s", src, strings.Join(unparsed, ", "))
	}
	has := func(key string) bool { _, ok := c.Metadata.Annotations[key]; return ok }
	plural := Plural(kind)
	if p := kept[crdgen.AnnotationPlural]; p != "" {
		plural = p // the CRD's name must not change with the chart
	}
	want := []annotation{{crdgen.AnnotationPlural, plural}}
	for _, key := range slices.Sorted(maps.Keys(kept)) {
		if key != crdgen.AnnotationPlural && strings.HasPrefix(key, crdgen.AnnotationPrefix) && !has(key) {
			want = append(want, annotation{key, kept[key]})
		}
	}
	if _, ok := kept[crdgen.AnnotationCategories]; !ok && !has(crdgen.AnnotationCategories) {
		want = append(want, annotation{crdgen.AnnotationCategories, Category})
	}
	var used []string
	for _, f := range chartpolicy.GuardedFunctions {
		if len(calls[f]) > 0 {
			used = append(used, f)
		}
	}
	if len(used) > 0 || c.Metadata.Annotations[chartpolicy.TemplateFunctionsAnnotation] != "" {
		want = append(want, annotation{chartpolicy.TemplateFunctionsAnnotation, strings.Join(used, ",")})
	}

	p := &Chart{Chart: c, src: src, files: files}
	edited := false
	for i, f := range files {
		if f.Name == "Chart.yaml" {
			if files[i].Data, p.Annotations, err = setAnnotations(f.Data, want); err != nil {
				return nil, err
			}
			edited = true
		}
	}
	if !edited {
		return nil, fmt.Errorf("chart %s has no Chart.yaml", src)
	}
	return p, nil
}

// Write writes the chart's files under dir, which must not exist yet.
func (p *Chart) Write(dir string) error {
	return writeChartFiles(dir, p.files)
}

// CheckRBAC refuses the chart, as Add does, when it renders Roles or RoleBindings it does
// not declare whatever its booleans, and returns the overrideValues of its safe default
// (none when it needs none), which a kind's watches.yaml entry should have: a new version's
// chart is held to what a new kind's is.
func (p *Chart) CheckRBAC(kind string) (map[string]string, error) {
	safe := findSafeDefault(p.Chart)
	if err := refuseUndeclaredRBAC(safe, p.src, kind); err != nil {
		return nil, err
	}
	return safe.Overrides, nil
}
