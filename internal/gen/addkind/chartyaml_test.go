package addkind

import (
	"strings"
	"testing"
)

func TestSetAnnotations(t *testing.T) {
	want := []annotation{{"crd.warpdrive.transwarp.io/plural", "webapps"}, {"crd.warpdrive.transwarp.io/categories", "warpdrive"}}
	tests := []struct{ name, in, out string }{
		{"no annotations", "apiVersion: v2\n# the name\nname: web # a comment\nversion: 1.0.0\n",
			"apiVersion: v2\n# the name\nname: web # a comment\nversion: 1.0.0\nannotations:\n" +
				"  crd.warpdrive.transwarp.io/plural: webapps\n  crd.warpdrive.transwarp.io/categories: warpdrive\n"},
		{"no final newline", "apiVersion: v2\nname: web\nversion: 1.0.0",
			"apiVersion: v2\nname: web\nversion: 1.0.0\nannotations:\n" +
				"  crd.warpdrive.transwarp.io/plural: webapps\n  crd.warpdrive.transwarp.io/categories: warpdrive\n"},
		{"annotations first, deeper indentation", "annotations:\n    category: Database\n\n    # licence\n    licenses: Apache-2.0\napiVersion: v2\nname: web\nversion: 1.0.0\n",
			"annotations:\n    category: Database\n\n    # licence\n    licenses: Apache-2.0\n" +
				"    crd.warpdrive.transwarp.io/plural: webapps\n    crd.warpdrive.transwarp.io/categories: warpdrive\n" +
				"apiVersion: v2\nname: web\nversion: 1.0.0\n"},
		{"a value replaced, one kept", "apiVersion: v2\nname: web\nversion: 1.0.0\nannotations:\n" +
			"  crd.warpdrive.transwarp.io/plural: \"webs\" # old\n  crd.warpdrive.transwarp.io/categories: warpdrive\n# end\n",
			"apiVersion: v2\nname: web\nversion: 1.0.0\nannotations:\n" +
				"  crd.warpdrive.transwarp.io/plural: webapps # old\n  crd.warpdrive.transwarp.io/categories: warpdrive\n# end\n"},
		{"empty annotations", "apiVersion: v2\nannotations: {}\nname: web\nversion: 1.0.0\n",
			"apiVersion: v2\nannotations:\n  crd.warpdrive.transwarp.io/plural: webapps\n" +
				"  crd.warpdrive.transwarp.io/categories: warpdrive\nname: web\nversion: 1.0.0\n"},
		{"null annotations", "apiVersion: v2\nannotations:\nname: web\nversion: 1.0.0\n",
			"apiVersion: v2\nannotations:\n  crd.warpdrive.transwarp.io/plural: webapps\n" +
				"  crd.warpdrive.transwarp.io/categories: warpdrive\nname: web\nversion: 1.0.0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := setAnnotations([]byte(tt.in), want)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.out {
				t.Errorf("got\n%s\nwant\n%s", out, tt.out)
			}
		})
	}

	for _, in := range []string{
		"annotations: {a: b}\nname: web\n",                                         // a flow mapping
		"name: web\nannotations:\n  crd.warpdrive.transwarp.io/plural: |\n    x\n", // a block scalar
		"- a list\n",
	} {
		if _, _, err := setAnnotations([]byte(in), want); err == nil {
			t.Errorf("%q: edited", in)
		}
	}
}

func TestAppendWatch(t *testing.T) {
	in := "# The kinds.\n- group: a.example.com\n  version: v1\n  kind: A\n  chart: helm-charts/a # the first\n"
	out, err := appendWatch([]byte(in), watchEntry{group: "b.example.com", version: "v1alpha1", kind: "B", chart: "helm-charts/b"})
	if err != nil {
		t.Fatal(err)
	}
	want := in + "- group: b.example.com\n  version: v1alpha1\n  kind: B\n  chart: helm-charts/b\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	indented := strings.ReplaceAll(in, "\n-", "\n  -")
	indented = strings.ReplaceAll(indented, "\n  version", "\n    version")
	indented = strings.ReplaceAll(indented, "\n  kind", "\n    kind")
	indented = strings.ReplaceAll(indented, "\n  chart", "\n    chart")
	if _, err := appendWatch([]byte("kinds:\n"+indented), watchEntry{group: "b.example.com", version: "v1", kind: "B", chart: "helm-charts/b"}); err == nil {
		t.Error("a watches file that is not a list was edited")
	}
	if _, err := appendWatch([]byte(in), watchEntry{group: "a.example.com", version: "v1", kind: "A", chart: "helm-charts/a2"}); err == nil {
		t.Error("a duplicate kind was appended")
	}
}
