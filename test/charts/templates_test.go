package charts

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
)

// Templates run inside the operator, with its cluster-wide rights, on values a namespace
// editor chose. So no template may read the cluster (lookup) or evaluate a string as a
// template (tpl: a value could become code) unless its chart declares it in Chart.yaml
// (chartpolicy.TemplateFunctionsAnnotation, which make add-kind writes). The check walks the
// parsed templates rather than grepping, so that a comment or a string that merely names a
// function is not mistaken for a call.
//
// .Files needs no rule: it holds the files of the template's own chart, loaded with it, and
// reads nothing else whatever the path (TestFilesHoldOnlyTheChart).

// forbiddenFuncs are the Helm functions a template may call only if its chart declares them
// (chartpolicy.GuardedFunctions), with why.
var forbiddenFuncs = map[string]string{
	"lookup": "reads the cluster with the operator's rights",
	"tpl":    "evaluates a string, possibly a value, as a template",
}

// helmFuncs are the names of the functions Helm gives templates (helm.sh/helm/v3/pkg/engine's
// funcMap, which is not exported): sprig's without env and expandenv, and Helm's own. Only
// the names matter: the templates are parsed, never executed.
var helmFuncs = func() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	placeholder := func(...any) any { return nil }
	for _, name := range []string{"toToml", "fromToml", "toYaml", "toYamlPretty", "fromYaml", "fromYamlArray",
		"toJson", "fromJson", "fromJsonArray", "include", "tpl", "required", "lookup"} {
		f[name] = placeholder
	}
	return f
}()

// templateProblems parses a template's text as Helm does and reports each forbidden use.
func templateProblems(name, text string) ([]string, error) {
	problems, _, err := checkTemplate(name, text, nil)
	return problems, err
}

// checkTemplate parses a template's text as Helm does and reports each forbidden use but
// those of the functions declared, and which functions of forbiddenFuncs it calls.
func checkTemplate(name, text string, declared []string) (problems []string, called map[string]bool, err error) {
	tmpl, err := template.New(name).Funcs(helmFuncs).Parse(text)
	if err != nil {
		return nil, nil, err
	}
	called = map[string]bool{}
	for _, t := range tmpl.Templates() { // the file and each of its defines
		if t.Tree != nil {
			c := &templateChecker{name: name, src: text, declared: declared, called: called}
			c.walk(t.Tree.Root)
			problems = append(problems, c.problems...)
		}
	}
	return problems, called, nil
}

type templateChecker struct {
	name, src string
	declared  []string
	called    map[string]bool
	problems  []string
}

func (c *templateChecker) report(n parse.Node, format string, args ...any) {
	line := 1 + strings.Count(c.src[:min(int(n.Position()), len(c.src))], "\n")
	c.problems = append(c.problems, fmt.Sprintf("%s:%d: %s: %s", c.name, line, n, fmt.Sprintf(format, args...)))
}

func (c *templateChecker) walk(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, sub := range n.Nodes {
				c.walk(sub)
			}
		}
	case *parse.ActionNode:
		c.walkPipe(n.Pipe)
	case *parse.IfNode:
		c.walkBranch(&n.BranchNode)
	case *parse.RangeNode:
		c.walkBranch(&n.BranchNode)
	case *parse.WithNode:
		c.walkBranch(&n.BranchNode)
	case *parse.TemplateNode:
		c.walkPipe(n.Pipe)
	case *parse.PipeNode:
		c.walkPipe(n)
	case *parse.ChainNode:
		c.walk(n.Node)
	case *parse.IdentifierNode:
		if why, bad := forbiddenFuncs[n.Ident]; bad {
			c.called[n.Ident] = true
			if !slices.Contains(c.declared, n.Ident) {
				c.report(n, "%s %s, and Chart.yaml does not declare it in %s", n.Ident, why, chartpolicy.TemplateFunctionsAnnotation)
			}
		}
	}
	// Text, comments, literals, fields, variables, dot, nil, break and continue hold no call.
}

func (c *templateChecker) walkBranch(b *parse.BranchNode) {
	c.walkPipe(b.Pipe)
	c.walk(b.List)
	c.walk(b.ElseList)
}

func (c *templateChecker) walkPipe(p *parse.PipeNode) {
	if p == nil {
		return
	}
	for _, cmd := range p.Cmds {
		for _, arg := range cmd.Args {
			c.walk(arg)
		}
	}
}

// houseChartFunctions are the guarded functions a house chart may call: the pool chart looks
// up its own StorageClass to keep the name a pool installed by chart 0.1.0 has.
var houseChartFunctions = map[string][]string{"warpdrivepool": {"lookup"}}

// chartTemplates lists the templates of a chart and of its subcharts, by path.
func chartTemplates(c *chart.Chart) map[string]string {
	out := map[string]string{}
	for _, t := range c.Templates {
		out[filepath.Join(c.ChartFullPath(), t.Name)] = string(t.Data)
	}
	for _, d := range c.Dependencies() {
		for name, text := range chartTemplates(d) {
			out[name] = text
		}
	}
	return out
}

// No template of any chart calls lookup or tpl unless its chart declares it, and no chart
// declares one it does not call (a stale declaration would hide a new use). The house charts
// declare none but houseChartFunctions.
func TestTemplatesUseNoForbiddenFunctions(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(root, "helm-charts", "*", "Chart.yaml"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no charts found: %v", err)
	}
	for _, d := range dirs {
		chartName := filepath.Base(filepath.Dir(d))
		c := loadChart(t, chartName)
		declared, err := chartpolicy.TemplateFunctions(c)
		if err != nil {
			t.Error(err)
		}
		if isHouseChart(chartName) && !slices.Equal(declared, houseChartFunctions[chartName]) {
			t.Errorf("%s: a house chart declares %v, want %v", chartName, declared, houseChartFunctions[chartName])
		}
		templates := chartTemplates(c)
		if len(templates) == 0 {
			t.Errorf("%s: no templates found", chartName)
		}
		called := map[string]bool{}
		for name, text := range templates {
			problems, calls, err := checkTemplate(name, text, declared)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			for _, p := range problems {
				t.Error(p)
			}
			for f := range calls {
				called[f] = true
			}
		}
		for _, f := range declared {
			if !called[f] {
				t.Errorf("%s: Chart.yaml declares %s in %s, which no template calls", chartName, f, chartpolicy.TemplateFunctionsAnnotation)
			}
		}
	}
}

// The checker catches each forbidden use however it is spelt, and nothing that only
// mentions one.
func TestTemplateChecker(t *testing.T) {
	forbidden := map[string]string{
		"lookup":                 `{{ (lookup "v1" "Secret" "kube-system" "x").data }}`,
		"lookup in a define":     `{{- define "x" -}}{{ lookup "v1" "Secret" "" "" | toYaml }}{{- end }}`,
		"lookup in an if":        `{{ if true }}{{ else if lookup "v1" "Namespace" "" "kube-system" }}x{{ end }}`,
		"tpl":                    `{{ tpl .Values.image . }}`,
		"tpl in a pipeline":      `{{ .Values.image | tpl $ | quote }}`,
		"tpl in parentheses":     `{{ with (tpl "x" .) }}{{ . }}{{ end }}`,
		"tpl as an argument":     `{{ include "x" (tpl .Values.x .) }}`,
		"lookup in a range":      `{{ range $k, $v := (lookup "v1" "Secret" "" "").items }}{{ $k }}{{ end }}`,
		"lookup in a with chain": `{{ with (lookup "v1" "Secret" "" "x").data }}{{ .key }}{{ end }}`,
	}
	for name, text := range forbidden {
		problems, err := templateProblems(name, text)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if len(problems) == 0 {
			t.Errorf("%s: %s passed", name, text)
		}
	}

	allowed := map[string]string{
		"a comment":            `{{/* never lookup or tpl */}}x`,
		"a string":             `{{ "lookup tpl" | quote }}`,
		"text":                 `lookup: tpl`,
		"a field named so":     `{{ .Values.lookup }}{{ .Values.tpl }}{{ $v := .Values }}{{ $v.tpl }}`,
		"a file of the chart":  `{{ .Files.Get "conf/app.properties" | b64enc }}`,
		"a glob of the chart":  `{{ (.Files.Glob "conf/*").AsConfig | nindent 2 }}`,
		"dashboards":           `{{ range $path, $_ := .Files.Glob "dashboards/*.json" }}{{ $.Files.Get $path }}{{ end }}`,
		"a path from values":   `{{ .Files.Get (printf "conf/%s.yaml" .Values.profile) }}`,
		"helpers and includes": `{{- define "a" -}}{{ include "b" . | trunc 63 | required "x" | toYaml }}{{- end }}`,
	}
	for name, text := range allowed {
		problems, err := templateProblems(name, text)
		if err != nil || len(problems) > 0 {
			t.Errorf("%s: %s refused: %v %v", name, text, err, problems)
		}
	}

	// A function the chart declares passes, and is reported as called.
	problems, called, err := checkTemplate("declared", `{{ tpl .Values.x . }}{{ lookup "v1" "Secret" "" "" }}`, []string{"tpl"})
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "lookup") || !called["tpl"] || !called["lookup"] {
		t.Errorf("tpl declared: problems %v, called %v, error %v; want lookup alone refused, both called", problems, called, err)
	}

	// Parsing fails, rather than passing unchecked, on what Helm would not parse.
	for _, text := range []string{`{{ env "HOME" }}`, `{{ nosuchfunc }}`, `{{ if }}`} {
		if _, err := templateProblems("bad", text); err == nil {
			t.Errorf("%s parsed", text)
		}
	}
}

// The functions the checker refuses are those a chart declares (chartpolicy.GuardedFunctions).
func TestForbiddenFunctionsAreTheGuardedOnes(t *testing.T) {
	names := slices.Sorted(maps.Keys(forbiddenFuncs))
	if want := slices.Sorted(slices.Values(chartpolicy.GuardedFunctions)); !slices.Equal(names, want) {
		t.Errorf("the checker refuses %v, chartpolicy.GuardedFunctions are %v", names, want)
	}
}

// .Files is the chart's own files, as loaded with it (what make add-kind copied into
// helm-charts/; Helm's loader includes a link's target as a file of the chart, for review):
// a map looked up by name, so no path, literal or computed from the values, reads anything
// else. This is why the template check has no rule on .Files; it fails if Helm changes that.
func TestFilesHoldOnlyTheChart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secret.txt"), "outside the chart")
	chartPath := filepath.Join(dir, "files")
	writeFile(t, filepath.Join(chartPath, "Chart.yaml"), "apiVersion: v2\nname: files\nversion: 1.0.0\n")
	writeFile(t, filepath.Join(chartPath, "conf", "app.conf"), "inside the chart")
	writeFile(t, filepath.Join(chartPath, "templates", "cm.yaml"), `apiVersion: v1
kind: ConfigMap
metadata:
  name: files
data:
  inside: {{ .Files.Get "conf/app.conf" | quote }}
  parent: {{ .Files.Get "../secret.txt" | quote }}
  throughTheChart: {{ .Files.Get "conf/../../secret.txt" | quote }}
  absolute: {{ .Files.Get (printf "%s/secret.txt" .Values.outside) | quote }}
  bytes: {{ .Files.GetBytes .Values.relative | toString | quote }}
  lines: {{ .Files.Lines "../secret.txt" | join "" | quote }}
  globParent: {{ (.Files.Glob "../*").AsConfig | quote }}
  globAll: {{ range $path, $_ := .Files.Glob "**" }}{{ $path }} {{ end }}
`)
	c, err := loader.LoadDir(chartPath)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"outside": dir, "relative": "../secret.txt"}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: "r", Namespace: namespace}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(out["files/templates/cm.yaml"]), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["inside"] != "inside the chart" {
		t.Errorf(".Files.Get of the chart's own file gave %q", cm.Data["inside"])
	}
	for _, k := range []string{"parent", "throughTheChart", "absolute", "bytes", "lines", "globParent"} {
		if v := cm.Data[k]; v != "" && v != "{}" {
			t.Errorf("%s: read %q, from outside the chart", k, v)
		}
	}
	if got := strings.Fields(cm.Data["globAll"]); !slices.Equal(got, []string{"conf/app.conf"}) {
		t.Errorf(`.Files.Glob "**" lists %v, want only the chart's own conf/app.conf`, got)
	}
}
