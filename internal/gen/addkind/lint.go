package addkind

import (
	"fmt"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart"

	"transwarp.io/tos/warpdrive-operator/internal/kubescore"
)

// Platform teams lint what they offer: the report runs the lint gate's checks (kube-score with
// the skips of internal/kubescore) over the chart rendered with its defaults, under its safe
// default, as the operator renders a CR with an empty spec. What they find is a warning, for
// the person who decides whether to offer the kind: a chart is never refused for it, and the
// chart tests do not hold an added chart to the gate.

// lintTitle heads the report's topic of the linter's findings.
const lintTitle = "Linter warnings (kube-score, the checks of the lint gate, over the chart rendered with its defaults): " +
	"what the chart lacks that platform teams check; never a refusal"

// reviewLint adds the topic of kube-score's findings on c rendered with its defaults and
// overrides, kube-score being the binary bin.
func (r *Report) reviewLint(c *chart.Chart, overrides map[string]string, bin string) {
	manifest, err := renderManifest(c, nil, overrides)
	if err != nil {
		r.add(lintTitle, fmt.Sprintf("not checked: the chart does not render with its defaults alone: %v", err))
		return
	}
	findings, err := kubescore.Run(bin, c.Name(), []byte(manifest))
	if err != nil {
		r.add(lintTitle, fmt.Sprintf("not checked: %v (make kube-score builds %s)", err, kubescore.Binary))
		return
	}
	if len(findings) == 0 {
		r.add(lintTitle, "none")
		return
	}
	critical := len(kubescore.Critical(findings))
	lines := []string{fmt.Sprintf("%d findings, %d of them critical for kube-score (the charts of helm-charts/ have none; "+
		"fix them in the chart's templates or values if the kind is to be offered as it is)", len(findings), critical)}
	for _, f := range findings {
		lines = append(lines, f.String())
	}
	r.add(lintTitle, lines...)
}

// kubeScoreBinary is o.KubeScore, by default bin/kube-score under o.Root.
func kubeScoreBinary(o Options) string {
	if o.KubeScore != "" {
		return o.KubeScore
	}
	bin, err := filepath.Abs(filepath.Join(o.Root, filepath.FromSlash(kubescore.Binary)))
	if err != nil {
		return filepath.Join(o.Root, filepath.FromSlash(kubescore.Binary))
	}
	return bin
}
