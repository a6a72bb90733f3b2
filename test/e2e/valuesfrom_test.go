package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestValuesFrom: SecretHolders (testdata/secretchart) take their token from a Secret and a
// user name from a ConfigMap (spec.valuesFrom). Each step checks what a user would:
//   - the rendered Secret holds the source's value, status.valuesFrom its version, Ready;
//   - an edit of the source upgrades the release, and moves status.valuesFrom;
//   - paused, a changed source waits (Ready False says which), and applies on resume;
//   - a render error and a refused install that quote the token are reported redacted;
//   - an unlabelled Secret is refused by name, then used once labelled;
//   - a source deleted while in use: the CR says what is missing, the release stays.
//
// Then no token appears in any CR (spec, status, conditions), in the namespace's Events or in
// the manager's log.
func TestValuesFrom(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator has no spec.valuesFrom")
	}
	ctx := context.Background()
	ns := env.Namespace(t)
	env.InstallChartKind(t, secretHolders)
	mgr := startSecretHolderManager(t, "manager-valuesfrom")
	t.Cleanup(func() { mgr.Stop() })
	// The sidecar too: Ready waits for its word that the release's workloads rolled out.
	sidecar, err := env.StartSidecar(framework.ProcessOptions{Name: "sidecar-valuesfrom", WatchesFile: secretHolders.WatchesFile(t),
		Flags: []string{"--leader-election-id=sidecar-valuesfrom"}})
	if err != nil {
		t.Fatal(err)
	}
	processes = append(processes, sidecar)
	t.Cleanup(func() { sidecar.Stop() })

	tokens := []string{"vf-token-one-3c9e1d", "vf-token-two-8a4f27", "vf-token-three-e61b05", "vf-token-plain-2d7c93"}
	db := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db",
		Labels: map[string]string{valuesfrom.ReadableLabel: "true"}},
		StringData: map[string]string{"values.yaml": "token: " + tokens[0] + "\n"}}
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"},
		Data: map[string]string{"user": "alice"}}
	env.Create(t, db)
	env.Create(t, settings)
	holder := func(name string, refs []any, values map[string]any) *unstructured.Unstructured {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(secretHolderGVK)
		cr.SetNamespace(ns)
		cr.SetName(name)
		spec := map[string]any{"valuesFrom": refs}
		for k, v := range values {
			spec[k] = v
		}
		cr.Object["spec"] = spec
		env.Create(t, cr)
		t.Cleanup(func() { // before the manager stops; a paused CR would keep its finalizer
			patch := []byte(`{"metadata":{"annotations":{"` + statuscontract.PauseAnnotation + `":null}}}`)
			_ = env.Client.Patch(context.Background(), cr, client.RawPatch("application/merge-patch+json", patch))
			deleteAndWait(t, cr)
		})
		return cr
	}
	ref := func(kind, name string, more ...string) map[string]any {
		r := map[string]any{"kind": kind, "name": name}
		for i := 0; i+1 < len(more); i += 2 {
			r[more[i]] = more[i+1]
		}
		return r
	}
	app := holder("app", []any{ref("Secret", "db"), ref("ConfigMap", "settings", "valuesKey", "user", "targetPath", "user")}, nil)

	// rendered waits until the CR's rendered Secret holds token, and returns the CR then.
	rendered := func(cr *unstructured.Unstructured, token string) {
		t.Helper()
		framework.Eventually(t, converge, func(ctx context.Context) error {
			s := &corev1.Secret{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cr.GetName() + "-credentials"}, s); err != nil {
				return err
			}
			if got := string(s.Data["token"]); got != token {
				return fmt.Errorf("the rendered Secret holds token %q, want %q", got, token)
			}
			return nil
		})
	}
	// ready waits until cr is Ready at its generation with status.valuesFrom at the sources'
	// versions now.
	ready := func(cr *unstructured.Unstructured, sources ...client.Object) {
		t.Helper()
		framework.Eventually(t, converge, func(ctx context.Context) error {
			got, err := getReadyCR(ctx, cr)
			if err != nil {
				return err
			}
			list, _, _ := unstructured.NestedSlice(got.Object, "status", "valuesFrom")
			if len(list) != len(sources) {
				return fmt.Errorf("status.valuesFrom %v, want %d sources", list, len(sources))
			}
			for i, src := range sources {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(src), src); err != nil {
					return err
				}
				m, _ := list[i].(map[string]any)
				if m["name"] != src.GetName() || m["resourceVersion"] != src.GetResourceVersion() {
					return fmt.Errorf("status.valuesFrom[%d] = %v, want %s at version %s", i, m, src.GetName(), src.GetResourceVersion())
				}
			}
			return nil
		})
	}
	setToken := func(token string) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
			t.Fatal(err)
		}
		db.Data = map[string][]byte{"values.yaml": []byte("token: " + token + "\n")}
		if err := env.Client.Update(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	readyReason := func(cr *unstructured.Unstructured, reason, text string) {
		t.Helper()
		framework.Eventually(t, converge, func(ctx context.Context) error {
			got, err := getCR(ctx, cr)
			if err != nil {
				return err
			}
			if status, r, msg := framework.Condition(got, statuscontract.Ready); status != "False" || r != reason || !strings.Contains(msg, text) {
				return fmt.Errorf("Ready=%q %s: %s; want False %s with %q", status, r, msg, reason, text)
			}
			return nil
		})
	}

	// Rendered from both sources.
	rendered(app, tokens[0])
	ready(app, db, settings)
	if s := (&corev1.Secret{}); env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-credentials"}, s) != nil ||
		string(s.Data["user"]) != "alice" {
		t.Errorf("the ConfigMap's user did not reach the release: %v", s.Data)
	}

	// A new version of the Secret is applied.
	setToken(tokens[1])
	rendered(app, tokens[1])
	ready(app, db, settings)
	waitRevision(t, ns, "app", 2)

	// Paused, the change waits and says so.
	annotate := func(cr *unstructured.Unstructured, key, value string) {
		t.Helper()
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}}
		data, _ := json.Marshal(patch)
		if err := env.Client.Patch(ctx, cr, client.RawPatch("application/merge-patch+json", data)); err != nil {
			t.Fatal(err)
		}
	}
	annotate(app, statuscontract.PauseAnnotation, "true")
	waitCondition(t, app, "Paused", "True")
	setToken(tokens[2])
	readyReason(app, statuscontract.ReasonPaused, `the change of Secret "db" waits`)
	rendered(app, tokens[1])
	annotate(app, statuscontract.PauseAnnotation, "false")
	rendered(app, tokens[2])
	ready(app, db, settings)

	// A render error that quotes the token.
	patchSpec(t, app, map[string]any{"failWith": "policy"})
	failed := waitCondition(t, app, statuscontract.Stalled, "True")
	if _, _, msg := framework.Condition(failed, statuscontract.Stalled); !strings.Contains(msg, "the token "+valuesfrom.Redacted+" is refused") {
		t.Errorf("Stalled says %q, want the chart's error with the token redacted", msg)
	}
	waitEvent(t, app, "UpgradeFailed", "the token "+valuesfrom.Redacted+" is refused")
	patchSpec(t, app, map[string]any{"failWith": ""})
	ready(app, db, settings)

	// A failed install whose API error quotes the token.
	refused := holder("refused", []any{ref("Secret", "db")}, map[string]any{"refusedLabel": true})
	waitCondition(t, refused, statuscontract.Stalled, "True")
	waitEvent(t, refused, "InstallFailed", valuesfrom.Redacted+"!")

	// An unlabelled Secret: refused by name, used once labelled.
	plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
		StringData: map[string]string{"values.yaml": "token: " + tokens[3] + "\n"}}
	env.Create(t, plain)
	other := holder("other", []any{ref("Secret", "plain")}, nil)
	readyReason(other, reasonValuesFromFailed, `Secret "plain": not labelled `+valuesfrom.ReadableLabel)
	waitEvent(t, other, reasonValuesFromFailed, `Secret "plain"`)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plain), plain); err != nil {
		t.Fatal(err)
	}
	plain.Labels = map[string]string{valuesfrom.ReadableLabel: "true"}
	if err := env.Client.Update(ctx, plain); err != nil {
		t.Fatal(err)
	}
	rendered(other, tokens[3])
	ready(other, plain)

	// A source deleted while in use: the release stays, the CR says what is missing.
	if err := env.Client.Delete(ctx, db); err != nil {
		t.Fatal(err)
	}
	readyReason(app, reasonValuesFromFailed, `Secret "db": not found`)
	rendered(app, tokens[2])

	// Nowhere but in the Secrets and the releases.
	var crs unstructured.UnstructuredList
	crs.SetGroupVersionKind(secretHolderGVK.GroupVersion().WithKind(secretHolderGVK.Kind + "List"))
	if err := env.Client.List(ctx, &crs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	crsJSON, _ := json.Marshal(crs.Items)
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	eventsJSON, _ := json.Marshal(events.Items)
	log, err := mgr.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range tokens {
		for where, text := range map[string]string{"the CRs": string(crsJSON), "the Events": string(eventsJSON), "the manager's log": log} {
			for _, form := range []string{token, base64.StdEncoding.EncodeToString([]byte(token))} {
				if strings.Contains(text, form) {
					t.Errorf("%s hold %q", where, form)
				}
			}
		}
	}
}

// reasonValuesFromFailed is the reason of a CR whose spec.valuesFrom cannot be read.
const reasonValuesFromFailed = "ValuesFromFailed"

// TestReadmeCredentialsExample applies the README's example of "Credentials from a Secret" as
// it is written there: the Memcached runs with memcached's auth file from the Secret, the
// password is in no CR, and a new password in the Secret reaches the pods' template.
func TestReadmeCredentialsExample(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator has no spec.valuesFrom")
	}
	ctx := context.Background()
	ns := env.Namespace(t)
	readme, err := os.ReadFile(filepath.Join(env.Root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "### Credentials from a Secret\n")
	_, block, ok2 := strings.Cut(after, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 {
		t.Fatal(`README.md has no yaml block under "### Credentials from a Secret"`)
	}
	var cr *unstructured.Unstructured
	var source *corev1.Secret
	for _, doc := range strings.Split(block, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(ns)
		env.Create(t, u)
		switch u.GetKind() {
		case "Memcached":
			cr = u
		case "Secret":
			source = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: u.GetName()}}
		}
	}
	if cr == nil || source == nil {
		t.Fatal("the README's example has no Memcached or no Secret")
	}
	// authFile waits until the rendered auth file is want and the pods' template carries a
	// checksum of it other than before: Helm writes the Secret before the Deployment, so the
	// Secret alone does not say that the upgrade has reached the template.
	authFile := func(want, before string) string {
		t.Helper()
		var checksum string
		framework.Eventually(t, converge, func(ctx context.Context) error {
			s := &corev1.Secret{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cr.GetName() + "-auth"}, s); err != nil {
				return err
			}
			if got := string(s.Data["auth"]); got != want {
				return fmt.Errorf("the auth file is %q, want %q", got, want)
			}
			d := deployment(cr, cr.GetName())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--auth-file=/etc/memcached/auth") {
				return fmt.Errorf("memcached runs with %v, without its auth file", args)
			}
			checksum = d.Spec.Template.Annotations["checksum/auth"]
			if checksum == before {
				return fmt.Errorf("the pods' template has the auth file's checksum %q, want another", before)
			}
			return nil
		})
		return checksum
	}
	first := authFile("app:change-me\n", "")
	waitCondition(t, cr, statuscontract.Ready, "True")

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(source), source); err != nil {
		t.Fatal(err)
	}
	source.Data = map[string][]byte{"values.yaml": []byte("auth:\n  username: app\n  password: changed-at-last\n")}
	if err := env.Client.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	// Fails unless the new password changes the pods' template.
	authFile("app:changed-at-last\n", first)
	got := mustGetCR(t, cr)
	if data, _ := json.Marshal(got.Object); strings.Contains(string(data), "change-me") || strings.Contains(string(data), "changed-at-last") {
		t.Errorf("the CR holds the password: %s", data)
	}
}

// TestSourceChangeReadyWaitsForTheRollout: an edit of a Memcached's spec.valuesFrom Secret
// changes its pods' template (checksum/auth) with no new generation of the CR, so the
// sidecar's RolledOut written before the upgrade names the same generation as the release
// after it. A watch records every version of the CR and of its Deployment, ordered by
// resourceVersion; from the first version of the CR whose status.valuesFrom names the
// Secret's new version, Ready must not read True while the Deployment, at that moment, has
// not rolled the new template out (docs/status.md, "A change with no new generation").
func TestSourceChangeReadyWaitsForTheRollout(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator has no spec.valuesFrom")
	}
	ctx := context.Background()
	ns := env.Namespace(t)
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-credentials",
		Labels: map[string]string{valuesfrom.ReadableLabel: "true"}},
		StringData: map[string]string{"values.yaml": "auth:\n  username: app\n  password: first\n"}}
	env.Create(t, source)
	cr := newCR(t, "Memcached", ns, "cache", map[string]any{"size": int64(2),
		"valuesFrom": []any{map[string]any{"kind": "Secret", "name": source.Name}}})
	env.Create(t, cr)
	d := deployment(cr, cr.GetName())
	var first string
	framework.Eventually(t, converge, func(ctx context.Context) error {
		if _, err := getReadyCR(ctx, cr); err != nil {
			return err
		}
		if err := get(ctx, d); err != nil {
			return err
		}
		first = d.Spec.Template.Annotations["checksum/auth"]
		return nil
	})
	if first == "" {
		t.Fatal("the Deployment's template has no checksum/auth: the password does not reach it")
	}

	crLog := env.Record(t, env.GVR(cr.GetKind()), cr.GetName(), ns)
	deployLog := env.Record(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, d.Name, ns)
	if err := get(ctx, source); err != nil {
		t.Fatal(err)
	}
	source.Data = map[string][]byte{"values.yaml": []byte("auth:\n  username: app\n  password: second\n")}
	if err := env.Client.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	newVersion := source.ResourceVersion

	// appliedVersion is the version of the Secret that status.valuesFrom names.
	appliedVersion := func(u *unstructured.Unstructured) string {
		list, _, _ := unstructured.NestedSlice(u.Object, "status", "valuesFrom")
		if len(list) != 1 {
			return ""
		}
		m, _ := list[0].(map[string]any)
		v, _ := m["resourceVersion"].(string)
		return v
	}
	// The end: the CR Ready at the new version, the Deployment rolled out with the new template.
	var crRV, deployRV int64
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got, err := getCR(ctx, cr)
		if err != nil {
			return err
		}
		if status, reason, msg := framework.Condition(got, statuscontract.Ready); status != "True" || appliedVersion(got) != newVersion {
			return fmt.Errorf("Ready=%q %s: %s, status.valuesFrom at %q; want True at %q", status, reason, msg, appliedVersion(got), newVersion)
		}
		if err := get(ctx, d); err != nil {
			return err
		}
		if d.Spec.Template.Annotations["checksum/auth"] == first || !rolledOut(d) {
			return fmt.Errorf("the Deployment has not rolled the new password out: %s", rollout(d))
		}
		crRV, deployRV = mustParseRV(t, got.GetResourceVersion()), mustParseRV(t, d.ResourceVersion)
		return nil
	})
	crs := crLog.StopAt(t, crRV, converge)
	deploys := deployLog.StopAt(t, deployRV, converge)

	applied, readyAfter := false, 0
	for _, v := range crs {
		if v.Obj == nil {
			t.Fatalf("the CR was deleted at resourceVersion %d", v.RV)
		}
		applied = applied || appliedVersion(v.Obj) == newVersion
		if !applied || conditionOf(v.Obj, statuscontract.Ready).status != "True" {
			continue
		}
		readyAfter++
		var at *appsv1.Deployment // the Deployment as it was when this version of the CR was written
		for _, dv := range deploys {
			if dv.RV <= v.RV {
				at = toDeployment(t, dv.Obj)
			}
		}
		switch {
		case at == nil:
			t.Errorf("resourceVersion %d: Ready=True with no Deployment", v.RV)
		case at.Spec.Template.Annotations["checksum/auth"] == first:
			t.Errorf("resourceVersion %d: Ready=True at the new Secret's version while the Deployment (rv %s) still has the old template [%s]",
				v.RV, at.ResourceVersion, condensed(v.Obj))
		case !rolledOut(at):
			t.Errorf("resourceVersion %d: Ready=True at the new Secret's version while the Deployment (rv %s) is rolling out: %s [%s]",
				v.RV, at.ResourceVersion, rollout(at), condensed(v.Obj))
		}
	}
	if readyAfter == 0 {
		t.Fatal("the watch saw no Ready=True at the new Secret's version")
	}
	t.Logf("%d versions of the CR and %d of the Deployment after the Secret's edit; %d read Ready=True at its version",
		len(crs), len(deploys), readyAfter)
}
