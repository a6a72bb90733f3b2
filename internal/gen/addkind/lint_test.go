package addkind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"transwarp.io/tos/warpdrive-operator/internal/kubescore"
)

// The report lints the chart it takes with the lint gate's checks, over its rendering with its
// defaults, and lists what kube-score finds as warnings: the chart is added all the same. When
// kube-score cannot run, the report says the chart was not checked, and the chart is added.
func TestAddReportsLintFindings(t *testing.T) {
	bin, err := filepath.Abs(filepath.Join("..", "..", "..", filepath.FromSlash(kubescore.Binary)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: build it with make kube-score", err)
	}
	root := smallRepo(t)
	r, err := Add(Options{Root: root, Chart: filepath.Join("testdata", "sessionstore"), Kind: "SessionStore", Group: "cache.example.com",
		Version: "v1", Manifests: fakeManifests, KubeScore: bin})
	if err != nil {
		t.Fatalf("a chart with lint findings was refused: %v", err)
	}
	var out strings.Builder
	r.Print(&out)
	t.Log(out.String())
	topic := lintTopic(t, r)
	if len(topic.Lines) < 2 || !strings.Contains(topic.Lines[0], "findings") {
		t.Fatalf("lint topic %q, want the findings", topic.Lines)
	}
	// kube-score's NetworkPolicy check on a chart's pods is skipped for every chart.
	for _, l := range topic.Lines {
		if strings.Contains(l, " pod-networkpolicy:") {
			t.Errorf("a skipped check is reported: %s", l)
		}
	}

	root = smallRepo(t)
	r, err = Add(Options{Root: root, Chart: filepath.Join("testdata", "sessionstore"), Kind: "SessionStore", Group: "cache.example.com",
		Version: "v1", Manifests: fakeManifests, KubeScore: filepath.Join(t.TempDir(), "kube-score")})
	if err != nil {
		t.Fatalf("a chart was refused for want of kube-score: %v", err)
	}
	if topic := lintTopic(t, r); len(topic.Lines) != 1 || !strings.HasPrefix(topic.Lines[0], "not checked: ") ||
		!strings.Contains(topic.Lines[0], "make kube-score") {
		t.Errorf("lint topic without kube-score %q, want not checked and how to build it", topic.Lines)
	}
}

func lintTopic(t *testing.T, r *Report) Topic {
	t.Helper()
	for _, topic := range r.Review {
		if topic.Title == lintTitle {
			return topic
		}
	}
	t.Fatalf("the report has no lint topic: %+v", r.Review)
	return Topic{}
}
