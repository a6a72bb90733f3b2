package pipeline

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// maxRefusalsListed bounds how many refused records a condition message names.
const maxRefusalsListed = 10

// withRecordReport hands out action clients that report, on the CR, the release records
// that the signed storage refused: a Warning Event and the ReleaseRecordRefused condition,
// each time the set of refused records changes. The release itself goes on from the
// operator's own records.
func withRecordReport(getter helmclient.ActionClientGetter, recorder record.EventRecorder, status client.StatusClient) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, cr client.Object) (helmclient.ActionInterface, error) {
		c, err := getter.ActionClientFor(ctx, cr)
		if err != nil {
			return nil, err
		}
		return reportingClient{ActionInterface: c, ctx: ctx, obj: cr, recorder: recorder, status: status}, nil
	})
}

type reportingClient struct {
	helmclient.ActionInterface
	ctx      context.Context
	obj      client.Object
	recorder record.EventRecorder
	status   client.StatusClient
}

func (c reportingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	c.report()
	return rel, err
}

func (c reportingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.report()
	return rel, err
}

func (c reportingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	c.report()
	return rel, err
}

func (c reportingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	c.report()
	return resp, err
}

// report brings the CR's ReleaseRecordRefused condition in line with what the storage has
// refused so far in this reconcile. The condition is set on the reconciler's own copy of the
// CR too, so that the status the reconciler writes at the end keeps it.
func (c reportingClient) report() {
	u, ok := c.obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	refused := trustedconfig.RefusedRecords(c.ActionInterface)
	want := refusalCondition(refused)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", statuscontract.FieldConditions)
	i := conditionIndex(conds, statuscontract.ReleaseRecordRefused)
	if i < 0 && want == nil {
		return // nothing refused, nothing ever reported
	}
	if want == nil {
		want = map[string]any{"type": statuscontract.ReleaseRecordRefused, "status": string(metav1.ConditionFalse),
			"reason": statuscontract.ReasonNoUntrustedRecords, "message": "every release record in use was written by this operator",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	}
	if i >= 0 {
		old, _ := conds[i].(map[string]any)
		if old["status"] == want["status"] && old["message"] == want["message"] {
			return
		}
		conds[i] = want
	} else {
		conds = append(conds, want)
	}
	if want["status"] == string(metav1.ConditionTrue) {
		c.recorder.Event(c.obj, corev1.EventTypeWarning, statuscontract.ReasonReleaseRecordRefused, refusal.Truncate(want["message"].(string), refusal.MaxEventMessage))
	}
	if err := unstructured.SetNestedSlice(u.Object, conds, "status", statuscontract.FieldConditions); err != nil {
		return
	}
	// The status client applies the helm-operator's part of the status (statusclient.go),
	// this condition included.
	cp := u.DeepCopy()
	if err := c.status.Status().Update(c.ctx, cp); err != nil {
		ctrl.Log.WithName("record-report").Error(err, "reporting refused release records", "namespace", u.GetNamespace(), "name", u.GetName())
	}
}

// refusalCondition is the condition for a set of refused records, nil for none.
func refusalCondition(refused map[string]error) map[string]any {
	if len(refused) == 0 {
		return nil
	}
	names := make([]string, 0, len(refused))
	for n := range refused {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names[:min(len(names), maxRefusalsListed)] {
		parts = append(parts, releasesign.Describe(n, refused[n]))
	}
	if len(names) > maxRefusalsListed {
		parts = append(parts, fmt.Sprintf("and %d more", len(names)-maxRefusalsListed))
	}
	// Records of a key the operator no longer holds are the release's own history after a
	// lost key: deleting them would make the operator install the release anew. Those are
	// recovered by restoring the key (docs/security.md, "Key lifecycle: rotation, loss,
	// restore"); the others are a stranger's, to delete.
	advice := "delete the refused Secrets (this condition clears at the CR's next reconcile); a refused record " +
		"where the release writes its next revision, such as a person's helm upgrade or rollback leaves, is moved " +
		"aside to <name>" + releasesign.DisplacedSuffix + " (docs/security.md#the-helm-cli-on-these-releases)"
	for _, n := range names {
		if r := releasesign.Reason(refused[n]); r == "other_key" || r == "no_key_id" {
			advice = "do not delete records signed by another key: restore the signing key from a backup " +
				"(docs/security.md#key-lifecycle-rotation-loss-restore); delete the others"
			break
		}
	}
	msg := fmt.Sprintf("refused %d release record(s) this operator did not write or that changed since: %s. "+
		"The release goes on from the operator's own records; %s",
		len(names), strings.Join(parts, "; "), advice)
	return map[string]any{"type": statuscontract.ReleaseRecordRefused, "status": string(metav1.ConditionTrue),
		"reason": statuscontract.ReasonReleaseRecordRefused, "message": msg, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
}

func conditionIndex(conds []any, typ string) int {
	for i, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return i
		}
	}
	return -1
}
