package security

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// largestCRs is how many of the largest AppServices the schema admits the memory
// measurement creates.
const largestCRs = 200

// largestAppService is the largest AppService the schema admits that Kubernetes also
// accepts when rendered: 16 extended resources, each a 317-character qualified name with a
// 64-character quantity, requested and limited alike, and a 1024-character image.
func largestAppService(ns, name string) *unstructured.Unstructured {
	cr := appService(ns, name, name, 1)
	prefix := strings.Repeat("p", 63) + "." + strings.Repeat("q", 63) + "." + strings.Repeat("r", 63) + "." + strings.Repeat("s", 61)
	quantity := strings.Repeat("0", 63) + "1"
	res := map[string]any{}
	for i := range 16 {
		res[fmt.Sprintf("%s/%s%02d", prefix, strings.Repeat("n", 61), i)] = quantity
	}
	_ = unstructured.SetNestedField(cr.Object, map[string]any{"requests": res, "limits": res}, "spec", "resources")
	_ = unstructured.SetNestedField(cr.Object, "registry.example.com/"+strings.Repeat("i", 1024-len("registry.example.com/")-len(":1"))+":1", "spec", "image")
	return cr
}

// The manager's memory with 200 of the largest CRs a tenant may create (issue: a tenant
// must not exhaust the shared operator's memory). The figure is a measurement, logged and
// quoted in docs/security.md; the test checks that every CR is admitted and handled and that
// the manager survives. Run with WARPDRIVE_SECURITY_MEASURE=1 (make test-security-memory).
func TestManagerMemoryWithLargestCRs(t *testing.T) {
	if os.Getenv("WARPDRIVE_SECURITY_MEASURE") == "" {
		t.Skip("a measurement: WARPDRIVE_SECURITY_MEASURE=1 runs it")
	}
	tn := newTenant(t)
	ctx := context.Background()
	before := rss(t, manager.Pid())
	size := 0
	for i := range largestCRs {
		cr := largestAppService(tn.ns, fmt.Sprintf("large-%03d", i))
		if i == 0 {
			b, _ := cr.MarshalJSON()
			size = len(b)
		}
		if err := tn.client.Create(ctx, cr); err != nil {
			t.Fatalf("the schema refused a CR it should admit: %v", err)
		}
	}
	framework.Eventually(t, 10*time.Minute, func(ctx context.Context) error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("appcontroller.k8s.io/v1alpha1")
		list.SetKind("AppServiceList")
		if err := env.Client.List(ctx, list, client.InNamespace(tn.ns)); err != nil {
			return err
		}
		handled := 0
		for i := range list.Items {
			if s, _, _ := framework.Condition(&list.Items[i], "Deployed"); s == "True" {
				handled++
			} else if s, _, _ := framework.Condition(&list.Items[i], "ReleaseFailed"); s == "True" {
				handled++
			}
		}
		if handled < largestCRs {
			return fmt.Errorf("%d of %d CRs handled", handled, largestCRs)
		}
		return nil
	})
	time.Sleep(10 * time.Second) // let the status writes and the caches settle
	if manager.Exited() {
		t.Fatal("the manager exited")
	}
	after := rss(t, manager.Pid())
	t.Logf("manager RSS: %.0f MiB before, %.0f MiB with %d AppServices of %d bytes each (the largest the schema admits)",
		before, after, largestCRs, size)
}

// rss is the resident set size of process pid, in MiB.
func rss(t *testing.T, pid int) float64 { return procStatusMiB(t, pid, "VmRSS") }

// procStatusMiB is the field of /proc/<pid>/status given in kB (VmRSS, VmHWM), in MiB.
func procStatusMiB(t *testing.T, pid int, field string) float64 {
	t.Helper()
	v, err := framework.ProcStatusMiB(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}
