package security

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// raceRounds is how many times the two kinds race; each round is a new name.
const raceRounds = 8

// Two CRs of different kinds with one name, created at the same moment, race to install the
// same release. The loser's install fails, and helm-operator-plugins then uninstalls the
// failed install by name: without the operator's lock that was the winner's release, which
// lost its objects (and a pool its StorageClass) until the next reconcile installed it again.
// Each round watches the release's records: none may be deleted while both CRs exist.
func TestCrossKindInstallRace(t *testing.T) {
	tn := newTenant(t)
	ctx := context.Background()
	before := outside(t, tn.ns)
	var v []string
	for i := range raceRounds {
		name := fmt.Sprintf("race-%d", i)
		w, err := env.Clientset.CoreV1().Secrets(tn.ns).Watch(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		a, g := appService(tn.ns, name, name+"-app", 1), guestbook(tn.ns, name, 1)
		var wg sync.WaitGroup
		for _, cr := range []*unstructured.Unstructured{a, g} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := tn.client.Create(ctx, cr); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		winner, loserMsg, err := settle(a, g)
		if err != nil {
			v = append(v, fmt.Sprintf("round %d: %v", i, err))
		}
		deleted := drain(w)
		if len(deleted) > 0 {
			v = append(v, fmt.Sprintf("round %d: the %s's release records %v were deleted by the loser's failed install", i, winner, deleted))
		}
		t.Logf("round %d: %s won; the other reads %q", i, winner, loserMsg)
		for _, cr := range []*unstructured.Unstructured{a, g} {
			if err := tn.deleteAndWait(cr); err != nil {
				v = append(v, fmt.Sprintf("round %d: deleting %s: %v", i, cr.GetKind(), err))
			}
		}
	}
	report(t, append(v, before.diff(outside(t, tn.ns))...))
}

// settle waits until one of the two CRs is deployed and the other has failed, and returns
// the winner's kind and the loser's message.
func settle(a, b *unstructured.Unstructured) (winner, loserMsg string, err error) {
	err = framework.Poll(context.Background(), 90*time.Second, func(ctx context.Context) error {
		var deployedKinds, failed []string
		for _, cr := range []*unstructured.Unstructured{a, b} {
			got := cr.DeepCopy()
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
				return err
			}
			if s, _, _ := framework.Condition(got, "Deployed"); s == "True" {
				deployedKinds = append(deployedKinds, cr.GetKind())
				continue
			}
			for _, c := range []string{"Irreconcilable", "ReleaseFailed"} {
				if s, _, msg := framework.Condition(got, c); s == "True" {
					failed = append(failed, msg)
					break
				}
			}
		}
		if len(deployedKinds) != 1 || len(failed) != 1 {
			return fmt.Errorf("deployed: %v, failed: %d", deployedKinds, len(failed))
		}
		winner, loserMsg = deployedKinds[0], failed[0]
		return nil
	})
	return winner, loserMsg, err
}

// drain returns the names of the Secrets deleted so far on w, and stops it.
func drain(w watch.Interface) []string {
	defer w.Stop()
	var deleted []string
	timeout := time.After(2 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return deleted
			}
			if s, isSecret := e.Object.(*corev1.Secret); isSecret && e.Type == watch.Deleted {
				deleted = append(deleted, s.Name)
			}
		case <-timeout:
			return deleted
		}
	}
}

// Oversized specs are refused at admission: the operator's cache holds every CR, so a
// tenant must not be able to make one large.
func TestOversizedSpecsRefused(t *testing.T) {
	tn := newTenant(t)
	ctx := context.Background()
	many := map[string]any{}
	for i := range 1000 {
		many[fmt.Sprintf("example.com/key-%d", i)] = "1"
	}
	cases := map[string]*unstructured.Unstructured{
		"resources with 1000 entries": func() *unstructured.Unstructured {
			cr := appService(tn.ns, "big-resources", "big-app", 1)
			_ = unstructured.SetNestedField(cr.Object, map[string]any{"requests": many}, "spec", "resources")
			return cr
		}(),
		"a 1 MiB quantity": func() *unstructured.Unstructured {
			cr := appService(tn.ns, "big-quantity", "big-app", 1)
			_ = unstructured.SetNestedField(cr.Object, map[string]any{"requests": map[string]any{"cpu": strings.Repeat("1", 1<<20)}}, "spec", "resources")
			return cr
		}(),
	}
	var v []string
	for name, cr := range cases {
		err := tn.client.Create(ctx, cr)
		if err == nil {
			v = append(v, name+": admitted")
			_ = tn.deleteAndWait(cr)
		}
	}
	report(t, v)
}
