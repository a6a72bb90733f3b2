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

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
)

// Templates run inside the operator, with its cluster-wide rights, on values a namespace
// editor chose. So no template may read the cluster (lookup) or evaluate a string as a
// template (tpl: a value could become code) unless its chart declares it in Chart.yaml
// (chartpolicy.TemplateFunctionsAnnotation, which make add-kind writes), and none may read files
// outside its chart through .Files. The check walks the parsed templates rather than
// grepping, so that a comment or a string that merely names a function is not mistaken for
// a call.

// forbiddenFuncs are the Helm functions a template may call only if its chart declares them
// (chartpolicy.GuardedFunctions), with why.
var forbiddenFuncs = map[string]string{
	"lookup": "reads the cluster with the operator's rights",
	"tpl":    "evaluates a string, possibly a value, as a template",
}

// filesPathMethods are the methods of .Files that take a path; filesMethods also those
// that take none and read only the chart's own files.
var (
	filesPathMethods = []string{"Get", "GetBytes", "Glob", "Lines"}
	filesMethods     = append([]string{"AsConfig", "AsSecrets"}, filesPathMethods...)
)

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
		c.checkFields(n, n.Field)
	case *parse.IdentifierNode:
		if why, bad := forbiddenFuncs[n.Ident]; bad {
			c.called[n.Ident] = true
			if !slices.Contains(c.declared, n.Ident) {
				c.report(n, "%s %s, and Chart.yaml does not declare it in %s", n.Ident, why, chartpolicy.TemplateFunctionsAnnotation)
			}
		}
	case *parse.FieldNode:
		c.checkFields(n, n.Ident)
	case *parse.VariableNode:
		c.checkFields(n, n.Ident[1:])
	}
	// Text, comments, literals, dot, nil, break and continue hold nothing to check.
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
	for i, cmd := range p.Cmds {
		args := cmd.Args
		if method, ok := filesCall(args[0]); ok && slices.Contains(filesPathMethods, method) {
			// The one form whose path can be checked here: .Files.Get "literal", first
			// in its pipeline (later, the previous command's result is a further argument).
			c.checkFilesPath(cmd, method, i > 0)
			args = args[1:]
		}
		for _, arg := range args {
			c.walk(arg)
		}
	}
}

// filesCall tells whether n is a field chain through .Files that calls one of its methods,
// and which.
func filesCall(n parse.Node) (string, bool) {
	var fields []string
	switch n := n.(type) {
	case *parse.FieldNode:
		fields = n.Ident
	case *parse.VariableNode:
		fields = n.Ident[1:]
	default:
		return "", false
	}
	i := slices.Index(fields, "Files")
	if i < 0 || i != len(fields)-2 {
		return "", false
	}
	return fields[i+1], true
}

// checkFilesPath checks the arguments of a call .Files.<method>: string literals, in the chart.
func (c *templateChecker) checkFilesPath(cmd *parse.CommandNode, method string, piped bool) {
	if piped || len(cmd.Args) != 2 {
		c.report(cmd, "the path of .Files.%s must be a single string literal", method)
		return
	}
	path, ok := cmd.Args[1].(*parse.StringNode)
	if !ok {
		c.report(cmd, "the path of .Files.%s must be a string literal, not computed", method)
		return
	}
	if strings.HasPrefix(path.Text, "/") || strings.Contains(path.Text, "..") {
		c.report(cmd, "the path %q of .Files.%s leaves the chart", path.Text, method)
	}
}

// checkFields reports a field chain through .Files other than a method call walkPipe has
// checked: .Files passed on, bound to a variable or indexed cannot be followed here.
func (c *templateChecker) checkFields(n parse.Node, fields []string) {
	i := slices.Index(fields, "Files")
	if i < 0 {
		return
	}
	if i == len(fields)-2 && slices.Contains(filesMethods, fields[i+1]) && !slices.Contains(filesPathMethods, fields[i+1]) {
		return // AsConfig, AsSecrets: the chart's own files
	}
	c.report(n, "use .Files only as .Files.Method \"path\" (with %v), so that its path can be checked", filesMethods)
}

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

// No template of any chart calls lookup or tpl unless its chart declares it, no chart
// declares one it does not call (a stale declaration would hide a new use), and no template
// reads files outside its chart. The house charts declare none.
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
		if isHouseChart(chartName) && len(declared) > 0 {
			t.Errorf("%s: a house chart declares %v", chartName, declared)
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
		"parent directory":       `{{ .Files.Get "../secrets.yaml" }}`,
		"hidden parent":          `{{ .Files.Get "conf/../../x" }}`,
		"absolute path":          `{{ $.Files.Get "/etc/passwd" }}`,
		"glob out":               `{{ (.Files.Glob "../*").AsConfig }}`,
		"lines of a variable":    `{{ $root := . }}{{ $root.Files.Lines "/x" }}`,
		"computed path":          `{{ .Files.Get .Values.path }}`,
		"piped path":             `{{ .Values.path | .Files.Get }}`,
		"Files passed on":        `{{ include "x" .Files }}`,
		"Files bound":            `{{ $f := .Files }}{{ $f.Get "../x" }}`,
		"Files as dot":           `{{ with .Files }}{{ .Get "../x" }}{{ end }}`,
		"Files indexed":          `{{ index .Files "../x" }}`,
		"Files in a chain":       `{{ (.Files).Get "../x" }}`,
		"Files as a map of keys": `{{ .Files.secret }}`,
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
		"a comment":            `{{/* never lookup or tpl, nor .Files.Get "../x" */}}x`,
		"a string":             `{{ "lookup tpl .Files.Get ../x" | quote }}`,
		"text":                 `lookup: tpl`,
		"a field named so":     `{{ .Values.lookup }}{{ .Values.tpl }}`,
		"a file of the chart":  `{{ .Files.Get "conf/app.properties" | b64enc }}`,
		"a glob of the chart":  `{{ (.Files.Glob "conf/*").AsConfig | nindent 2 }}`,
		"the root's files":     `{{ $.Files.Lines "conf/hosts" }}`,
		"all the chart's":      `{{ .Files.AsSecrets }}`,
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
