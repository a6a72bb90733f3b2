package chartpolicy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template/parse"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// An Object is one object a chart can render, whatever its values: a YAML document with a
// top-level apiVersion and kind in a template, in a helper ({{ define }}) a template may
// include, or in the crds/ directory (Helm creates those on install), of the chart or of a
// subchart or library chart it vendors. The templates are read, not rendered, so an object
// found here may never be rendered by any values; an object the values alone describe (such
// as a chart's "extraObjects") is not found.
type Object struct {
	// File is the template, relative to the chart: "templates/hpa.yaml",
	// "charts/common/templates/_helpers.tpl", "crds/crontabs.yaml".
	File string
	// Define is the helper the object is in, if it is in one.
	Define string
	// APIVersion is the apiVersion the template writes; empty when a template expression
	// computes it (such as a library chart's capabilities helper).
	APIVersion string
	// Kind is the kind the template writes, or one a template expression names as a string
	// ({{ ternary "StatefulSet" "Deployment" .Values.persistent }}); empty when the values
	// alone say which kind.
	Kind string
	// Expr is the template expression of a kind it computes.
	Expr string
	// Guards are the conditions the object is rendered under, outermost first:
	// "if .Values.hpa.enabled", "range .Values.hooks", "subchart redis: redis.enabled".
	Guards []string
	// Hook tells whether the object has the helm.sh/hook annotation; Hooks are its hooks
	// when the template writes them (and not an expression).
	Hook  bool
	Hooks []string
}

// HelmTestOnly tells whether the object is a hook of helm test alone: Helm creates it only when
// someone runs helm test, which the helm-operator never does.
func (o Object) HelmTestOnly() bool {
	if !o.Hook || len(o.Hooks) == 0 {
		return false
	}
	for _, h := range o.Hooks {
		if h != "test" && h != "test-success" && h != "test-failure" {
			return false
		}
	}
	return true
}

// GroupVersionKind is the object's kind with the version the template writes (an empty
// group and version when a template computes them).
func (o Object) GroupVersionKind() schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return gv.WithKind(o.Kind)
}

// Where says where the object is: its file, helper and guards.
func (o Object) Where() string {
	s := o.File
	if o.Define != "" {
		s += fmt.Sprintf(" (helper %q)", o.Define)
	}
	if len(o.Guards) > 0 {
		s += " when " + strings.Join(o.Guards, ", ")
	}
	return s
}

// Objects returns every object c and its subcharts can render.
func Objects(c *chart.Chart) ([]Object, error) {
	out, err := chartObjects(c, "", nil)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var unique []Object
	for _, o := range out {
		key := fmt.Sprintf("%q", []any{o.File, o.Define, o.APIVersion, o.Kind, o.Expr, o.Guards, o.Hook, o.Hooks})
		if !seen[key] {
			seen[key] = true
			unique = append(unique, o)
		}
	}
	return unique, nil
}

func chartObjects(c *chart.Chart, prefix string, guards []string) ([]Object, error) {
	var out []Object
	for _, f := range c.Templates {
		objs, err := templateObjects(prefix+f.Name, string(f.Data), guards)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", c.Name(), err)
		}
		out = append(out, objs...)
	}
	for _, f := range c.CRDs() {
		// Helm does not template crds/: the file is the objects.
		var s skeleton
		s.b.WriteString(string(f.Data))
		out = append(out, s.objects(prefix+f.Name, "", guards)...)
	}
	for _, d := range c.Dependencies() {
		g := guards
		if c.Metadata != nil {
			for _, dep := range c.Metadata.Dependencies {
				if dep.Name == d.Name() && (dep.Condition != "" || len(dep.Tags) > 0) {
					cond := dep.Condition
					if len(dep.Tags) > 0 {
						cond = strings.TrimPrefix(cond+", tags "+strings.Join(dep.Tags, ", "), ", ")
					}
					g = slices.Concat(guards, []string{"subchart " + d.Name() + ": " + cond})
				}
			}
		}
		objs, err := chartObjects(d, prefix+"charts/"+d.Name()+"/", g)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// templateObjects parses one template file (without Helm's functions: only the structure
// matters) and finds the objects of its output, if Helm renders it as manifests, and of its
// helpers.
func templateObjects(file, text string, guards []string) ([]Object, error) {
	trees := map[string]*parse.Tree{}
	t := parse.New(file)
	t.Mode = parse.SkipFuncCheck
	if _, err := t.Parse(text, "", "", trees); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", file, err)
	}
	names := make([]string, 0, len(trees))
	for name := range trees {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []Object
	for _, name := range names {
		define := name
		if name == file {
			// Helm renders neither partials ("_helpers.tpl") nor NOTES.txt as manifests.
			base := path.Base(file)
			if strings.HasPrefix(base, "_") || strings.EqualFold(base, "NOTES.txt") {
				continue
			}
			define = ""
		}
		var s skeleton
		s.walk(trees[name].Root, guards)
		out = append(out, s.objects(file, define, guards)...)
	}
	return out, nil
}

// A skeleton is a template's output with each expression replaced by a placeholder
// ("\x01<index>\x02") and each branch of an if, with or range between two "\x00", so that the
// alternatives of a value ({{ if }}policy/v1{{ else }}policy/v1beta1{{ end }}) stay apart;
// marks record the guards in force from each offset on.
type skeleton struct {
	b     strings.Builder
	marks []mark
	exprs []expr
}

type mark struct {
	at     int
	guards []string
}

// expr is a placeholder's expression and the strings it names as arguments.
type expr struct {
	text    string
	strings []string
}

func (s *skeleton) guard(guards []string) {
	s.marks = append(s.marks, mark{at: s.b.Len(), guards: guards})
}

func (s *skeleton) guardsAt(off int) []string {
	i := sort.Search(len(s.marks), func(i int) bool { return s.marks[i].at > off }) - 1
	if i < 0 {
		return nil
	}
	return s.marks[i].guards
}

func (s *skeleton) placeholder(e expr) {
	fmt.Fprintf(&s.b, "\x01%d\x02", len(s.exprs))
	s.exprs = append(s.exprs, e)
}

func (s *skeleton) branch(list *parse.ListNode, guards []string, cond string) {
	if list == nil {
		return
	}
	inner := slices.Concat(guards, []string{cond})
	s.b.WriteByte(0)
	s.guard(inner)
	s.walk(list, inner)
	s.b.WriteByte(0)
	s.guard(guards)
}

func (s *skeleton) walk(n parse.Node, guards []string) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		if len(s.marks) == 0 {
			s.guard(guards)
		}
		for _, c := range n.Nodes {
			s.walk(c, guards)
		}
	case *parse.TextNode:
		s.b.Write(n.Text)
	case *parse.ActionNode:
		if len(n.Pipe.Decl) > 0 { // {{ $x := ... }} writes nothing
			return
		}
		s.placeholder(expr{text: n.String(), strings: stringArgs(n.Pipe)})
	case *parse.TemplateNode:
		s.placeholder(expr{text: n.String()})
	case *parse.IfNode:
		s.branch(n.List, guards, "if "+n.Pipe.String())
		s.branch(n.ElseList, guards, "not "+n.Pipe.String())
	case *parse.WithNode:
		s.branch(n.List, guards, "with "+n.Pipe.String())
		s.branch(n.ElseList, guards, "without "+n.Pipe.String())
	case *parse.RangeNode:
		s.branch(n.List, guards, "range "+n.Pipe.String())
		s.branch(n.ElseList, guards, "empty "+n.Pipe.String())
	}
}

// stringArgs are the string constants of a pipeline, but the names of the templates it
// includes.
func stringArgs(p *parse.PipeNode) []string {
	var out []string
	for _, c := range p.Cmds {
		skip := false
		if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
			skip = id.Ident == "include" || id.Ident == "template" || id.Ident == "tpl"
		}
		for i, a := range c.Args {
			switch a := a.(type) {
			case *parse.StringNode:
				if !(skip && i == 1) {
					out = append(out, a.Text)
				}
			case *parse.PipeNode:
				out = append(out, stringArgs(a)...)
			}
		}
	}
	return out
}

var (
	kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	hookLine = regexp.MustCompile(`^\s*["']?helm\.sh/hook["']?\s*:(.*)$`)
)

// value is one alternative of a top-level key's value: the text, where it starts, and
// whether an expression writes (part of) it.
type value struct {
	text      string
	at        int
	templated bool
}

// alternatives splits the value of a line's key at the branch boundaries.
func alternatives(v string, at int) []value {
	var out []value
	for piece := range strings.SplitSeq(v, "\x00") {
		text := piece
		if i := strings.Index(text, " #"); i >= 0 {
			text = text[:i]
		}
		text = strings.Trim(strings.TrimSpace(text), `"'`)
		if text != "" {
			out = append(out, value{text: text, at: at, templated: strings.Contains(text, "\x01")})
		}
		at += len(piece) + 1
	}
	return out
}

// objects finds the documents of the skeleton that have a top-level apiVersion and kind.
func (s *skeleton) objects(file, define string, base []string) []Object {
	type doc struct {
		apiVersions, kinds []value
		hook               bool
		hooks              []string
	}
	var docs []doc
	cur := doc{}
	text := s.b.String()
	at := 0
	for line := range strings.SplitSeq(text, "\n") {
		start := at
		at += len(line) + 1
		l := strings.TrimLeft(line, "\x00")
		off := start + len(line) - len(l)
		switch {
		case strings.HasPrefix(l, "---"):
			docs = append(docs, cur)
			cur = doc{}
		case strings.HasPrefix(l, "apiVersion:") && cur.apiVersions == nil:
			cur.apiVersions = alternatives(l[len("apiVersion:"):], off+len("apiVersion:"))
		case strings.HasPrefix(l, "kind:") && cur.kinds == nil:
			cur.kinds = alternatives(l[len("kind:"):], off+len("kind:"))
		default:
			if m := hookLine.FindStringSubmatch(strings.ReplaceAll(l, "\x00", "")); m != nil {
				cur.hook = true
				if v := strings.TrimSpace(m[1]); v != "" && !strings.Contains(v, "\x01") {
					for h := range strings.SplitSeq(strings.Trim(v, `"'`), ",") {
						cur.hooks = append(cur.hooks, strings.TrimSpace(h))
					}
				}
			}
		}
	}
	docs = append(docs, cur)

	var out []Object
	for _, d := range docs {
		if len(d.apiVersions) == 0 {
			continue
		}
		for _, k := range d.kinds {
			o := Object{File: file, Define: define, Hook: d.hook, Hooks: d.hooks}
			guards := s.guardsAt(k.at)
			var kinds []Object
			if !k.templated {
				if !kindName.MatchString(k.text) || k.text == "List" {
					continue
				}
				o.Kind = k.text
				kinds = append(kinds, o)
			} else {
				o.Expr = s.source(k.text)
				for _, str := range s.strings(k.text) {
					if kindName.MatchString(str) {
						named := o
						named.Kind = str
						kinds = append(kinds, named)
					}
				}
				if len(kinds) == 0 {
					kinds = append(kinds, o)
				}
			}
			for _, a := range d.apiVersions {
				g := guards
				for _, extra := range s.guardsAt(a.at) {
					if !slices.Contains(g, extra) {
						g = slices.Concat(g, []string{extra})
					}
				}
				apiVersion := ""
				if !a.templated {
					if _, err := schema.ParseGroupVersion(a.text); err != nil {
						continue
					}
					apiVersion = a.text
				}
				for _, o := range kinds {
					o.APIVersion = apiVersion
					o.Guards = g
					if len(o.Guards) == 0 {
						o.Guards = base
					}
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// placeholders finds the placeholders of a value.
var placeholders = regexp.MustCompile("\x01([0-9]+)\x02")

// source is a value with its expressions written back.
func (s *skeleton) source(v string) string {
	return placeholders.ReplaceAllStringFunc(v, func(p string) string {
		i, _ := strconv.Atoi(p[1 : len(p)-1])
		return s.exprs[i].text
	})
}

// strings are the string arguments of the expressions of a value.
func (s *skeleton) strings(v string) []string {
	var out []string
	for _, m := range placeholders.FindAllStringSubmatch(v, -1) {
		i, _ := strconv.Atoi(m[1])
		out = append(out, s.exprs[i].strings...)
	}
	return out
}
