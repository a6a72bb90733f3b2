package operator

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// Fields of status.chart, the chart of a CR's release as the manager last saw it
// (docs/rollouts.md): statuscontract.FieldChart*.
const (
	chartVersion      = statuscontract.FieldChartVersion
	chartDigest       = statuscontract.FieldChartDigest
	chartRevision     = statuscontract.FieldChartRevision // the release's revision, which the sidecar reads too
	chartLastDeployed = statuscontract.FieldChartLastDeployed
	chartBehind       = statuscontract.FieldChartBehind
	chartFailed       = statuscontract.FieldChartFailedDigest
	chartBaseline     = statuscontract.FieldChartBaseline
)

// rolloutStatus is the rollout controller's word on one CR (rollout_controller.go), for its status.
type rolloutStatus struct {
	// targetVersion and targetDigest are the chart the operator carries.
	targetVersion, targetDigest string
	// known: the rollout controller has decided on this CR since this process started;
	// until then the failure mark in the status stands, and no condition is written.
	known bool
	// condition is the ChartRollout condition, failedDigest the failure mark.
	condition    metav1.Condition
	failedDigest string
	// baseline is the CR's state before its move to the carried chart, to record.
	baseline rollout.Baseline
}

// baselineField is status.chart.baseline for b; nil for none.
func baselineField(b rollout.Baseline) map[string]any {
	if b.Digest == "" {
		return nil
	}
	f := map[string]any{statuscontract.FieldBaselineDigest: b.Digest, statuscontract.FieldBaselineGeneration: b.Generation,
		statuscontract.FieldBaselineHealthy: b.Healthy}
	if b.Inputs != "" {
		f[statuscontract.FieldBaselineInputs] = b.Inputs
	}
	return f
}

// sameChart reports whether status.chart of cr says what ch says.
func sameChart(cr *unstructured.Unstructured, ch map[string]any) bool {
	old, found, _ := unstructured.NestedMap(cr.Object, "status", statuscontract.FieldChart)
	if ch == nil {
		return !found
	}
	return reflect.DeepEqual(old, ch)
}

// inputsOf names the versions of a release's sources (rollout.Member.Inputs): short, for it
// is kept in the CR's baseline.
func inputsOf(sources []valuesfrom.Source) string {
	h := sha256.New()
	for _, s := range sources {
		fmt.Fprintf(h, "%s/%s@%s\n", s.Kind, s.Name, s.ResourceVersion)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// chartMember is what the rollout controller observes of cr (rollout.Member).
func chartMember(cr *unstructured.Unstructured) rollout.Member {
	return memberOf(cr, statuscontract.Conditions(cr))
}

// memberOf is chartMember of cr, whose conditions are conds.
func memberOf(cr *unstructured.Unstructured, conds []metav1.Condition) rollout.Member {
	m := rollout.Member{Key: cr.GetNamespace() + "/" + cr.GetName(), Generation: cr.GetGeneration(),
		Forced: cr.GetAnnotations()[rollout.ForceAnnotation],
		Paused: cr.GetAnnotations()[statuscontract.PauseAnnotation] == "true"}
	if b, ok, _ := unstructured.NestedMap(cr.Object, "status", statuscontract.FieldChart, chartBaseline); ok {
		m.Baseline.Digest, _ = b[statuscontract.FieldBaselineDigest].(string)
		m.Baseline.Healthy, _ = b[statuscontract.FieldBaselineHealthy].(bool)
		m.Baseline.Generation, _, _ = unstructured.NestedInt64(b, statuscontract.FieldBaselineGeneration)
		m.Baseline.Inputs, _ = b[statuscontract.FieldBaselineInputs].(string)
	}
	if sources, ok := statusSourcesOf(cr); ok && len(sources) > 0 {
		m.Inputs = inputsOf(sources)
	}
	m.Digest, _, _ = unstructured.NestedString(cr.Object, "status", statuscontract.FieldChart, chartDigest)
	m.FailedDigest, _, _ = unstructured.NestedString(cr.Object, "status", statuscontract.FieldChart, chartFailed)
	if s, _, _ := unstructured.NestedString(cr.Object, "status", statuscontract.FieldChart, chartLastDeployed); s != "" {
		m.Deployed, _ = time.Parse(time.RFC3339, s)
	}
	if c := statuscontract.Find(conds, statuscontract.Ready); c != nil {
		m.Ready = c.Status == metav1.ConditionTrue && c.ObservedGeneration == cr.GetGeneration()
		if !m.Ready {
			m.NotReadySince = c.LastTransitionTime.Time
		}
	}
	if c := statuscontract.Find(conds, statuscontract.Stalled); c != nil {
		m.Stalled = c.Status == metav1.ConditionTrue
	}
	return m
}
