// Package docs checks what the docs and the code's comments cite: tests by name, files and
// directories by path, and doc sections by title. A citation outlives what it cites unless a
// test fails when the cited thing is renamed or moved.
package docs

import (
	"bufio"
	"fmt"
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
		if rel == "Makefile" || rel == "Dockerfile" {
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
