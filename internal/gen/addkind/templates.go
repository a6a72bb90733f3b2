package addkind

import (
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template/parse"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"

	"helm.sh/helm/v3/pkg/chart"
)

// templatesOf lists the templates of c and of its subcharts by their path in the chart
// ("web/charts/common/templates/_tplvalues.tpl").
func templatesOf(c *chart.Chart) map[string]string {
	out := map[string]string{}
	var walk func(c *chart.Chart, prefix string)
	walk = func(c *chart.Chart, prefix string) {
		for _, t := range c.Templates {
			out[path.Join(prefix, t.Name)] = string(t.Data)
		}
		for _, d := range c.Dependencies() {
			walk(d, path.Join(prefix, "charts", d.Name()))
		}
	}
	walk(c, c.Name())
	return out
}

// FunctionsCalled returns, for each function of chartpolicy.GuardedFunctions that a template of c (or of
// a subchart) calls, the templates that call it. Templates are parsed, not executed, so that
// a comment or a string that only names a function does not count; a template that does not
// parse is returned in unparsed, since Helm would refuse it too.
func FunctionsCalled(c *chart.Chart) (calls map[string][]string, unparsed []string) {
	return functionsCalled(c, chartpolicy.GuardedFunctions)
}

// VolatileFunctions are the template functions (Sprig's) that return a new value at each
// call: random strings, numbers, keys and certificates, salted hashes, the time. A template
// that calls one renders differently at each render, unless it keeps the first value (looking
// up the object it rendered, as Bitnami's common.secrets.passwords.manage does).
var VolatileFunctions = []string{
	"bcrypt", "genCA", "genCAWithKey", "genPrivateKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey", "htpasswd", "now", "randAlpha", "randAlphaNum", "randAscii",
	"randBytes", "randInt", "randNumeric", "shuffle", "uuidv4",
}

// functionsCalled returns, for each function of names that a template of c (or of a
// subchart) calls, the templates that call it, and the templates that do not parse.
func functionsCalled(c *chart.Chart, names []string) (calls map[string][]string, unparsed []string) {
	calls = map[string][]string{}
	for name, text := range templatesOf(c) {
		trees := map[string]*parse.Tree{}
		t := parse.New(name)
		t.Mode = parse.SkipFuncCheck
		if _, err := t.Parse(text, "", "", trees); err != nil {
			unparsed = append(unparsed, name)
			continue
		}
		found := map[string]bool{}
		for _, tree := range trees {
			walkIdentifiers(tree.Root, func(ident string) { found[ident] = true })
		}
		for _, f := range names {
			if found[f] {
				calls[f] = append(calls[f], name)
			}
		}
	}
	for _, names := range calls {
		sort.Strings(names)
	}
	sort.Strings(unparsed)
	return calls, unparsed
}

// walkIdentifiers calls f with every function name n calls.
func walkIdentifiers(n parse.Node, f func(string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, sub := range n.Nodes {
				walkIdentifiers(sub, f)
			}
		}
	case *parse.ActionNode:
		walkIdentifiers(n.Pipe, f)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, f)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, f)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, f)
	case *parse.TemplateNode:
		walkIdentifiers(n.Pipe, f)
	case *parse.PipeNode:
		if n != nil {
			for _, cmd := range n.Cmds {
				for _, arg := range cmd.Args {
					walkIdentifiers(arg, f)
				}
			}
		}
	case *parse.ChainNode:
		walkIdentifiers(n.Node, f)
	case *parse.IdentifierNode:
		f(n.Ident)
	}
}

func walkBranch(b *parse.BranchNode, f func(string)) {
	walkIdentifiers(b.Pipe, f)
	walkIdentifiers(b.List, f)
	walkIdentifiers(b.ElseList, f)
}

// hook is a Helm hook a template declares, as written in its annotations (values may be
// template expressions).
type hook struct {
	template                     string
	events, weight, deletePolicy string
}

var hookAnnotations = regexp.MustCompile(`(?m)^\s*["']?helm\.sh/(hook|hook-weight|hook-delete-policy)["']?\s*:\s*(.*?)\s*$`)

// hooksOf lists the hooks of c's templates and its subcharts', one per annotated object.
func hooksOf(c *chart.Chart) []hook {
	var hooks []hook
	for name, text := range templatesOf(c) {
		for _, doc := range strings.Split(text, "\n---") {
			h := hook{template: name}
			for _, m := range hookAnnotations.FindAllStringSubmatch(doc, -1) {
				v := strings.Trim(m[2], `"'`)
				switch m[1] {
				case "hook":
					h.events = v
				case "hook-weight":
					h.weight = v
				case "hook-delete-policy":
					h.deletePolicy = v
				}
			}
			if h.events != "" {
				hooks = append(hooks, h)
			}
		}
	}
	sort.Slice(hooks, func(i, j int) bool {
		if hooks[i].template != hooks[j].template {
			return hooks[i].template < hooks[j].template
		}
		return hooks[i].events < hooks[j].events
	})
	return hooks
}
