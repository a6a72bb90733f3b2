package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// secretHolderGVK is the kind of TestStatusHoldsNoRenderedData: bound to the test chart
// testdata/secretchart, which renders a Secret. No chart of the project renders one, and the
// test does not change them: it installs its own CRD and runs a manager of its own with a
// watches file that lists this kind alone (the suite's manager does not watch it).
var secretHolderGVK = schema.GroupVersionKind{Group: "e2e.warpdrive.transwarp.io", Version: "v1", Kind: "SecretHolder"}

// secretHolders binds the kind to its chart.
var secretHolders = framework.ChartKind{GVK: secretHolderGVK,
	Chart: filepath.Join(framework.RepoRoot(), "test", "e2e", "testdata", "secretchart")}

// The chart's Secret value (testdata/secretchart/values.yaml), in no CR.
const renderedToken = "e2e-rendered-token-5b2f81c4"

// A CR's status holds no copy of what its release renders: a Secret's data stays in the
// Secret (and in the release record), out of the CR that namespace viewers may read and every
// cache of the kind holds. With --status-release-manifest the manager writes the manifest
// again, as the stock helm-operator does.
func TestStatusHoldsNoRenderedData(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator always writes the manifest")
	}
	ctx := context.Background()
	ns := env.Namespace(t)
	env.InstallChartKind(t, secretHolders)
	start := func(name string, flags ...string) *framework.Process {
		return startSecretHolderManager(t, name, flags...)
	}
	mgr := start("manager-secretholder")
	t.Cleanup(func() { mgr.Stop() })

	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(secretHolderGVK)
	cr.SetNamespace(ns)
	cr.SetName("holder")
	cr.Object["spec"] = map[string]any{"note": "the token is not in the spec"}
	env.Create(t, cr)
	t.Cleanup(func() { deleteAndWait(t, cr) }) // before the manager stops: the release is uninstalled

	encoded := base64.StdEncoding.EncodeToString([]byte(renderedToken))
	status := func(ctx context.Context) (string, map[string]any, error) {
		got, err := getCR(ctx, cr)
		if err != nil {
			return "", nil, err
		}
		rel, _, _ := unstructured.NestedMap(got.Object, "status", "deployedRelease")
		b, err := json.Marshal(got.Object["status"])
		return string(b), rel, err
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		_, rel, err := status(ctx)
		if err != nil {
			return err
		}
		if rel["revision"] != int64(1) || rel["name"] != "holder" || rel["chartVersion"] != "0.2.0" {
			return fmt.Errorf("status.deployedRelease %v, want name holder, revision 1, chart version 0.2.0", rel)
		}
		return nil
	})
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "holder-credentials"}, secret); err != nil {
		t.Fatalf("the chart's Secret: %v", err)
	}
	if string(secret.Data["token"]) != renderedToken {
		t.Fatalf("the chart's Secret holds %q, want %q", secret.Data["token"], renderedToken)
	}
	s, rel, err := status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s, renderedToken) || strings.Contains(s, encoded) {
		t.Errorf("the CR's status holds the Secret's data: %s", s)
	}
	if _, ok := rel["manifest"]; ok {
		t.Errorf("status.deployedRelease has a manifest: %v", rel)
	}

	// With the flag, a manager restarted writes the manifest back at its first reconcile.
	mgr.Stop()
	mgr = start("manager-secretholder-manifest", "--status-release-manifest=true")
	framework.Eventually(t, converge, func(ctx context.Context) error {
		_, rel, err := status(ctx)
		if err != nil {
			return err
		}
		if m, _ := rel["manifest"].(string); !strings.Contains(m, encoded) {
			return fmt.Errorf("status.deployedRelease %v, want the manifest with the Secret", rel)
		}
		return nil
	})
}

// startSecretHolderManager starts a manager that watches SecretHolders alone, bound to
// testdata/secretchart, with a Lease of its own (the suite's manager holds the pod's) and the
// suite's signing key. The suite stops it if the test does not.
func startSecretHolderManager(t *testing.T, name string, flags ...string) *framework.Process {
	t.Helper()
	p, err := env.StartManager(framework.ProcessOptions{Name: name, WatchesFile: secretHolders.WatchesFile(t),
		Flags: append([]string{"--leader-election-id=" + name}, flags...)})
	if err != nil {
		t.Fatal(err)
	}
	processes = append(processes, p)
	return p
}

// deleteAndWait deletes cr and waits until it is gone: its release uninstalled and the
// finalizer removed.
func deleteAndWait(t *testing.T, cr *unstructured.Unstructured) {
	t.Helper()
	if err := client.IgnoreNotFound(env.Client.Delete(context.Background(), cr)); err != nil {
		t.Error(err)
		return
	}
	if err := framework.Poll(context.Background(), converge, func(ctx context.Context) error {
		_, err := getCR(ctx, cr)
		if err == nil {
			return fmt.Errorf("%s %s still there", cr.GetKind(), cr.GetName())
		}
		return client.IgnoreNotFound(err)
	}); err != nil {
		t.Error(err)
	}
}
