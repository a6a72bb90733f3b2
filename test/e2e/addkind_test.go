package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/gen/kindgen"
	"transwarp.io/tos/warpdrive-operator/internal/releasechunks"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// addedKinds are internal/gen/addkind's test charts, each shaped like a kind of chart found in
// the wild, the kinds make add-kind makes of them (as test/charts TestAddKind does), and a
// spec edit for each that changes what the chart renders.
var addedKinds = []addedKind{
	{"webinfo", "WebInfo", "web.example.com", map[string]any{"replicaCount": int64(2)}},
	{"keystore", "KeyStore", "data.example.com", map[string]any{"primary": map[string]any{"replicaCount": int64(2)}}},
	// The edit fires the post-upgrade hook.
	{"ledger", "Ledger", "batch.example.com", map[string]any{"replicas": int64(3)}},
	// A release record of about 2.5 MiB, stored in parts (internal/releasechunks).
	{"dashboards", "Dashboards", "monitoring.example.com", map[string]any{"seed": "b"}},
	// Its pods request ephemeral storage (a resource preset): they schedule, and the CR turns
	// Ready, only while the kwok nodes advertise some (hack/kwok/stages.yaml, node-initialize).
	{"sessionstore", "SessionStore", "cache.example.com", map[string]any{"server": map[string]any{"replicaCount": int64(2)}}},
}

type addedKind struct {
	chart, kind, group string
	edit               map[string]any
}

// inParts reports whether the kind's release record is larger than a Secret holds, and so
// stored in parts (internal/releasechunks).
func (k addedKind) inParts() bool { return k.chart == "dashboards" }

// rollsBack reports whether the kind's chart has a rollback hook, and an upgrade of it can be
// made to fail (failUpgrade).
func (k addedKind) rollsBack() bool { return k.chart == "ledger" }

// How long, and how often, step 3 forces reconciles of an unchanged CR.
const (
	forcedReconciles      = time.Minute
	forcedReconcilePeriod = 5 * time.Second
)

// Any chart becomes a kind: make add-kind makes each of internal/gen/addkind's test charts a kind
// in a copy of the repository, and on the cluster, with the CRDs and the sample CRs it
// generated and a manager and sidecar over its watches.yaml, each kind works as the
// repository's own kinds do:
//  1. the sample CR is installed and Ready;
//  2. a spec edit upgrades the release (revision 2);
//  3. a minute of forced reconciles makes no new revision; for the ledger chart, an upgrade
//     whose hook fails is rolled back, the rollback's hook runs, and a mended spec is Ready;
//  4. deleting the CR uninstalls the release: none of its objects is left, its hooks ran and
//     were deleted as their delete policies say, none of them is left, and the CR is gone.
//
// The ledger chart's hooks run for real: kwok completes the pods of Jobs (hack/kwok/stages.yaml,
// pod-complete), so the Jobs complete and Helm's wait for them returns.
func TestAddedKinds(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("make add-kind makes kinds for this operator's manager")
	}
	ctx := context.Background()
	dir := repoCopy(t)
	// The three kinds are added one after the other to one copy, as a repository grows, so
	// that one manager and one sidecar carry them all.
	for _, k := range addedKinds {
		r, err := addkind.Add(addkind.Options{Root: dir, Chart: filepath.Join(env.Root, "internal", "gen", "addkind", "testdata", k.chart),
			Kind: k.kind, Group: k.group, Version: "v1alpha1", Manifests: manifests})
		if err != nil {
			t.Fatalf("make add-kind %s: %v", k.chart, err)
		}
		var out strings.Builder
		r.Print(&out)
		t.Logf("make add-kind CHART=%s KIND=%s GROUP=%s:\n%s", k.chart, k.kind, k.group, out.String())
	}

	for _, k := range addedKinds {
		installGeneratedCRD(t, dir, k.group, addkind.Plural(k.kind))
	}
	if env.Impersonating() {
		grantGeneratedRole(t, dir)
	}
	// A client made after the CRDs, which knows their kinds.
	c, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	watches := addedWatches(t, dir)
	// The processes stay out of the suite's list (processes): TestRenderedObjectRejected, which
	// runs after this test, fails for any process of the list that has exited, stopped on
	// purpose or not. The check the suite makes of the list, that the apiserver refused the
	// operator nothing (rbacDenials), is made here.
	mgr, err := env.StartManager(framework.ProcessOptions{Name: "manager-addedkinds", WatchesFile: watches,
		Flags: []string{"--leader-election-id=manager-addedkinds"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := env.StartSidecar(framework.ProcessOptions{Name: "sidecar-addedkinds", WatchesFile: watches,
		Flags: []string{"--leader-election-id=sidecar-addedkinds"}})
	if err != nil {
		mgr.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the subtests, which delete their CRs
		sc.Stop()
		mgr.Stop()
		if env.Impersonating() {
			noDenials(t, mgr, sc)
		}
	})

	// The kinds share the manager, not their namespaces or CRs: they run side by side.
	for _, k := range addedKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			jobs := recordJobs(t, ns)
			cr := generatedSample(t, dir, k.kind)
			cr.SetNamespace(ns)
			if err := c.Create(ctx, cr); err != nil {
				t.Fatalf("creating the sample %s: %v", k.kind, err)
			}
			// Should the test stop early: the namespace's cleanup deletes the CRs of the
			// suite's kinds only, and this one's finalizer needs the manager.
			t.Cleanup(func() { deleteCR(t, c, cr) })
			release := cr.GetName()
			// 1. Installed and Ready.
			readyAtGeneration(t, c, cr)
			waitRevision(t, ns, release, 1)

			// 2. A spec edit upgrades the release.
			data, _ := json.Marshal(map[string]any{"spec": k.edit})
			if err := c.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", data)); err != nil {
				t.Fatal(err)
			}
			readyAtGeneration(t, c, cr)
			waitRevision(t, ns, release, 2)
			if k.inParts() {
				head, err := env.Clientset.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1."+release+".v2", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if n := head.Annotations[releasechunks.ChunksAnnotation]; n == "" {
					t.Error("the release record is not stored in parts")
				} else {
					t.Logf("revision 2's record is in %s parts", n)
				}
			}

			// 3. Forced reconciles of an unchanged CR change nothing in the release.
			forceReconciles(t, c, cr)
			secrets, err := releaseSecrets(ctx, ns, release)
			if err != nil {
				t.Fatal(err)
			}
			var revisions []string
			for _, s := range secrets {
				revisions = append(revisions, s.Labels["version"]+"="+s.Labels["status"])
			}
			slices.Sort(revisions)
			if !slices.Equal(revisions, []string{"1=superseded", "2=deployed"}) {
				t.Errorf("after %s of forced reconciles the release has revisions %v, want 1=superseded 2=deployed", forcedReconciles, revisions)
			}

			// 3b. An upgrade that fails is rolled back, and the rollback's hooks run.
			if k.rollsBack() {
				failUpgrade(t, c, cr, jobs)
			}

			// 4. Deleting the CR uninstalls the release.
			rel, err := deployedRelease(ctx, ns, release)
			if err != nil {
				t.Fatal(err)
			}
			deleteCR(t, c, cr)
			if t.Failed() {
				return
			}
			checkUninstalled(t, c, rel, jobs)
			parts, err := env.Clientset.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(releasechunks.ChunkType)})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parts.Items {
				t.Errorf("a part of a release record is left after the uninstall: Secret %s", p.Name)
			}
		})
	}
}

// deleteCR deletes cr and waits until it is gone: its release uninstalled, its finalizer
// removed.
func deleteCR(t *testing.T, c client.Client, cr *unstructured.Unstructured) {
	t.Helper()
	if err := client.IgnoreNotFound(c.Delete(context.Background(), cr)); err != nil {
		t.Error(err)
		return
	}
	err := framework.Poll(context.Background(), converge, func(ctx context.Context) error {
		got := cr.DeepCopy()
		err := c.Get(ctx, client.ObjectKeyFromObject(cr), got)
		if err == nil {
			return fmt.Errorf("%s %s still there (finalizers %v)", cr.GetKind(), cr.GetName(), got.GetFinalizers())
		}
		return client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Error(err)
	}
}

// noDenials fails t if the apiserver refused the processes anything, as the suite's
// rbacDenials does for the processes of its list.
func noDenials(t *testing.T, ps ...*framework.Process) {
	t.Helper()
	for _, p := range ps {
		out, err := p.Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") && !strings.Contains(line, "because it is being terminated") {
				t.Errorf("running as %s, %s was refused: %s", env.ServiceAccount, p.Name, line)
			}
		}
	}
}

// repoCopy copies what make add-kind and make manifests read and write (as test/charts does)
// into a temporary directory.
func repoCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"watches.yaml", "PROJECT", "helm-charts", "config", "cmd", "internal", "sidecar"} {
		// kindgen reads the code for the kinds it names: of the code, only the Go sources.
		code := p == "cmd" || p == "internal" || p == "sidecar"
		err := filepath.WalkDir(filepath.Join(env.Root, p), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || code && (!strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go")) {
				return err
			}
			rel, err := filepath.Rel(env.Root, path)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			target := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// manifests does in dir what make manifests does (hack/crdgen, then hack/kindgen): the copy
// has no Makefile.
func manifests(dir string) ([]byte, error) {
	crds, err := crdgen.GenerateAll(filepath.Join(dir, "watches.yaml"), filepath.Join(dir, "helm-charts"))
	if err != nil {
		return nil, err
	}
	bases := filepath.Join(dir, "config", "crd", "bases")
	for _, f := range crds {
		if err := os.WriteFile(filepath.Join(bases, f.Name), f.Data, 0o644); err != nil {
			return nil, err
		}
	}
	files, err := kindgen.Generate(kindgen.DefaultOptions(dir))
	if err != nil {
		return nil, err
	}
	_, err = kindgen.Write(dir, files)
	return nil, err
}

// installGeneratedCRD applies the CRD make add-kind generated in the copy dir, waits until the
// apiserver serves it, and deletes it when the test ends (its CRs are gone by then).
func installGeneratedCRD(t *testing.T, dir, group, plural string) {
	t.Helper()
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join(dir, "config", "crd", "bases", group+"_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := env.Client.Patch(ctx, crd, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
		t.Fatalf("applying the CRD %s: %v", crd.Name, err)
	}
	// Waits until the CRD is gone: a run soon after would apply it again, and an apply to a
	// CRD still terminating is lost with it.
	t.Cleanup(func() {
		if err := client.IgnoreNotFound(env.Client.Delete(context.Background(), crd)); err != nil {
			t.Errorf("deleting the CRD %s: %v", crd.Name, err)
			return
		}
		waitGone(t, crd)
	})
	if err := env.WaitCRDEstablished(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	// Established says the names are accepted; the resource may answer 404 a moment more.
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		c, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme()})
		if err != nil {
			return err
		}
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: crd.Spec.Versions[0].Name, Kind: crd.Spec.Names.ListKind})
		return c.List(ctx, l)
	})
}

// grantGeneratedRole gives the operator's ServiceAccount the manager role make add-kind
// regenerated in the copy dir (config/rbac/role.yaml): what a deployment of the copy would
// grant, and so what the new kinds need. The suite fails the run if the operator was refused
// anything (rbacDenials).
func grantGeneratedRole(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(kindgen.ManagerRole)))
	if err != nil {
		t.Fatal(err)
	}
	var generated rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &generated); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-addedkinds"}, Rules: generated.Rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-addedkinds"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: env.ServiceAccount.Namespace, Name: env.ServiceAccount.Name}}}
	role.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRole"))
	binding.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"))
	// Applied, not created: a test that regenerates the role (make add-version) grants it again.
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Patch(context.Background(), obj, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
}

// addedWatches writes a watches file with the copy's entries of the added kinds alone (the
// suite's manager carries the others), their charts made absolute: the manager runs in the
// repository.
func addedWatches(t *testing.T, dir string) string {
	t.Helper()
	var kinds []string
	for _, k := range addedKinds {
		kinds = append(kinds, k.kind)
	}
	return watchesOf(t, dir, kinds...)
}

// watchesOf writes a watches file with the copy dir's entries of kinds alone, their charts
// made absolute.
func watchesOf(t *testing.T, dir string, kinds ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var all, added []map[string]any
	if err := yaml.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	for _, w := range all {
		if kind, _ := w["kind"].(string); slices.Contains(kinds, kind) {
			w["chart"] = filepath.Join(dir, filepath.FromSlash(w["chart"].(string)))
			added = append(added, w)
		}
	}
	if len(added) != len(kinds) {
		t.Fatalf("the copy's watches.yaml has %d of the kinds %v:\n%s", len(added), kinds, data)
	}
	out, err := yaml.Marshal(added)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// generatedSample reads the sample CR make add-kind generated for kind in the copy dir.
func generatedSample(t *testing.T, dir, kind string) *unstructured.Unstructured {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(kindgen.SamplesDir), "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err == nil && u.GetKind() == kind {
			return u
		}
	}
	t.Fatalf("make add-kind wrote no sample of kind %s in config/samples", kind)
	return nil
}

// readyAtGeneration waits until cr is Ready at its current generation.
func readyAtGeneration(t *testing.T, c client.Client, cr *unstructured.Unstructured) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got := cr.DeepCopy()
		if err := c.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		status, reason, msg := framework.Condition(got, statuscontract.Ready)
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		if status != "True" || observed != got.GetGeneration() {
			return fmt.Errorf("%s %s: Ready=%q (%s: %s) at generation %d, want True at %d; status: %v",
				cr.GetKind(), cr.GetName(), status, reason, msg, observed, got.GetGeneration(), got.Object["status"])
		}
		return nil
	})
}

// forceReconciles changes cr's request annotation every forcedReconcilePeriod for
// forcedReconciles, each change handled (status.lastHandledReconcileAt) before the next.
func forceReconciles(t *testing.T, c client.Client, cr *unstructured.Unstructured) {
	t.Helper()
	for end := time.Now().Add(forcedReconciles); time.Now().Before(end); {
		requested := time.Now().UTC().Format(time.RFC3339Nano)
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statuscontract.RequestAnnotation, requested)
		if err := c.Patch(context.Background(), cr.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, converge, func(ctx context.Context) error {
			got := cr.DeepCopy()
			if err := c.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
				return err
			}
			if handled, _, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); handled != requested {
				return fmt.Errorf("status.lastHandledReconcileAt %q, want %q", handled, requested)
			}
			return nil
		})
		time.Sleep(forcedReconcilePeriod)
	}
}

// deployedRelease reads the deployed revision of release from its Helm storage Secret.
func deployedRelease(ctx context.Context, ns, name string) (*release.Release, error) {
	secrets, err := releaseSecrets(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	for _, s := range secrets {
		if s.Labels["status"] == "deployed" {
			return driver.NewSecrets(releasechunks.New(env.Clientset.CoreV1().Secrets(ns))).Get(s.Name)
		}
	}
	return nil, fmt.Errorf("release %s/%s has no deployed revision", ns, name)
}

// failUpgrade makes the next upgrade of a Ledger fail, and then mends it. The edit sets its
// replicas and labels the pod of the chart's post-upgrade migration Job for the local cluster's kwok to fail
// (hack/kwok/stages.yaml, pod-fail): Helm's wait for the hook fails, the upgrade with it, and
// the engine rolls the release back, which runs the chart's post-rollback hook. Meanwhile the
// CR is not Ready; with the label removed, the next upgrade succeeds and it is Ready again.
func failUpgrade(t *testing.T, c client.Client, cr *unstructured.Unstructured, jobs *jobLog) {
	t.Helper()
	// The replicas change what the release renders: a change of the hook's alone would not
	// upgrade it (hooks are not in the manifest the dry run compares).
	patch := func(podLabels any) {
		data, _ := json.Marshal(map[string]any{"spec": map[string]any{"replicas": 4, "migration": map[string]any{"podLabels": podLabels}}})
		if err := c.Patch(context.Background(), cr.DeepCopy(), client.RawPatch("application/merge-patch+json", data)); err != nil {
			t.Fatal(err)
		}
	}
	patch(map[string]any{"kwok-result": "fail"})
	rollbackHook := cr.GetName() + "-restore-schema"
	framework.Eventually(t, converge, func(ctx context.Context) error {
		if added, _ := jobs.seen(rollbackHook); !added {
			return fmt.Errorf("the post-rollback hook Job %s has not run", rollbackHook)
		}
		got := cr.DeepCopy()
		if err := c.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		if status, reason, msg := framework.Condition(got, statuscontract.Ready); status == "True" {
			return fmt.Errorf("Ready=True (%s: %s) while its upgrade fails", reason, msg)
		}
		return nil
	})
	patch(nil)
	readyAtGeneration(t, c, cr)
}

// jobLog records the Jobs created and deleted in a namespace, so that a test sees the hooks
// that ran even if Helm deleted them right after.
type jobLog struct {
	mu      sync.Mutex
	added   map[string]bool
	deleted map[string]bool
}

// recordJobs records the Jobs of namespace ns until the test ends.
func recordJobs(t *testing.T, ns string) *jobLog {
	t.Helper()
	w, err := env.Clientset.BatchV1().Jobs(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &jobLog{added: map[string]bool{}, deleted: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			l.mu.Lock()
			switch ev.Type {
			case watch.Added:
				l.added[j.Name] = true
			case watch.Deleted:
				l.deleted[j.Name] = true
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *jobLog) seen(name string) (added, deleted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.added[name], l.deleted[name]
}

// checkUninstalled checks that the uninstalled release rel left none of its objects, and that
// its hooks ran, were deleted as their policies say (jobs recorded them), and are all gone.
// Helm does not track hook objects as the release's, so one that no policy deletes would
// outlive the release (https://helm.sh/docs/topics/charts_hooks/#hook-resources-are-not-managed-with-corresponding-releases);
// the operator deletes them after the uninstall (layer_hookcleanup.go).
func checkUninstalled(t *testing.T, c client.Client, rel *release.Release, jobs *jobLog) {
	t.Helper()
	var rendered []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("the release's manifest: %v", err)
		}
		if len(u.Object) > 0 {
			rendered = append(rendered, u)
		}
	}
	if len(rendered) == 0 {
		t.Fatalf("release %s/%s rendered nothing", rel.Namespace, rel.Name)
	}
	// exists reads the object of kind and name as rendered, in the release's namespace unless
	// it names another.
	exists := func(ctx context.Context, r *unstructured.Unstructured) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.GroupVersionKind())
		key := client.ObjectKey{Namespace: cmp.Or(r.GetNamespace(), rel.Namespace), Name: r.GetName()}
		err := c.Get(ctx, key, u)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && u.GetDeletionTimestamp() == nil, err
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var left []string
		for _, r := range rendered {
			found, err := exists(ctx, r)
			if err != nil {
				return err
			}
			if found {
				left = append(left, r.GetKind()+" "+r.GetName())
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("release %s uninstalled, but %d of its objects are left: %v", rel.Name, len(left), left)
		}
		return nil
	})

	// The hooks: the watch of Jobs may lag behind the uninstall by a moment.
	var fates []string
	framework.Eventually(t, settle, func(ctx context.Context) error {
		var problems []string
		fates = fates[:0]
		for _, h := range rel.Hooks {
			if slices.Contains(h.Events, release.HookTest) {
				continue // helm test runs them; the operator never does
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(h.Manifest), &u.Object); err != nil {
				return err
			}
			found, err := exists(ctx, u)
			if err != nil {
				return err
			}
			deleteOnSuccess := slices.Contains(h.DeletePolicies, release.HookSucceeded)
			if h.Kind == "Job" {
				added, deleted := jobs.seen(h.Name)
				switch {
				case !added:
					problems = append(problems, fmt.Sprintf("hook Job %s (%v) never ran", h.Name, h.Events))
				case deleteOnSuccess && !deleted:
					problems = append(problems, fmt.Sprintf("hook Job %s (%v) was not deleted, despite policy %v", h.Name, h.Events, h.DeletePolicies))
				case found:
					j := &batchv1.Job{}
					if err := c.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: h.Name}, j); err != nil {
						return err
					}
					if j.Status.Succeeded == 0 {
						problems = append(problems, fmt.Sprintf("hook Job %s (%v) did not succeed: %+v", h.Name, h.Events, j.Status))
					}
				}
			}
			fate := "gone"
			if found {
				fate = "left"
				problems = append(problems, fmt.Sprintf("hook %s %s (%v, delete policy %v) is left after the uninstall",
					h.Kind, h.Name, h.Events, h.DeletePolicies))
			}
			if h.Kind == "Job" {
				fate = "ran, " + fate
			}
			fates = append(fates, fmt.Sprintf("%s %s (%v, delete policy %v): %s", h.Kind, h.Name, h.Events, h.DeletePolicies, fate))
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s", strings.Join(problems, "; "))
		}
		return nil
	})
	for _, f := range fates {
		t.Log("hook " + f)
	}
}
