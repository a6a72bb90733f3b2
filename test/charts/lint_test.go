package charts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"

	"transwarp.io/tos/warpdrive-operator/internal/kubescore"
)

// The lint gate: what platform teams run in CI over what they deploy finds nothing critical in
// what make deploy applies (config/default) nor in the house charts rendered with their
// samples. kube-score runs with the skips of internal/kubescore/skips.go, the one place a check
// is left aside; its warnings are logged. An added chart is not held to it: make add-kind
// reports its findings as warnings instead.
func TestKubeScore(t *testing.T) {
	if os.Getenv(rootEnv) != "" {
		t.Skip("already running on a copy")
	}
	bin := kubeScoreBinary(t)
	targets := map[string][]byte{kubescore.ConfigDefault: kustomizeBuild(t, kubescore.ConfigDefault)}
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		if !isHouseChart(chartName) {
			continue
		}
		s := loadSample(t, w)
		targets[chartName] = []byte(mustInstall(t, chartName, s.Name, s.Values).manifest)
	}
	for target, manifests := range targets {
		t.Run(target, func(t *testing.T) {
			findings, err := kubescore.Run(bin, target, manifests)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range findings {
				if f.Critical {
					t.Errorf("kube-score: %s", f)
				} else {
					t.Logf("kube-score: %s", f)
				}
			}
		})
	}
}

// Every skip names a check kube-score has, says why, and applies to a target of the gate.
func TestKubeScoreSkips(t *testing.T) {
	if os.Getenv(rootEnv) != "" {
		t.Skip("already running on a copy")
	}
	out, err := exec.Command(kubeScoreBinary(t), "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if id, _, ok := strings.Cut(line, ","); ok {
			checks[id] = true
		}
	}
	targets := []string{kubescore.ConfigDefault, kubescore.Charts}
	seen := map[string]bool{}
	for _, s := range kubescore.Skips {
		if !checks[s.Check] {
			t.Errorf("skip %s: kube-score has no such check", s.Check)
		}
		if strings.TrimSpace(s.Why) == "" {
			t.Errorf("skip %s: no reason given", s.Check)
		}
		for _, target := range s.Targets {
			if !slices.Contains(targets, target) {
				t.Errorf("skip %s: unknown target %s, want one of %v", s.Check, target, targets)
			}
		}
		if seen[s.Check] {
			t.Errorf("skip %s listed twice: give it one entry", s.Check)
		}
		seen[s.Check] = true
	}
}

// helm lint --strict passes on each house chart with its sample's values (two of them require
// a value, deploymentName, that values.yaml cannot default).
func TestHelmLintStrict(t *testing.T) {
	if os.Getenv(rootEnv) != "" {
		t.Skip("already running on a copy")
	}
	version, err := clusterVersion()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		if !isHouseChart(chartName) {
			continue
		}
		t.Run(chartName, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = namespace
			lint.KubeVersion = version
			result := lint.Run([]string{chartDir(chartName)}, loadSample(t, w).Values)
			for _, m := range result.Messages {
				t.Logf("helm lint: %s", m)
			}
			for _, err := range result.Errors {
				t.Errorf("helm lint --strict: %v", err)
			}
		})
	}
}

// kubeScoreBinary is bin/kube-score, which make test-unit builds first.
func kubeScoreBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(root, filepath.FromSlash(kubescore.Binary))
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v: build it with make kube-score", err)
	}
	return bin
}

// kustomizeBuild renders a kustomization with bin/kustomize, the one make deploy uses.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	kustomize := filepath.Join(root, "bin", "kustomize")
	var stderr bytes.Buffer
	cmd := exec.Command(kustomize, "build", filepath.Join(root, filepath.FromSlash(dir)))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s build %s: %v: %s (make test-unit builds bin/kustomize)", kustomize, dir, err, stderr.String())
	}
	return out
}
