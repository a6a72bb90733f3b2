package security

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// maxBombRise is how far the manager's peak RSS may rise while it refuses a template bomb: the
// bomb is rendered in a worker process, never in the manager. Rendered in the manager, the
// memory bomb alone raised it by 297 MiB.
const maxBombRise = 64

// A namespace editor writes values that the chart's tpl evaluates (the lookup test chart
// renders its greeting through tpl, as Bitnami's charts render theirs): one that allocates
// 300 MB, one that loops for hours with no function to guard, one that renders 8 MB, past
// the 4 MiB output bound this test gives (at the default 16 MiB, the copies Helm's engine
// makes of so long an output may reach the memory bound first, and the render is refused for
// that instead). Each is refused with the reason naming its bound (--render-max-memory,
// --render-timeout, --render-max-output), a Warning Event, and the release left as it is,
// while another tenant's edit applies; the manager stays up, its memory barely moves, and the
// CR is reconciled once its owner makes it sane.
func TestTemplateBombsRefused(t *testing.T) {
	if stock {
		t.Skip("the stock operator renders in its own process, unbounded: the memory bomb takes it past the pod's limit")
	}
	attacker, other := newTenant(t), newTenant(t)
	ctx := context.Background()
	env.InstallChartKind(t, lookupKind)
	grantLookupKind(t, attacker.ns)
	grantLookupKind(t, other.ns)
	p, err := env.StartManager(framework.ProcessOptions{Name: "security-template-bombs", WatchesFile: lookupKind.WatchesFile(t),
		Flags: []string{"--leader-election-id=security-template-bombs", "--render-timeout=5s", "--render-max-output=4Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	holder := func(tn *tenant, name string) *unstructured.Unstructured {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(lookupGVK)
		cr.SetNamespace(tn.ns)
		cr.SetName(name)
		cr.Object["spec"] = map[string]any{}
		if err := tn.client.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tn.deleteAndWait(cr) })
		return cr
	}
	cr, theirs := holder(attacker, "x"), holder(other, "y")
	for _, c := range []*unstructured.Unstructured{cr, theirs} {
		if err := greeting(c, "hello from "+c.GetName()); err != nil {
			t.Fatal(err)
		}
	}

	var v []string
	resetPeak(t, p.Pid())
	before := peakRSS(t, p.Pid())
	for i, bomb := range []struct {
		name, greeting, reason, flag string
	}{
		{"memory", `{{ len (repeat 300000000 "x") }}`, statuscontract.ReasonRenderMemoryExceeded, "--render-max-memory"},
		{"time", `{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}`, statuscontract.ReasonRenderTimeExceeded, "--render-timeout"},
		{"output", `{{ repeat 8000000 "x" }}`, statuscontract.ReasonRenderOutputExceeded, "--render-max-output"},
	} {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"greeting": bomb.greeting}})
		if err := attacker.client.Patch(ctx, cr.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, func(ctx context.Context) error {
			got := cr.DeepCopy()
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
				return err
			}
			status, reason, msg := framework.Condition(got, statuscontract.Stalled)
			if status != "True" || reason != bomb.reason || !strings.Contains(msg, bomb.flag) {
				return fmt.Errorf("%s bomb: Stalled=%s %s: %s; want True %s naming %s", bomb.name, status, reason, msg, bomb.reason, bomb.flag)
			}
			return nil
		})
		if err := warningEvent(cr, bomb.reason, bomb.flag); err != nil {
			v = append(v, err.Error())
		}
		if err := greeting(cr, "hello from x"); err != nil {
			v = append(v, bomb.name+" bomb: the release changed: "+err.Error())
		}
		edit := fmt.Sprintf(`{"spec":{"greeting":"theirs %d"}}`, i)
		if err := other.client.Patch(ctx, theirs.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(edit))); err != nil {
			t.Fatal(err)
		}
		if err := greeting(theirs, fmt.Sprintf("theirs %d", i)); err != nil {
			v = append(v, bomb.name+" bomb: the other tenant's edit: "+err.Error())
		}
	}
	if p.Exited() {
		v = append(v, "the manager exited")
	} else {
		rise := peakRSS(t, p.Pid()) - before
		t.Logf("manager peak RSS rose by %.0f MiB through the three bombs", rise)
		if rise > maxBombRise {
			v = append(v, fmt.Sprintf("the manager's peak RSS rose by %.0f MiB, more than %d", rise, maxBombRise))
		}
	}
	sane := []byte(`{"spec":{"greeting":"sane again {{ .Release.Name }}"}}`)
	if err := attacker.client.Patch(ctx, cr.DeepCopy(), client.RawPatch(types.MergePatchType, sane)); err != nil {
		t.Fatal(err)
	}
	if err := greeting(cr, "sane again x"); err != nil {
		v = append(v, "the values made sane again were not reconciled: "+err.Error())
	}
	report(t, v)
}
