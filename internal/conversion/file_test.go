package conversion

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	// Steps in any order; the chain is v1alpha1 -> v1beta1 -> v1.
	c, err := Parse([]byte(`
- from: v1beta1
  to: v1
- from: v1alpha1        # values of this version ...
  to: v1beta1           # ... become values of this one
  moves:
  - {from: /replicaCount, to: /replicas}
  - {from: /password, to: /auth/password}
  - {from: /a, to: /b}  # a swap
  - {from: /b, to: /a}
  drops: [/legacyPort, "/x~1y"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Versions(), []string{"v1alpha1", "v1beta1", "v1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Versions() = %v, want %v", got, want)
	}
	want := []step{
		{from: "v1alpha1", to: "v1beta1", moves: []move{
			{pointer{"replicaCount"}, pointer{"replicas"}},
			{pointer{"password"}, pointer{"auth", "password"}},
			{pointer{"a"}, pointer{"b"}},
			{pointer{"b"}, pointer{"a"}},
			{pointer{"legacyPort"}, nil},
			{pointer{"x/y"}, nil},
		}},
		{from: "v1beta1", to: "v1"},
	}
	if !reflect.DeepEqual(c.steps, want) {
		t.Errorf("steps = %+v\nwant %+v", c.steps, want)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"empty", "", "lists no steps (a kind with one version needs no conversions.yaml)"},
		{"comments only", "  \n# nothing\n", "lists no steps"},
		{"empty list", "[]", "lists no steps"},
		{"not a list", "from: v1alpha1\nto: v1\n", "want a list of steps"},
		{"not YAML", "- from: [v1", "malformed YAML"},
		{"duplicate key", "- from: v1alpha1\n  from: v1beta1\n  to: v1\n", "malformed YAML"},
		{"step not a mapping", "- v1alpha1", "step 1: want a step"},
		{"unknown key", "- {from: v1alpha1, to: v1, move: []}", `step 1: unknown key "move" (want drops, from, moves, to)`},
		{"keys are case-sensitive", "- {From: v1alpha1, to: v1}", `unknown key "From"`},
		{"unknown key in a move", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /b, via: /c}]}", `step 1 (v1alpha1 -> v1): move 1: unknown key "via"`},
		{"move not a mapping", "- {from: v1alpha1, to: v1, moves: [/a]}", "move 1: want a move {from, to}"},
		{"moves not a list", "- {from: v1alpha1, to: v1, moves: {from: /a, to: /b}}", "moves: want a list of moves"},
		{"drop not a string", "- {from: v1alpha1, to: v1, drops: [{from: /a}]}", "drops: want a list of JSON pointers"},
		{"from missing", "- {to: v1}", "from: a version is missing"},
		{"to missing", "- {from: v1}", "to: a version is missing"},
		{"version not a string", "- {from: 1, to: v1}", "from: want a version"},
		{"bad version", "- {from: v1 alpha1, to: v1}", `from: version "v1 alpha1"`},
		{"to itself", "- {from: v1, to: v1}", "converts v1 to itself"},
		{"move from missing", "- {from: v1alpha1, to: v1, moves: [{to: /b}]}", "move 1: from is missing"},
		{"move to missing", "- {from: v1alpha1, to: v1, moves: [{from: /a}]}", "move 1: to is missing"},
		{"pointer without slash", "- {from: v1alpha1, to: v1, moves: [{from: a, to: /b}]}", `move 1: from: "a" does not start with /`},
		{"bad escape", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /b~2}]}", `move 1: to: "/b~2": ~ must be followed by 0`},
		{"empty key", "- {from: v1alpha1, to: v1, drops: [/a//b]}", `drop 1: "/a//b" has an empty key`},
		{"root", "- {from: v1alpha1, to: v1, drops: ['']}", "drop 1: the empty pointer"},
		{"onto itself", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /a}]}", "move 1: moves /a onto itself"},
		{"moved twice", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /b}, {from: /a, to: /c}]}", "/a is moved twice (move 1 from, move 2 from)"},
		{"moved and dropped", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /b}], drops: [/a]}", "/a is moved twice (move 1 from, drop 1)"},
		{"dropped twice", "- {from: v1alpha1, to: v1, drops: [/a, /a]}", "/a is moved twice (drop 1, drop 2)"},
		{"moved into twice", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /c}, {from: /b, to: /c}]}", "two values are moved to /c (move 1 to, move 2 to)"},
		{"source inside source", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /b}], drops: [/a/x]}", "/a/x (drop 1) lies inside /a (move 1 from)"},
		{"destination inside destination", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /x/y}, {from: /b, to: /x}]}", "/x/y (move 1 to) lies inside /x (move 2 to)"},
		{"nested into itself", "- {from: v1alpha1, to: v1, moves: [{from: /image, to: /image/repository}]}", "/image/repository (move 1 to) lies inside /image (move 1 from)"},
		{"destination inside another source", "- {from: v1alpha1, to: v1, moves: [{from: /a, to: /b}, {from: /c, to: /a/c}]}", "/a/c (move 2 to) lies inside /a (move 1 from)"},
		{"pair twice", "- {from: v1alpha1, to: v1}\n- {from: v1alpha1, to: v1}", "steps 1 and 2 both convert v1alpha1 to v1"},
		{"pair both ways", "- {from: v1alpha1, to: v1}\n- {from: v1, to: v1alpha1}", "steps 1 and 2 convert between v1 and v1alpha1 both ways"},
		{"fork", "- {from: v1alpha1, to: v1beta1}\n- {from: v1alpha1, to: v1}", "v1alpha1 is converted to both v1beta1 (step 1) and v1 (step 2)"},
		{"join", "- {from: v1alpha1, to: v1}\n- {from: v1beta1, to: v1}", "both v1alpha1 (step 1) and v1beta1 (step 2) are converted to v1"},
		{"cycle", "- {from: v1alpha1, to: v1beta1}\n- {from: v1beta1, to: v1}\n- {from: v1, to: v1alpha1}", "the steps form a cycle (v1, v1alpha1, v1beta1)"},
		{"two chains", "- {from: v1alpha1, to: v1beta1}\n- {from: v2alpha1, to: v2}", "the steps form 2 chains, from v1alpha1, v2alpha1"},
		{"chain and cycle", "- {from: v1alpha1, to: v1}\n- {from: v2, to: v3}\n- {from: v3, to: v2}", "steps 2 and 3 convert between v3 and v2 both ways"},
		{"chain and longer cycle", "- {from: v1alpha1, to: v1}\n- {from: v2, to: v3}\n- {from: v3, to: v4}\n- {from: v4, to: v2}", "the steps form a cycle (v2, v3, v4) apart from the chain from v1alpha1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.file))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", c)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v\nwant an error with %q", err, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a chart without %s: %v, want fs.ErrNotExist", FileName, err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("- {from: v1alpha1, to: v1, drops: [a]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, FileName)+": step 1") {
		t.Errorf("Load: %v, want an error naming the file and the step", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("- {from: v1alpha1, to: v1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Versions(); !reflect.DeepEqual(got, []string{"v1alpha1", "v1"}) {
		t.Errorf("Versions() = %v", got)
	}
}

func TestIdentity(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"- {from: v1alpha1, to: v1}\n", true},
		{"- {from: v1alpha1, to: v1beta1}\n- {from: v1beta1, to: v1, moves: [], drops: []}\n", true},
		{"- {from: v1alpha1, to: v1, moves: [{from: /a, to: /b}]}\n", false},
		{"- {from: v1alpha1, to: v1beta1}\n- {from: v1beta1, to: v1, drops: [/a]}\n", false},
	} {
		c, err := Parse([]byte(tc.file))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.file, err)
		}
		if got := c.Identity(); got != tc.want {
			t.Errorf("Parse(%q).Identity() = %v, want %v", tc.file, got, tc.want)
		}
	}
}
