package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// Bounds on waits. They only stop a broken run from hanging; timing goals live in make bench.
const (
	converge = 3 * time.Minute
	settle   = 10 * time.Second
)

// sample returns the sample CR of kind from config/samples, so that the samples users
// apply are the ones the suite tests.
func sample(t testing.TB, kind string) *unstructured.Unstructured {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(env.Root, "config", "samples", "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil || u.GetKind() != kind {
			continue
		}
		return u
	}
	t.Fatalf("no sample of kind %s in config/samples", kind)
	return nil
}

// newCR is the sample of kind renamed to name in namespace ns, with spec values overridden.
func newCR(t testing.TB, kind, ns, name string, overrides map[string]any) *unstructured.Unstructured {
	t.Helper()
	cr := sample(t, kind)
	cr.SetNamespace(ns)
	cr.SetName(name)
	for k, v := range overrides {
		if err := unstructured.SetNestedField(cr.Object, v, "spec", k); err != nil {
			t.Fatal(err)
		}
	}
	return cr
}

// getCR reads a CR afresh.
func getCR(ctx context.Context, like *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(like.GroupVersionKind())
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(like), cr)
	return cr, err
}

// getReadyCR gets the CR like names, and fails unless its condition Ready is True: the shape of
// most waits for a CR to converge.
func getReadyCR(ctx context.Context, like *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cr, err := getCR(ctx, like)
	if err != nil {
		return nil, err
	}
	if status, reason, msg := framework.Condition(cr, statuscontract.Ready); status != "True" {
		return nil, fmt.Errorf("Ready=%q %s: %s", status, reason, msg)
	}
	return cr, nil
}

func mustGetCR(t testing.TB, like *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	cr, err := getCR(context.Background(), like)
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// waitCondition waits until cr has condition typ with status want, and returns the CR.
func waitCondition(t testing.TB, cr *unstructured.Unstructured, typ, want string) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var err error
		if got, err = getCR(ctx, cr); err != nil {
			return err
		}
		if status, reason, msg := framework.Condition(got, typ); status != want {
			return fmt.Errorf("%s %s: condition %s=%q (%s: %s), want %q; conditions: %v",
				cr.GetKind(), cr.GetName(), typ, status, reason, msg, want, got.Object["status"])
		}
		return nil
	})
	return got
}

// patchSpec changes spec values with a merge patch, as kubectl edit would.
func patchSpec(t testing.TB, cr *unstructured.Unstructured, values map[string]any) {
	t.Helper()
	patch := &unstructured.Unstructured{Object: map[string]any{"spec": values}}
	data, _ := patch.MarshalJSON()
	if err := env.Client.Patch(context.Background(), cr.DeepCopy(), client.RawPatch("application/merge-patch+json", data)); err != nil {
		t.Fatalf("patching %s %s: %v", cr.GetKind(), cr.GetName(), err)
	}
}

// releaseSecrets lists the Helm storage Secrets of a release, one per revision.
func releaseSecrets(ctx context.Context, ns, release string) ([]corev1.Secret, error) {
	var list corev1.SecretList
	err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": release})
	return list.Items, err
}

// waitRevision waits until the release's revision rev is the deployed one.
func waitRevision(t testing.TB, ns, release string, rev int) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		secrets, err := releaseSecrets(ctx, ns, release)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if s.Labels["version"] == strconv.Itoa(rev) && s.Labels["status"] == "deployed" {
				return nil
			}
		}
		var seen []string
		for _, s := range secrets {
			seen = append(seen, s.Labels["version"]+"="+s.Labels["status"])
		}
		return fmt.Errorf("release %s/%s: revision %d not deployed; revisions: %v", ns, release, rev, seen)
	})
}

// waitGone waits until obj no longer exists.
func waitGone(t testing.TB, obj client.Object) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%T %s still exists (finalizers %v)", obj, obj.GetName(), obj.GetFinalizers())
	})
}

// get reads obj, which must exist.
func get(ctx context.Context, obj client.Object) error {
	return env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
}
