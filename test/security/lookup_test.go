package security

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// lookupGVK is the kind of TestLookupReadsOnlyTheRelease, bound to test/e2e's test chart
// passwordchart (Bitnami's shape: it calls lookup, and renders spec.extraData through tpl,
// so that whoever writes the spec writes templates). Not the e2e suite's group: the suites
// may run at once on one cluster.
var lookupGVK = schema.GroupVersionKind{Group: "security.warpdrive.transwarp.io", Version: "v1", Kind: "PasswordHolder"}

// lookupKind binds the kind to its chart.
var lookupKind = framework.ChartKind{GVK: lookupGVK,
	Chart: filepath.Join(framework.RepoRoot(), "test", "e2e", "testdata", "passwordchart")}

// A namespace editor writes values that make tpl call lookup on another namespace's Secret
// (labelled readable there), on every namespace's Secrets, on a ClusterRole, on the
// Namespaces, on a Secret of their own namespace that no release owns and no one labelled
// readable, on another release's Secret, and on the Secret of a release that the helm CLI
// installed under the CR's own name. Nothing of any of them is rendered, at install
// nor at upgrade: each reads as absent, as Helm reports what does not exist (an empty map, an
// empty list). A Secret labelled readable is read (so lookup does work; the chart reads the
// release's own for its password), and nothing outside the namespace changes.
func TestLookupReadsOnlyTheRelease(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t)
	victimNS, _ := victim(t)
	const canary = "lookup-attack-canary-4e1f09"
	secret := func(ns, name, token string, labels, annotations map[string]string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
			StringData: map[string]string{"token": token}}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	readable := map[string]string{valuesfrom.ReadableLabel: "true"}
	secret(victimNS, "credentials", canary+"-victim", readable, nil)
	secret(tn.ns, "private", canary+"-private", nil, nil)
	secret(tn.ns, "other-auth", canary+"-other", nil,
		map[string]string{"meta.helm.sh/release-name": "other", "meta.helm.sh/release-namespace": tn.ns})
	secret(tn.ns, "shared", "shared-token", readable, nil)
	// A Secret of a release "x" that the helm CLI installed before the tenant named their CR
	// "x": Helm's annotations name the CR's release, but the operator did not make it.
	secret(tn.ns, "x-db", canary+"-cli", nil,
		map[string]string{"meta.helm.sh/release-name": "x", "meta.helm.sh/release-namespace": tn.ns})

	env.InstallChartKind(t, lookupKind)
	grantLookupKind(t, tn.ns)
	p, err := env.StartManager(framework.ProcessOptions{Name: "security-lookup", Stock: stock, WatchesFile: lookupKind.WatchesFile(t),
		Flags: []string{"--leader-election-id=security-lookup"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	before := outside(t, tn.ns)

	// Each probe is a value the chart renders through tpl into its ConfigMap, and what it must
	// render: absent reads as an empty map ({}, whose .data is null) or an empty list.
	type probe struct{ template, want string }
	probes := map[string]probe{
		"victimSecret":  {fmt.Sprintf(`{{ (lookup "v1" "Secret" %q "credentials").data | toJson }}`, victimNS), "null"},
		"victimSecrets": {fmt.Sprintf(`{{ range (lookup "v1" "Secret" %q "").items }}{{ .metadata.name }}={{ .data | toJson }};{{ end }}`, victimNS), ""},
		"allSecrets":    {`{{ range (lookup "v1" "Secret" "" "").items }}{{ .metadata.namespace }}/{{ .metadata.name }};{{ end }}`, ""},
		"clusterRole":   {`{{ lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" "cluster-admin" | toJson }}`, "{}"},
		"namespaces":    {`{{ range (lookup "v1" "Namespace" "" "").items }}{{ .metadata.name }};{{ end }}`, ""},
		"ownNamespace":  {`{{ lookup "v1" "Namespace" "" .Release.Namespace | toJson }}`, "{}"},
		"private":       {`{{ (lookup "v1" "Secret" .Release.Namespace "private").data | toJson }}`, "null"},
		"otherRelease":  {`{{ (lookup "v1" "Secret" .Release.Namespace "other-auth").data | toJson }}`, "null"},
		"cliRelease":    {`{{ (lookup "v1" "Secret" .Release.Namespace "x-db").data | toJson }}`, "null"},
		"shared":        {`{{ (lookup "v1" "Secret" .Release.Namespace "shared").data.token | b64dec }}`, "shared-token"},
		// The namespace's Secrets: the labelled one (and the release's own, left out here: it
		// appears after the install, and would change the render).
		"ownSecrets": {`{{ range (lookup "v1" "Secret" .Release.Namespace "").items }}{{ if ne .metadata.name "x-auth" }}{{ .metadata.name }};{{ end }}{{ end }}`, "shared;"},
	}
	extraData := func() map[string]any {
		m := map[string]any{}
		for k, p := range probes {
			m[k] = p.template
		}
		return m
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(lookupGVK)
	cr.SetNamespace(tn.ns)
	cr.SetName("x")
	cr.Object["spec"] = map[string]any{"extraData": extraData()}
	if err := tn.client.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	// Before the manager stops, if the test stops early: the finalizer would keep the CR,
	// and the CRD, for ever.
	t.Cleanup(func() { _ = tn.deleteAndWait(cr) })
	// rendered checks what the release rendered at revision rev, whose greeting is greeting.
	rendered := func(rev int64, greeting string) {
		t.Helper()
		if _, err := deployed(cr, rev); err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{}
		framework.Eventually(t, time.Minute, func(ctx context.Context) error {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tn.ns, Name: "x-settings"}, cm); err != nil {
				return err
			}
			if cm.Data["greeting"] != greeting {
				return fmt.Errorf("revision %d rendered greeting %q, want %q", rev, cm.Data["greeting"], greeting)
			}
			return nil
		})
		var violations []string
		keys := make([]string, 0, len(probes))
		for k := range probes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if got := cm.Data[k]; got != probes[k].want {
				violations = append(violations, fmt.Sprintf("revision %d: %s rendered %.300q, want %q", rev, k, got, probes[k].want))
			}
		}
		for k, v := range cm.Data {
			// The Secrets' tokens start with the canary, whose 27 bytes encode alone.
			if strings.Contains(v, canary) || strings.Contains(v, base64.StdEncoding.EncodeToString([]byte(canary))) {
				violations = append(violations, fmt.Sprintf("revision %d: %s holds a Secret's token: %.300q", rev, k, v))
			}
		}
		report(t, violations)
	}
	rendered(1, "hello from x")

	// An upgrade, and the dry run before it, render the probes again.
	patch := []byte(`{"spec":{"greeting":"upgraded"}}`)
	if err := tn.client.Patch(ctx, cr.DeepCopy(), client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	rendered(2, "upgraded")

	if err := tn.deleteAndWait(cr); err != nil {
		t.Fatal(err)
	}
	report(t, before.diff(outside(t, tn.ns)))
}

// grantLookupKind lets the tenant of ns edit the test kind there, as an editor role of a
// kind the operator serves would.
func grantLookupKind(t *testing.T, ns string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "passwordholder-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{lookupGVK.Group}, Resources: []string{"passwordholders"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "passwordholder-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}}
	for _, o := range []client.Object{role, rb} {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}
