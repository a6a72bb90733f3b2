// Package docs checks what the docs, the code's comments and the scripts cite: tests by
// name, files and directories by path, doc sections by title, make targets, and Go
// identifiers. A citation outlives what it cites unless a test fails when the cited thing
// is renamed or moved.
package docs

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const root = "../.."

// topLevel are the directories a cited path may start with.
var topLevel = []string{"cmd", "config", "docs", "hack", "helm-charts", "internal", "sidecar", "test"}

var (
	// testName is a Go test function's name as the docs and comments cite it.
	testName = regexp.MustCompile(`\b(Test[A-Z][A-Za-z0-9_]*)`)
	// repoPath is a path inside the repository: a top-level directory, then a name.
	repoPath = regexp.MustCompile(`(?:^|[^\w./-])((?:` + strings.Join(topLevel, "|") + `)/[\w./*-]*[\w*])`)
	// goFile is a Go file cited by its name alone, as a package's comments cite its files.
	goFile = regexp.MustCompile(`(?:^|[^\w./-])([a-z][\w]*\.go)\b`)
	// goIdent is a Go identifier after a package's path (internal/chartpolicy.HasHooks).
	goIdent = regexp.MustCompile(`\.[A-Z]\w*$`)
	// section is a doc section cited by title: docs/x.md, "Title" (or docs/x.md's "Title").
	section = regexp.MustCompile(`([\w./-]+\.md)(?:'s|,) "([^"]+)"`)
	// ordinal is a doc cited by the ordinal of a run in a notebook: a citation that the
	// notebook's next run can make wrong, where a section title of a stable page cannot.
	ordinal = regexp.MustCompile(`(\w+\.md\)?,? "?(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)\b)`)
	// anchor is a Markdown link to a section: (path.md#anchor).
	anchor = regexp.MustCompile(`\]\(([\w./-]*\.md)#([\w-]+)\)`)
)

// citingFiles are the files whose text is checked: the docs, and the Go code with its
// comments (tests included), the Makefile and the scripts.
func citingFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", ".cluster", "bundle", "testdata", "profiles":
				return filepath.SkipDir
			}
			if strings.HasSuffix(rel, "/testdata") || strings.HasPrefix(rel, "helm-charts/") {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "test/docs/citations_test.go" {
			return nil // its examples are no citations
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh":
			out = append(out, rel)
		}
		if rel == "Makefile" || rel == "Dockerfile" || filepath.Dir(rel) == ".ci" {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// citation is one thing cited, and where.
type citation struct {
	what, where string
}

// scan returns every citation of re's first group (and second, if any, joined by "#") in
// the files, with the file and line that cite it. Of a Go file only the comments are read:
// its strings name the files of the trees its tests make.
func scan(t *testing.T, files []string, re *regexp.Regexp) []citation {
	t.Helper()
	var out []citation
	for _, f := range files {
		lines := citingLines(t, f)
		for i, l := range lines {
			for _, m := range re.FindAllStringSubmatch(l.text, -1) {
				out = append(out, citation{cited(m), fmt.Sprintf("%s:%d", f, l.n)})
			}
			// A citation a Markdown paragraph wraps, cut at its line's end, is found in
			// the line and the next joined.
			if !strings.HasSuffix(f, ".md") || i+1 == len(lines) {
				continue
			}
			joined := l.text + " " + strings.TrimLeft(lines[i+1].text, " \t>")
			for _, m := range re.FindAllStringSubmatchIndex(joined, -1) {
				if m[0] < len(l.text) && m[1] > len(l.text) {
					out = append(out, citation{cited(submatches(joined, m)), fmt.Sprintf("%s:%d", f, l.n)})
				}
			}
		}
	}
	return out
}

// cited is what a match of a citation's pattern cites: its first group, then "#" and its
// second, if any.
func cited(m []string) string {
	if len(m) > 2 {
		return m[1] + "#" + m[2]
	}
	return m[1]
}

// submatches are the groups of text that the indexes m of a match name.
func submatches(text string, m []int) []string {
	out := make([]string, 0, len(m)/2)
	for i := 0; i+1 < len(m); i += 2 {
		if m[i] < 0 {
			out = append(out, "")
			continue
		}
		out = append(out, text[m[i]:m[i+1]])
	}
	return out
}

// line is one line of text of a file, numbered from 1.
type line struct {
	n    int
	text string
}

// citingLines are the lines of f that may cite: every line, or a Go file's comment lines.
func citingLines(t *testing.T, f string) []line {
	t.Helper()
	path := filepath.Join(root, f)
	var out []line
	if strings.HasSuffix(f, ".go") {
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range file.Comments {
			for _, c := range g.List {
				n := fset.Position(c.Pos()).Line
				for i, text := range strings.Split(c.Text, "\n") {
					out = append(out, line{n + i, text})
				}
			}
		}
		return out
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; s.Scan(); n++ {
		out = append(out, line{n, s.Text()})
	}
	return out
}

// testFuncs are the names of every Test function of the repository.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	for _, f := range citingFiles(t) {
		if !strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
	}
	return names
}

// report fails t with each missing citation, grouped by what is cited.
func report(t *testing.T, kind string, missing []citation) {
	t.Helper()
	by := map[string][]string{}
	for _, c := range missing {
		by[c.what] = append(by[c.what], c.where)
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Errorf("%s %q does not exist; cited at %s", kind, k, strings.Join(by[k], ", "))
	}
}

// Every test cited by name exists.
func TestCitedTestsExist(t *testing.T) {
	tests := testFuncs(t)
	if len(tests) < 50 {
		t.Fatalf("only %d test functions found: the scan is broken", len(tests))
	}
	var missing []citation
	for _, c := range scan(t, citingFiles(t), testName) {
		if !tests[c.what] && !runPattern(tests, c) {
			missing = append(missing, c)
		}
	}
	report(t, "test", missing)
}

// runPattern reports whether c is a prefix of a test's name cited by a `go test -run`
// pattern (the Makefile's), which selects every test it begins.
func runPattern(tests map[string]bool, c citation) bool {
	if !strings.HasPrefix(c.where, "Makefile:") {
		return false
	}
	for name := range tests {
		if strings.HasPrefix(name, c.what) {
			return true
		}
	}
	return false
}

// Every path cited exists: files and directories from the repository's root, and Go files
// cited by name alone somewhere in the repository.
func TestCitedPathsExist(t *testing.T) {
	files := citingFiles(t)
	var missing []citation
	for _, c := range scan(t, files, repoPath) {
		p := goIdent.ReplaceAllString(strings.TrimRight(c.what, "."), "")
		if strings.ContainsAny(p, "*<>{}$") || strings.Contains(p, "...") {
			continue // a pattern, not a path
		}
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			missing = append(missing, citation{p, c.where})
		}
	}
	report(t, "path", missing)

	goFiles := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			goFiles[d.Name()] = true
		}
		if d != nil && d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	missing = nil
	for _, c := range scan(t, files, goFile) {
		if !goFiles[c.what] {
			missing = append(missing, c)
		}
	}
	report(t, "Go file", missing)
}

// headings are the section titles of a Markdown file, and their anchors as GitHub makes them.
func headings(t *testing.T, path string) (titles []string, anchors map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return nil, nil
	}
	anchors = map[string]bool{}
	inCode := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		titles = append(titles, title)
		anchors[githubAnchor(title)] = true
	}
	return titles, anchors
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces as dashes, and
// punctuation but dashes and underscores dropped.
func githubAnchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Every doc section cited exists: by title (docs/x.md, "Title": a heading of that file
// that begins with the title, in any case) and by Markdown anchor.
func TestCitedSectionsExist(t *testing.T) {
	files := citingFiles(t)
	var missing []citation
	for _, c := range scan(t, files, section) {
		doc, title, _ := strings.Cut(c.what, "#")
		path := resolve(doc, c.where)
		titles, _ := headings(t, path)
		if titles == nil {
			missing = append(missing, citation{c.what, c.where})
			continue
		}
		found := false
		for _, h := range titles {
			if strings.HasPrefix(strings.ToLower(h), strings.ToLower(title)) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, citation{path + ", \"" + title + "\"", c.where})
		}
	}
	for _, c := range scan(t, files, anchor) {
		doc, a, _ := strings.Cut(c.what, "#")
		path := resolve(doc, c.where)
		if _, anchors := headings(t, path); !anchors[a] {
			missing = append(missing, citation{path + "#" + a, c.where})
		}
	}
	for _, c := range scan(t, files, ordinal) {
		missing = append(missing, citation{c.what + " (a run's ordinal: cite a section title)", c.where})
	}
	report(t, "section", missing)
}

// resolve is the repository path of doc as the file at where cites it: from the root if it
// starts with a top-level directory, else relative to the citing file's directory.
func resolve(doc, where string) string {
	for _, d := range topLevel {
		if strings.HasPrefix(doc, d+"/") {
			return doc
		}
	}
	if doc == "README.md" && !strings.HasPrefix(where, "docs/") {
		return doc
	}
	file, _, _ := strings.Cut(where, ":")
	return filepath.Clean(filepath.Join(filepath.Dir(file), doc))
}

// makeTargets are the Makefile's rule names, with the variables they are declared by
// ($(LOCALBIN)/kwok) expanded as from the repository's root (bin/kwok).
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CURDIR": "."}
	assign := regexp.MustCompile(`^(?:export\s+)?(\w+)\s*[?:]?=\s*(.*)$`)
	rule := regexp.MustCompile(`^([^\s#.][^:=]*?)\s*&?::?(?:[^=]|$)`)
	ref := regexp.MustCompile(`\$\((\w+)\)`)
	expand := func(s string) string {
		for i := 0; i < 10 && ref.MatchString(s); i++ {
			s = ref.ReplaceAllStringFunc(s, func(r string) string { return vars[r[2:len(r)-1]] })
		}
		return s
	}
	targets := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := assign.FindStringSubmatch(l); m != nil {
			vars[m[1]] = m[2]
			continue
		}
		if m := rule.FindStringSubmatch(l); m != nil {
			for _, name := range strings.Fields(expand(m[1])) {
				targets[strings.TrimPrefix(name, "./")] = true
			}
		}
	}
	return targets
}

var (
	// codeSpan is a Markdown code span, as docs and comments quote commands and code in.
	codeSpan = regexp.MustCompile("`([^`]+)`")
	// makeCommand is make's arguments in a command: flags, variables, then targets.
	makeCommand = regexp.MustCompile(`(?:^|[\s;&|(])(?:make|\$\(MAKE\))((?:\s+[-\w./$()=]+)+)`)
	// makeProse is a target cited in prose: make, then a name with a dash (make node-up),
	// which English does not follow make with.
	makeProse = regexp.MustCompile(`\bmake\s+([a-z]+(?:-[a-z]+)+)\b`)
	// targetName is a make target's name as cited.
	targetName = regexp.MustCompile(`^[a-z][\w./-]*$`)
	// quoted is a shell string.
	quoted = regexp.MustCompile(`'[^']*'|"[^"]*"`)
)

// makeCitations are the make targets that lines cite: every target of a command in a code
// span, a script's code line or a Markdown code block, and those of prose that are names
// with a dash.
func makeCitations(t *testing.T, files []string) []citation {
	t.Helper()
	var out []citation
	add := func(args, where string) {
		for _, a := range strings.Fields(args) {
			if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
				continue // a flag, a variable
			}
			if !targetName.MatchString(a) {
				break // the command's end
			}
			out = append(out, citation{a, where})
		}
	}
	for _, f := range files {
		script := strings.HasSuffix(f, ".sh") || f == "Makefile" || strings.HasPrefix(f, ".ci/")
		fenced := false
		for _, l := range citingLines(t, f) {
			where := fmt.Sprintf("%s:%d", f, l.n)
			prose := l.text
			if strings.HasSuffix(f, ".md") && strings.HasPrefix(l.text, "```") {
				fenced = !fenced
			}
			if cmd := strings.TrimPrefix(strings.TrimSpace(l.text), "$ "); fenced && strings.HasPrefix(cmd, "make ") {
				// A command of a Markdown code block, then maybe a comment.
				cmd, _, _ = strings.Cut(cmd, " #")
				add(makeCommand.FindStringSubmatch(cmd)[1], where)
				continue
			}
			if script {
				// A script's code runs make; its comments and strings cite it.
				code, comment, _ := strings.Cut(" "+l.text, " #")
				prose = comment + " " + strings.Join(quoted.FindAllString(code, -1), " ")
				for _, m := range makeCommand.FindAllStringSubmatch(quoted.ReplaceAllString(code, "''"), -1) {
					add(m[1], where)
				}
			}
			for _, span := range codeSpan.FindAllStringSubmatch(prose, -1) {
				if strings.HasPrefix(span[1], "make ") {
					add(makeCommand.FindStringSubmatch(span[1])[1], where)
				}
			}
			for _, m := range makeProse.FindAllStringSubmatch(codeSpan.ReplaceAllString(prose, ""), -1) {
				out = append(out, citation{m[1], where})
			}
		}
	}
	return out
}

// Every make target cited exists in the Makefile: in commands of the docs, the comments,
// the scripts and CI, and in prose (make cluster-up).
func TestCitedMakeTargetsExist(t *testing.T) {
	targets := makeTargets(t)
	for _, want := range []string{"test", "demo", "bin/kustomize"} {
		if !targets[want] {
			t.Fatalf("the Makefile's rule %q not found: the parse is broken", want)
		}
	}
	var missing []citation
	for _, c := range makeCitations(t, citingFiles(t)) {
		if !targets[c.what] {
			missing = append(missing, c)
		}
	}
	report(t, "make target", missing)
}

// decls are the identifiers the module's Go code declares.
type decls struct {
	// pkgs are the names each package declares at its top level, by the package's name.
	pkgs map[string]map[string]bool
	// members are the methods and fields of each type, by the type's name (of any package).
	members map[string]map[string]bool
	// embeds are the names of the types each type embeds.
	embeds map[string][]string
}

// declared parses the repository's Go files (tests included) for what they declare.
func declared(t *testing.T) decls {
	t.Helper()
	d := decls{map[string]map[string]bool{}, map[string]map[string]bool{}, map[string][]string{}}
	member := func(typ, name string) {
		if d.members[typ] == nil {
			d.members[typ] = map[string]bool{}
		}
		d.members[typ][name] = true
	}
	for _, f := range citingFiles(t) {
		if !strings.HasSuffix(f, ".go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, f), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimSuffix(file.Name.Name, "_test")
		if d.pkgs[pkg] == nil {
			d.pkgs[pkg] = map[string]bool{}
		}
		top := d.pkgs[pkg]
		for _, decl := range file.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					top[decl.Name.Name] = true
				} else {
					member(typeName(decl.Recv.List[0].Type), decl.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							top[n.Name] = true
						}
					case *ast.TypeSpec:
						top[spec.Name.Name] = true
						member(spec.Name.Name, "") // so that members lists every type
						var fields *ast.FieldList
						switch typ := spec.Type.(type) {
						case *ast.StructType:
							fields = typ.Fields
						case *ast.InterfaceType:
							fields = typ.Methods
						}
						for _, field := range fieldList(fields) {
							for _, n := range field.Names {
								member(spec.Name.Name, n.Name)
							}
							if len(field.Names) == 0 {
								embedded := typeName(field.Type)
								member(spec.Name.Name, embedded)
								d.embeds[spec.Name.Name] = append(d.embeds[spec.Name.Name], embedded)
							}
						}
					}
				}
			}
		}
	}
	return d
}

func fieldList(l *ast.FieldList) []*ast.Field {
	if l == nil {
		return nil
	}
	return l.List
}

// typeName is the name of a receiver's or an embedded field's type: T of *T, T[K], pkg.T.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return "" // another package's: its members are unknown
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// hasMember reports whether typ, or a type it embeds, has the method or field name.
func (d decls) hasMember(typ, name string, depth int) bool {
	if d.members[typ][name] {
		return true
	}
	for _, e := range d.embeds[typ] {
		if e == "" {
			return true // it embeds another package's type
		}
		if depth < 5 && d.hasMember(e, name, depth+1) {
			return true
		}
	}
	return false
}

var (
	// qualified is an identifier of a package, cited by its name (chartpolicy.HasHooks) or
	// path (internal/chartpolicy.HasHooks), and maybe a member of it (rollout.Plan.Next).
	qualified = regexp.MustCompile(`(?:^|[^\w./-])((?:[\w.-]+/)*)([a-z]\w*)\.([A-Z]\w*)(?:\.([A-Za-z_]\w*))?`)
	// member is a method or field cited by its type's name: Type.Method.
	member = regexp.MustCompile(`(?:^|[^\w./-])([A-Za-z]\w*)\.([A-Za-z][A-Za-z0-9]*)\b`)
	// ident is an identifier in a code span of a Go comment, with an upper-case letter:
	// a Go name (`newPipeline`, `Setup`), where a word of lower case may be a template's
	// function or a word quoted.
	ident = regexp.MustCompile(`^(?:[A-Z]|[a-z_]\w*[A-Z])\w*$`)
	// fileExt is the end of a file's name, which looks like a type's member (pipeline.go).
	fileExt = regexp.MustCompile(`\.(go|md|sh|ya?ml|json|txt|tsv|png|svg|tgz|tar)$`)
)

// identCitations are the identifiers the files cite that their module does not declare.
func identCitations(t *testing.T, files []string, d decls) []citation {
	t.Helper()
	top := map[string]bool{}
	for pkg, names := range d.pkgs {
		for n := range names {
			top[n] = true
		}
		top[pkg] = true
	}
	var out []citation
	for _, f := range files {
		goFile := strings.HasSuffix(f, ".go")
		for _, l := range citingLines(t, f) {
			where := fmt.Sprintf("%s:%d", f, l.n)
			for _, m := range qualified.FindAllStringSubmatch(l.text, -1) {
				path, pkg, name, mem := m[1], m[2], m[3], m[4]
				if d.pkgs[pkg] == nil || pkg == "main" || (path != "" && !inModule(path)) {
					continue // another module's package
				}
				switch {
				case !d.pkgs[pkg][name]:
					out = append(out, citation{pkg + "." + name, where})
				case mem != "" && d.members[name] != nil && !fileExt.MatchString(m[0]) && !d.hasMember(name, mem, 0):
					out = append(out, citation{pkg + "." + name + "." + mem, where})
				}
			}
			spans := map[string]bool{}
			for _, s := range codeSpan.FindAllStringSubmatch(l.text, -1) {
				spans[s[1]] = true
				if goFile && ident.MatchString(s[1]) && !top[s[1]] && !d.anyMember(s[1]) {
					out = append(out, citation{s[1], where})
				}
			}
			for _, m := range member.FindAllStringSubmatch(l.text, -1) {
				typ, mem := m[1], m[2]
				if d.pkgs[typ] != nil || d.members[typ] == nil || fileExt.MatchString(m[0]) {
					continue // a package, no type of the module, a file
				}
				// In prose, a type of lower case or a member of lower case may be a word.
				exported := typ[0] >= 'A' && typ[0] <= 'Z' && mem[0] >= 'A' && mem[0] <= 'Z'
				if (exported || spans[typ+"."+mem]) && !d.hasMember(typ, mem, 0) {
					out = append(out, citation{typ + "." + mem, where})
				}
			}
		}
	}
	return out
}

// inModule reports whether a package's path is one of this module's: from its root
// (internal/rollout/) or the module's path.
func inModule(path string) bool {
	path = strings.TrimPrefix(path, "transwarp.io/tos/warpdrive-operator/")
	for _, d := range topLevel {
		if strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return path == ""
}

// anyMember reports whether some type has the method or field name.
func (d decls) anyMember(name string) bool {
	for _, m := range d.members {
		if m[name] {
			return true
		}
	}
	return false
}

// Every Go identifier cited exists: a package's (pkg.Name, internal/pkg.Name), a type's
// method or field (Type.Method, and `pipeline.reconcile` in a code span), and a name in a
// code span of a Go comment (`newPipeline`).
func TestCitedIdentifiersExist(t *testing.T) {
	d := declared(t)
	if !d.pkgs["rollout"]["ForceAnnotation"] || len(d.members) < 100 {
		t.Fatal("the module's declarations not found: the parse is broken")
	}
	report(t, "identifier", identCitations(t, citingFiles(t), d))
}
