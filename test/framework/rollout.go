package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/operator"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
)

// PodChartAnnotation is the pod template annotation by which each version of a ChartCopy
// (but the first) marks its Deployments, so that a move to a chart shows in the workload.
const PodChartAnnotation = "e2e.warpdrive.transwarp.io/chart"

// RolloutGVK is the kind of the chart rollout tests: the memcached chart under a kind of
// its own, whose CRD a ChartCopy installs, so that no other manager on the cluster (the e2e
// suite's, or another test's) reconciles its CRs: only the manager the test starts over the
// copy does.
var RolloutGVK = schema.GroupVersionKind{Group: "rollout.e2e.warpdrive.transwarp.io", Version: "v1alpha1", Kind: "RolloutTest"}

// RolloutGVR is RolloutGVK's resource.
var RolloutGVR = RolloutGVK.GroupVersion().WithResource("rollouttests")

// ChartCopy is a copy of the memcached chart in a temporary directory, bound to RolloutGVK
// by a watches file of its own, for the chart rollout tests: a manager started with
// --watches-file=WatchesFile carries the copy as it was when the manager started.
type ChartCopy struct {
	Dir     string
	Digests map[string]string // chart version -> rollout digest
	// Client knows RolloutGVK (a client made before its CRD may not).
	Client client.Client
}

// NewChartCopy copies helm-charts/memcached into a temporary directory of t and installs
// the CRD of RolloutGVK, which it deletes at the end of t (so the test deletes its CRs
// before).
func (e *Env) NewChartCopy(t testing.TB) *ChartCopy {
	t.Helper()
	c := &ChartCopy{Dir: t.TempDir(), Digests: map[string]string{}}
	if err := os.CopyFS(filepath.Join(c.Dir, "memcached"), os.DirFS(filepath.Join(e.Root, "helm-charts", "memcached"))); err != nil {
		t.Fatal(err)
	}
	// The copy is a kind of its own, at one version: Memcached's history of versions
	// (conversions.yaml, versions/) is not its.
	for _, history := range []string{conversion.FileName, conversion.VersionsDir} {
		if err := os.RemoveAll(filepath.Join(c.Dir, "memcached", history)); err != nil {
			t.Fatal(err)
		}
	}
	watches := fmt.Sprintf("- group: %s\n  version: %s\n  kind: %s\n  chart: %s\n",
		RolloutGVK.Group, RolloutGVK.Version, RolloutGVK.Kind, filepath.Join(c.Dir, "memcached"))
	if err := os.WriteFile(c.WatchesFile(), []byte(watches), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Write(t, "0.1.0", "")
	if e.Impersonating() {
		e.grantRolloutKind(t)
	}
	crd, err := crdgen.Generate(filepath.Join(c.Dir, "memcached"), RolloutGVK)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Client.Patch(ctx, crd, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	// The next test installs the same CRD: the cleanup waits until this one is gone, for an
	// apply to a CRD still terminating would be lost with it.
	t.Cleanup(func() {
		ctx := context.Background()
		if err := e.Client.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the CRD %s: %v", crd.Name, err)
			return
		}
		err := Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
			err := e.Client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("CRD %s not gone yet (%v)", crd.Name, err)
		})
		if err != nil {
			t.Errorf("deleting the CRD: %v", err)
		}
	})
	if err := e.WaitCRDEstablished(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	if c.Client, err = client.New(e.Config, client.Options{Scheme: e.Client.Scheme()}); err != nil {
		t.Fatal(err)
	}
	// Established says the CRD's names are accepted; the apiserver may still answer its
	// resource with 404 for a moment, so the copy is ready once a list of it succeeds.
	err = Poll(ctx, time.Minute, func(ctx context.Context) error {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(RolloutGVK.GroupVersion().WithKind(RolloutGVK.Kind + "List"))
		return c.Client.List(ctx, l)
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WatchesFile is the watches file of the copy.
func (c *ChartCopy) WatchesFile() string { return filepath.Join(c.Dir, "watches.yaml") }

// NewCR is a CR of RolloutGVK with size 1.
func (c *ChartCopy) NewCR(ns, name string) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	cr.SetGroupVersionKind(RolloutGVK)
	cr.SetNamespace(ns)
	cr.SetName(name)
	return cr
}

// List reads the CRs of RolloutGVK in the namespaces, by name (the tests give them names
// unique across their namespaces).
func (c *ChartCopy) List(ctx context.Context, namespaces ...string) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, ns := range namespaces {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(RolloutGVK.GroupVersion().WithKind(RolloutGVK.Kind + "List"))
		if err := c.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for i := range l.Items {
			out[l.Items[i].GetName()] = &l.Items[i]
		}
	}
	return out, nil
}

// DeleteCRs deletes the CRs of RolloutGVK in the namespaces and waits until they are gone
// (their releases uninstalled by the manager, which must run).
func (c *ChartCopy) DeleteCRs(ctx context.Context, namespaces ...string) error {
	crs, err := c.List(ctx, namespaces...)
	if err != nil {
		return err
	}
	for _, cr := range crs {
		if err := c.Client.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return Poll(ctx, 3*time.Minute, func(ctx context.Context) error {
		left, err := c.List(ctx, namespaces...)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%d %s still there", len(left), RolloutGVK.Kind)
		}
		return nil
	})
}

// WaitOnChart fails t unless, within timeout, every CR of names (looked up by name across
// namespaces, see List) is Ready on the chart of version as last written to the copy (see
// OnChart): the point the rollout tests start from, and the end they wait for, once a
// manager carries that chart.
//
// It takes the version, not its digest, so that it can say both when it fails, and so that
// it fails at once for a version never written: the digest would be empty, and an empty
// digest could match a CR whose status names no chart. For the same reason it refuses to
// wait for no CRs, or in no namespace, which would succeed, or time out, for nothing.
func (c *ChartCopy) WaitOnChart(t testing.TB, timeout time.Duration, version string, names []string, namespaces ...string) {
	t.Helper()
	digest, ok := c.Digests[version]
	if !ok {
		t.Fatalf("the chart copy has no version %s: Write it first", version)
	}
	if len(names) == 0 || len(namespaces) == 0 {
		t.Fatalf("waiting for CRs %v in namespaces %v: want at least one of each", names, namespaces)
	}
	Eventually(t, timeout, func(ctx context.Context) error {
		crs, err := c.List(ctx, namespaces...)
		if err != nil {
			return err
		}
		var off []string
		for _, n := range names {
			if cr := crs[n]; cr == nil || !OnChart(cr, digest) {
				off = append(off, n)
			}
		}
		if len(off) > 0 {
			return fmt.Errorf("%d CRs not Ready on chart %s (%s) yet, e.g. %v", len(off), version, digest, off[:min(5, len(off))])
		}
		return nil
	})
}

// Write makes the copy the chart of version: the chart as shipped (whatever its own version)
// for 0.1.0, else with the
// pod annotation PodChartAnnotation set to the version; with failFor, the template fails
// for the release of that name. The chart keeps its name; its CRD facts name RolloutGVK.
func (c *ChartCopy) Write(t testing.TB, version, failFor string) {
	t.Helper()
	src := filepath.Join(RepoRoot(), "helm-charts", "memcached")
	dst := filepath.Join(c.Dir, "memcached")
	chartYAML, err := os.ReadFile(filepath.Join(src, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(chartYAML), "\n") {
		switch {
		case strings.HasPrefix(l, "version: "): // the chart as shipped is the copy's 0.1.0
			l = "version: " + version
		case strings.Contains(l, "crd.warpdrive.transwarp.io/plural:"):
			l = "  crd.warpdrive.transwarp.io/plural: " + RolloutGVR.Resource
		case strings.Contains(l, "crd.warpdrive.transwarp.io/shortNames:"), strings.Contains(l, "crd.warpdrive.transwarp.io/categories:"):
			continue
		}
		lines = append(lines, l)
	}
	chartYAML = []byte(strings.Join(lines, "\n"))
	deploy, err := os.ReadFile(filepath.Join(src, "templates", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d := string(deploy)
	if version != "0.1.0" {
		d = strings.Replace(d, "  template:\n    metadata:\n",
			fmt.Sprintf("  template:\n    metadata:\n      annotations:\n        %s: %q\n", PodChartAnnotation, version), 1)
	}
	if failFor != "" {
		d = fmt.Sprintf("{{- if eq .Release.Name %q }}{{ fail \"chart %s breaks this release\" }}{{ end }}\n", failFor, version) + d
	}
	if err := os.WriteFile(filepath.Join(dst, "Chart.yaml"), chartYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "templates", "deployment.yaml"), []byte(d), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(dst)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != version {
		t.Fatalf("chart copy has version %s, want %s", ch.Metadata.Version, version)
	}
	c.Digests[version] = rollout.Digest(ch)
}

// OnChart reports whether cr's release is on the chart of digest (status.chart.digest) and
// cr is Ready at its generation.
func OnChart(cr *unstructured.Unstructured, digest string) bool {
	d, _, _ := unstructured.NestedString(cr.Object, "status", "chart", "digest")
	conds, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			g, _ := m["observedGeneration"].(int64)
			return d == digest && m["status"] == "True" && g == cr.GetGeneration()
		}
	}
	return false
}

// Before reports whether the CR of key a (namespace/name) comes before that of key b in the
// manager's rollout order under orderKey (Env.RolloutOrderKey), neither a canary: the order
// the waves are cut from.
func Before(orderKey []byte, a, b string) bool {
	_, name, _ := strings.Cut(a, "/")
	return Waves(rollout.Policy{Canaries: 1, OrderKey: orderKey}, []string{a, b})[0][0] == name
}

// RolloutOrderKey is the key of the rollout order (rollout.Policy.OrderKey) of the managers
// the tests start: derived, as they derive it, from the signing key they share, in the Lease
// namespace. A manager has made the key by the time any of its CRs is Ready.
func (e *Env) RolloutOrderKey(t testing.TB) []byte {
	t.Helper()
	s := &corev1.Secret{}
	key := client.ObjectKey{Namespace: e.LeaseNamespace, Name: operator.DefaultSigningKeyName}
	if err := e.Client.Get(context.Background(), key, s); err != nil {
		t.Fatalf("the signing key the rollout order is keyed with: %v", err)
	}
	keys, err := releasesign.ParseKeys(s.Data)
	if err != nil {
		t.Fatal(err)
	}
	return keys.Current.Derive(trustedconfig.RolloutOrderPurpose)
}

// Waves are the waves policy cuts the CRs of keys (namespace/name) into, as the manager
// cuts them: the CRs in canaryNamespaces (labelled rollout.CanaryLabel) are the canaries.
// The waves hold the CRs' names. The order is the manager's once policy.OrderKey is
// Env.RolloutOrderKey.
func Waves(policy rollout.Policy, keys []string, canaryNamespaces ...string) [][]string {
	canary := map[string]bool{}
	for _, ns := range canaryNamespaces {
		canary[ns] = true
	}
	members := make([]rollout.Member, len(keys))
	for i, k := range keys {
		ns, _, _ := strings.Cut(k, "/")
		members[i] = rollout.Member{Key: k, Canary: canary[ns]}
	}
	var out [][]string
	for _, w := range rollout.Decide(policy, "any", members, metav1.Now().Time).Waves {
		var wave []string
		for _, k := range w {
			_, name, _ := strings.Cut(k, "/")
			wave = append(wave, name)
		}
		out = append(out, wave)
	}
	return out
}

// WaveOrder checks, from the recorded versions of the CRs and of their Deployments (named
// like them), that the rollout to chart version (digest) went in waves: every Deployment
// took the chart, and none of a wave took it before every CR of the waves before read Ready
// on it and every Deployment of those waves had rolled it out. It returns what it found
// wrong, and a line per wave for the log.
func WaveOrder(waves [][]string, crs, deployments *VersionLog, version, digest string) (problems, report []string) {
	readyAt, movedAt, rolledOutAt := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for _, v := range crs.All() {
		if v.Obj == nil {
			continue
		}
		if _, seen := readyAt[v.Obj.GetName()]; !seen && OnChart(v.Obj, digest) {
			readyAt[v.Obj.GetName()] = v.RV
		}
	}
	for _, v := range deployments.All() {
		if v.Obj == nil {
			continue
		}
		name := v.Obj.GetName()
		ann, _, _ := unstructured.NestedString(v.Obj.Object, "spec", "template", "metadata", "annotations", PodChartAnnotation)
		if ann != version {
			continue
		}
		if _, seen := movedAt[name]; !seen {
			movedAt[name] = v.RV
		}
		if _, seen := rolledOutAt[name]; !seen && rolledOut(v.Obj) {
			rolledOutAt[name] = v.RV
		}
	}
	var prevDone int64 // the revision by which every CR of the waves before was Ready and rolled out
	for i, w := range waves {
		var firstMove, lastDone int64 = -1, 0
		for _, n := range w {
			m, ok := movedAt[n]
			if !ok {
				problems = append(problems, fmt.Sprintf("wave %d: the Deployment of %s never took chart %s", i+1, n, version))
				continue
			}
			if firstMove < 0 || m < firstMove {
				firstMove = m
			}
			r, ok := readyAt[n]
			if !ok {
				problems = append(problems, fmt.Sprintf("wave %d: %s never read Ready on chart %s", i+1, n, version))
			}
			o, ok := rolledOutAt[n]
			if !ok {
				problems = append(problems, fmt.Sprintf("wave %d: the Deployment of %s never rolled chart %s out", i+1, n, version))
			}
			lastDone = max(lastDone, r, o)
		}
		report = append(report, fmt.Sprintf("wave %d: %d CRs, first moved at revision %d, all Ready and rolled out by %d",
			i+1, len(w), firstMove, lastDone))
		if i > 0 && firstMove >= 0 && firstMove <= prevDone {
			problems = append(problems, fmt.Sprintf("wave %d started (revision %d) before wave %d was Ready and rolled out (revision %d)",
				i+1, firstMove, i, prevDone))
		}
		prevDone = max(prevDone, lastDone)
	}
	return problems, report
}

// rolledOut reports whether the Deployment d has rolled its spec out: observed, every
// replica updated and available.
func rolledOut(d *unstructured.Unstructured) bool {
	gen := d.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
	replicas, found, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	updated, _, _ := unstructured.NestedInt64(d.Object, "status", "updatedReplicas")
	available, _, _ := unstructured.NestedInt64(d.Object, "status", "availableReplicas")
	total, _, _ := unstructured.NestedInt64(d.Object, "status", "replicas")
	return observed >= gen && updated == replicas && available == replicas && total == replicas
}

// WaitForTakeOver waits until the suite's manager has taken over the unsigned release records
// it found when its signing key was first used (trustedconfig's take-over, once per cluster).
// A test that makes an unsigned record (a helm CLI install) before that pass would see the
// record taken over as one of the operator's, as an upgrade from a version that did not sign
// does: on a fresh cluster, the suite's first test may start before the pass ends.
func (e *Env) WaitForTakeOver(ctx context.Context) error {
	state := client.ObjectKey{Namespace: e.LeaseNamespace, Name: operator.DefaultSigningKeyName + trustedconfig.StateSuffix}
	return Poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		cm := &corev1.ConfigMap{}
		if err := e.Client.Get(ctx, state, cm); err != nil {
			return err
		}
		if cm.Data[trustedconfig.TakeOverStateKey] == "" {
			return fmt.Errorf("ConfigMap %s records no take-over yet", state)
		}
		return nil
	})
}

// grantRolloutKind gives the ServiceAccount the operator impersonates what config/rbac gives
// it on each kind of watches.yaml, on RolloutGVK, until the end of t: a deployment that
// watched the copy would have it.
func (e *Env) grantRolloutKind(t testing.TB) {
	t.Helper()
	rule := func(resource string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{RolloutGVK.Group}, Resources: []string{RolloutGVR.Resource + resource}, Verbs: verbs}
	}
	name := "e2e-" + RolloutGVR.Resource
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		rule("", "get", "list", "watch", "update"), rule("/status", "patch", "update"), rule("/finalizers", "update")}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ServiceAccount.Namespace, Name: e.ServiceAccount.Name}}}
	for _, obj := range []client.Object{role, binding} {
		if err := e.Client.Create(context.Background(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("granting the ServiceAccount the kind %s: %v", RolloutGVK.Kind, err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.Background(), obj) })
	}
}
