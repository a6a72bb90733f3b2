package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// passwordHolderGVK is the kind of TestLookupKeepsGeneratedPassword, bound to the test chart
// testdata/passwordchart (Bitnami's shape: a password generated once and looked up
// afterwards, values rendered through tpl). The test installs its CRD and runs a manager of
// its own that watches this kind alone.
var passwordHolderGVK = schema.GroupVersionKind{Group: "e2e.warpdrive.transwarp.io", Version: "v1", Kind: "PasswordHolder"}

// passwordHolders binds the kind to its chart.
var passwordHolders = framework.ChartKind{GVK: passwordHolderGVK,
	Chart: filepath.Join(framework.RepoRoot(), "test", "e2e", "testdata", "passwordchart")}

// A chart that generates a password once and looks it up afterwards keeps it: the release
// becomes Ready, an edit upgrades it with the same password, and a minute of forced
// reconciles (each a dry-run upgrade that renders the chart again) makes no new revision.
// Helm's lookup reads nothing in a client-side dry run, where such a chart looks changed at
// every reconcile and is upgraded for ever (operator-sdk #5728, #6609).
func TestLookupKeepsGeneratedPassword(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	startPasswordHolderOperator(t, "lookup")

	cr := passwordHolder(ns, "db", "hello from {{ .Release.Name }}")
	env.Create(t, cr)
	t.Cleanup(func() { deleteAndWait(t, cr) }) // before the manager stops: the release is uninstalled

	ready := func() {
		t.Helper()
		framework.Eventually(t, converge, func(ctx context.Context) error {
			_, err := getReadyCR(ctx, cr)
			return err
		})
	}
	password := func() string {
		t.Helper()
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-auth"}, s); err != nil {
			t.Fatalf("the chart's Secret: %v", err)
		}
		if len(s.Data["password"]) != 24 {
			t.Fatalf("the chart's Secret holds password %q, want 24 generated characters", s.Data["password"])
		}
		return string(s.Data["password"])
	}
	greeting := func(want string) {
		t.Helper()
		framework.Eventually(t, converge, func(ctx context.Context) error {
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-settings"}, cm); err != nil {
				return err
			}
			if cm.Data["greeting"] != want {
				return fmt.Errorf("greeting %q, want %q (rendered through tpl)", cm.Data["greeting"], want)
			}
			return nil
		})
	}

	waitRevision(t, ns, "db", 1)
	ready()
	greeting("hello from db")
	generated := password()

	// An edit: an upgrade, whose render (and dry run) finds the Secret and keeps its password.
	patchSpec(t, cr, map[string]any{"greeting": "edited, {{ .Release.Name }}"})
	waitRevision(t, ns, "db", 2)
	greeting("edited, db")
	ready()
	if got := password(); got != generated {
		t.Fatalf("the upgrade changed the generated password: %q, was %q", got, generated)
	}

	// A minute of forced reconciles: each renders the chart in a dry-run upgrade, which must
	// find nothing changed. At most one forced reconcile runs every 10 s per CR; count those
	// handled, so that the test cannot pass on reconciles that never ran.
	handled := map[string]bool{}
	observe := func(ctx context.Context) (string, error) {
		got, err := getCR(ctx, cr)
		if err != nil {
			return "", err
		}
		h, _, _ := unstructured.NestedString(got.Object, "status", statuscontract.FieldLastHandledReconcileAt)
		if h != "" {
			handled[h] = true
		}
		return h, nil
	}
	var request string
	for i, end := 0, time.Now().Add(time.Minute); time.Now().Before(end); i++ {
		request = fmt.Sprintf("lookup-%d", i)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statuscontract.RequestAnnotation, request)
		if err := env.Client.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		if _, err := observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		h, err := observe(ctx)
		if err != nil {
			return err
		}
		if h != request {
			return fmt.Errorf("status.%s %q, want the last request %q", statuscontract.FieldLastHandledReconcileAt, h, request)
		}
		return nil
	})
	if len(handled) < 4 {
		t.Fatalf("only %d forced reconciles were handled in a minute, want at least 4", len(handled))
	}
	records, err := releaseSecrets(ctx, ns, "db")
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 2 {
		var seen []string
		for _, s := range records {
			seen = append(seen, s.Labels["version"]+"="+s.Labels["status"])
		}
		t.Errorf("after %d forced reconciles the release has records %v, want revisions 1 and 2 only", len(handled), seen)
	}
	if got := password(); got != generated {
		t.Errorf("the forced reconciles changed the generated password: %q, was %q", got, generated)
	}
	ready()
	t.Logf("%d forced reconciles handled; the release stayed at revision 2 with its password", len(handled))
}

// passwordHolder is the PasswordHolder ns/name whose chart renders greeting through tpl.
func passwordHolder(ns, name, greeting string) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(passwordHolderGVK)
	cr.SetNamespace(ns)
	cr.SetName(name)
	cr.Object["spec"] = map[string]any{"greeting": greeting}
	return cr
}

// startPasswordHolderOperator installs the PasswordHolder CRD and runs a manager and a sidecar
// that watch PasswordHolders alone, named after name, until the test ends.
func startPasswordHolderOperator(t *testing.T, name string) {
	t.Helper()
	env.InstallChartKind(t, passwordHolders)
	watches := passwordHolders.WatchesFile(t)
	mgr, err := env.StartManager(framework.ProcessOptions{Name: "manager-" + name, WatchesFile: watches,
		Flags: []string{"--leader-election-id=manager-" + name}})
	if err != nil {
		t.Fatal(err)
	}
	processes = append(processes, mgr)
	t.Cleanup(func() { mgr.Stop() })
	// The sidecar too: Ready waits for its word that the release's workloads rolled out.
	sidecar, err := env.StartSidecar(framework.ProcessOptions{Name: "sidecar-" + name, WatchesFile: watches,
		Flags: []string{"--leader-election-id=sidecar-" + name}})
	if err != nil {
		t.Fatal(err)
	}
	processes = append(processes, sidecar)
	t.Cleanup(func() { sidecar.Stop() })
}

// A value that renders anew at every render (a greeting that calls randAlphaNum through tpl)
// makes every dry run find a change, so that each reconcile would upgrade, for ever. After
// three upgrades in a row from the same spec the operator stops upgrading and says why; an
// edit of the spec upgrades again.
func TestRenderLoopStops(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	startPasswordHolderOperator(t, "renderloop")
	cr := passwordHolder(ns, "loop", "{{ randAlphaNum 8 }}")
	env.Create(t, cr)
	t.Cleanup(func() { deleteAndWait(t, cr) })
	waitRevision(t, ns, "loop", 1)

	lastRevision := func() int {
		t.Helper()
		records, err := releaseSecrets(ctx, ns, "loop")
		if err != nil {
			t.Fatal(err)
		}
		last := 0
		for _, s := range records {
			if v, err := strconv.Atoi(s.Labels["version"]); err == nil {
				last = max(last, v)
			}
		}
		return last
	}
	force := func(i int) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"loop-%d"}}}`, statuscontract.RequestAnnotation, i)
		if err := env.Client.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	// Forced reconciles (one every 10 s at most), each a dry run that finds a new greeting,
	// until the operator says it stopped.
	saysLoop := func(ctx context.Context) error {
		got, err := getCR(ctx, cr)
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any)["message"].(string); strings.Contains(m, "renders differently at every render") {
				return nil
			}
		}
		return fmt.Errorf("no condition says the chart renders differently at every render: %v", conds)
	}
	i := 0
	framework.Eventually(t, 3*time.Minute, func(ctx context.Context) error {
		i++
		force(i)
		time.Sleep(3 * time.Second)
		return saysLoop(ctx)
	})
	stopped := lastRevision()
	if stopped != 4 {
		t.Errorf("the loop stopped at revision %d, want 4 (the install and three upgrades)", stopped)
	}
	// Another forced reconcile, handled: no new revision.
	force(i + 1)
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got, err := getCR(ctx, cr)
		if err != nil {
			return err
		}
		if h, _, _ := unstructured.NestedString(got.Object, "status", statuscontract.FieldLastHandledReconcileAt); h != fmt.Sprintf("loop-%d", i+1) {
			return fmt.Errorf("the last forced reconcile not handled yet (%q)", h)
		}
		return nil
	})
	if got := lastRevision(); got != stopped {
		t.Errorf("revision %d after the loop was stopped at %d", got, stopped)
	}
	// An edit: new values, an upgrade.
	patchSpec(t, cr, map[string]any{"greeting": "fixed"})
	waitRevision(t, ns, "loop", stopped+1)
}
