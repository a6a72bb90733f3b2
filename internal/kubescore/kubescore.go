// Package kubescore runs kube-score, the manifest linter platform teams run in CI, over
// rendered manifests: the lint gate of the chart tests (test/charts, over config/default and
// the charts rendered with their samples) and make add-kind's report (over a chart rendered
// with its defaults) run the same checks, with the same skips (skips.go). kube-score is
// pinned in hack/tools/kube-score and built into bin/kube-score (make kube-score).
package kubescore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Binary is where make kube-score builds kube-score, relative to the repository root.
const Binary = "bin/kube-score"

// KubernetesVersion is the version kube-score checks API versions against: that of the local
// cluster (hack/tools/kube/go.mod) and of chartpolicy.KubernetesMinor.
const KubernetesVersion = "v1.35"

// Grades of kube-score's JSON output (scorecard.Grade).
const (
	gradeCritical = 1
	gradeWarning  = 5
)

// Finding is one failed check on one object.
type Finding struct {
	// Object is "Kind/name" (a namespaced object's namespace left out).
	Object string
	// Check is kube-score's ID of the check, such as container-resources.
	Check string
	// Critical is kube-score's critical grade; a finding that is not is a warning.
	Critical bool
	// Comments are kube-score's explanations: "path: summary (description)".
	Comments []string
}

func (f Finding) String() string {
	grade := "warning"
	if f.Critical {
		grade = "critical"
	}
	return fmt.Sprintf("%s: %s %s: %s", f.Object, grade, f.Check, strings.Join(f.Comments, "; "))
}

// Critical returns the critical findings of fs.
func Critical(fs []Finding) []Finding {
	return slices.DeleteFunc(slices.Clone(fs), func(f Finding) bool { return !f.Critical })
}

// output is the part of kube-score's JSON output (format v2) read here.
type output []struct {
	TypeMeta struct {
		Kind string `json:"kind"`
	} `json:"type_meta"`
	ObjectMeta struct {
		Name string `json:"name"`
	} `json:"object_meta"`
	Checks []struct {
		Check struct {
			ID string `json:"id"`
		} `json:"check"`
		Grade    int  `json:"grade"`
		Skipped  bool `json:"skipped"`
		Comments []struct {
			Path        string `json:"path"`
			Summary     string `json:"summary"`
			Description string `json:"description"`
		} `json:"comments"`
	} `json:"checks"`
}

// Run scores manifests (a multi-document YAML stream) with the kube-score binary bin, less
// the checks Skips skips for target (ConfigDefault, or a chart's name), and returns the
// critical and warning findings, in kube-score's order.
func Run(bin, target string, manifests []byte) ([]Finding, error) {
	args := []string{"score", "--output-format", "json", "--kubernetes-version", KubernetesVersion,
		// Only the skips below leave a check aside: a kube-score/ignore annotation in a chart
		// must not hide a finding from the gate or from add-kind's report.
		"--disable-ignore-checks-annotations"}
	for _, s := range SkipsFor(target) {
		args = append(args, "--ignore-test", s.Check)
	}
	args = append(args, "-")
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(manifests)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// kube-score exits 1 when it finds a critical problem; any other failure leaves no JSON.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && stdout.Len() > 0) {
		return nil, fmt.Errorf("%s: %w: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	var out output
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("%s: reading its output: %w", bin, err)
	}
	var findings []Finding
	for _, o := range out {
		for _, c := range o.Checks {
			if c.Skipped || c.Grade > gradeWarning {
				continue
			}
			f := Finding{Object: o.TypeMeta.Kind + "/" + o.ObjectMeta.Name, Check: c.Check.ID, Critical: c.Grade <= gradeCritical}
			for _, cm := range c.Comments {
				line := cm.Summary
				if cm.Path != "" {
					line = cm.Path + ": " + line
				}
				if cm.Description != "" {
					line += " (" + cm.Description + ")"
				}
				f.Comments = append(f.Comments, line)
			}
			findings = append(findings, f)
		}
	}
	return findings, nil
}
