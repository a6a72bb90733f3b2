package security

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// guestbookFrom is a Guestbook whose image comes from spec.valuesFrom refs: the image is
// rendered into its Deployment, which a namespace editor can read.
func guestbookFrom(ns, name string, refs ...map[string]any) *unstructured.Unstructured {
	cr := guestbook(ns, name, 0)
	list := make([]any, len(refs))
	for i, r := range refs {
		list[i] = r
	}
	cr.Object["spec"].(map[string]any)["valuesFrom"] = list
	return cr
}

// kindEditor is a user of ns with only the Guestbook editor role (config/rbac): they may edit
// Guestbooks and read nothing else, Secrets included.
func kindEditor(t *testing.T, ns string) client.Client {
	t.Helper()
	user := "guestbook-editor@" + ns
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guestbook-editor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "guestbook-editor-role"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if err := env.Client.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A namespace editor, and a user who may only edit Guestbooks, try to read Secrets through
// spec.valuesFrom: a Secret of their namespace an administrator did not label readable,
// another namespace's Secret (by a name with a slash, by a namespace field, which the schema
// prunes), the operator's signing key by its name, 2 MiB of sources, 17 references. Each is
// refused, at admission or on the CR by name and reason; the Secrets' values reach no
// rendered object, CR or Event; nothing outside the namespace changes; and another tenant's
// CR, which takes its image from a labelled Secret, is served.
func TestValuesFromReadsNothingElse(t *testing.T) {
	if stock {
		t.Skip("the stock helm-operator has no spec.valuesFrom")
	}
	ctx := context.Background()
	attacker, other := newTenant(t), newTenant(t)
	victimNS, _ := victim(t)
	const canary = "vf-attack-canary-91c2e7"
	secretWith := func(ns, name string, labelled bool, data string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"image": data}}
		if labelled {
			s.Labels = map[string]string{valuesfrom.ReadableLabel: "true"}
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	ref := func(name string, more ...any) map[string]any {
		r := map[string]any{"kind": "Secret", "name": name, "valuesKey": "image", "targetPath": "image"}
		for i := 0; i+1 < len(more); i += 2 {
			r[more[i].(string)] = more[i+1]
		}
		return r
	}
	// Another tenant's Guestbook takes its image from a Secret they labelled: served (before the
	// snapshot, which covers their namespace).
	const image = "registry.example/guestbook:from-secret"
	secretWith(other.ns, "frontend", true, image)
	theirs := guestbookFrom(other.ns, "theirs", ref("frontend"))
	if err := other.client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: other.ns, Name: "theirs"}, d); err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("their Deployment runs %q, want %q from their Secret", got, image)
		}
		got := theirs.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
			return err
		}
		if status, reason, msg := framework.Condition(got, "Ready"); status != "True" {
			return fmt.Errorf("their Guestbook: Ready=%q %s: %s", status, reason, msg)
		}
		return nil
	})

	secretWith(attacker.ns, "db-root", false, canary) // the administrator's, not labelled
	secretWith(victimNS, "db-root", true, canary)     // another namespace's, labelled there
	before := outside(t, attacker.ns)

	editorOnly := kindEditor(t, attacker.ns)
	refused := []struct {
		name   string
		by     client.Client
		cr     *unstructured.Unstructured
		reason string // the CR's Ready reason and the text it says
		says   string
	}{
		{"unlabelled Secret", attacker.client, guestbookFrom(attacker.ns, "unlabelled", ref("db-root")),
			"ValuesFromFailed", `Secret "db-root": not labelled ` + valuesfrom.ReadableLabel},
		{"unlabelled Secret, kind editor", editorOnly, guestbookFrom(attacker.ns, "unlabelled-editor", ref("db-root")),
			"ValuesFromFailed", `Secret "db-root": not labelled`},
		{"a namespace field, pruned", attacker.client, guestbookFrom(attacker.ns, "other-namespace", ref("db-root", "namespace", victimNS)),
			"ValuesFromFailed", `Secret "db-root": not labelled`},
		{"the signing key's name", attacker.client, guestbookFrom(attacker.ns, "signing-key", ref(operator.DefaultSigningKeyName)),
			"ValuesFromFailed", `Secret "` + operator.DefaultSigningKeyName + `": not found`},
	}
	// 2 MiB of sources: two labelled Secrets of the attacker's own, 1 MiB each.
	big := strings.Repeat("x", 1<<20-64)
	secretWith(attacker.ns, "big-1", true, big)
	secretWith(attacker.ns, "big-2", true, big)
	refused = append(refused, struct {
		name   string
		by     client.Client
		cr     *unstructured.Unstructured
		reason string
		says   string
	}{"2 MiB of sources", attacker.client, guestbookFrom(attacker.ns, "big", ref("big-1", "targetPath", "a"), ref("big-2", "targetPath", "b")),
		"ValuesFromFailed", "more than 1048576 bytes in all"})
	for _, c := range refused {
		if err := c.by.Create(ctx, c.cr); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}

	// Refused at admission.
	many := make([]map[string]any, valuesfrom.MaxRefs+1)
	for i := range many {
		many[i] = ref(fmt.Sprintf("s%d", i))
	}
	for name, cr := range map[string]*unstructured.Unstructured{
		"a name with a namespace": guestbookFrom(attacker.ns, "slash", ref(victimNS+"/db-root")),
		"a path in the key":       guestbookFrom(attacker.ns, "dots", ref("db-root", "valuesKey", "../image")),
		"17 references":           guestbookFrom(attacker.ns, "many", many...),
	} {
		if err := attacker.client.Create(ctx, cr); err == nil {
			t.Errorf("%s: admitted", name)
		}
	}

	for _, c := range refused {
		framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
			got := c.cr.DeepCopy()
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c.cr), got); err != nil {
				return err
			}
			if status, reason, msg := framework.Condition(got, "Ready"); status != "False" || reason != c.reason || !strings.Contains(msg, c.says) {
				return fmt.Errorf("%s: Ready=%q %s: %s; want False %s saying %q", c.name, status, reason, msg, c.reason, c.says)
			}
			return nil
		})
	}

	// Nothing of the Secrets anywhere the attacker can read.
	var violations []string
	var deployments appsv1.DeploymentList
	if err := env.Client.List(ctx, &deployments, client.InNamespace(attacker.ns)); err != nil {
		t.Fatal(err)
	}
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(attacker.ns)); err != nil {
		t.Fatal(err)
	}
	var crs []any
	for _, c := range refused {
		got := c.cr.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c.cr), got); err == nil {
			crs = append(crs, got.Object)
		}
	}
	for what, v := range map[string]any{"the Deployments": deployments.Items, "the Events": events.Items, "the CRs": crs} {
		data, _ := json.Marshal(v)
		for _, form := range []string{canary, base64.StdEncoding.EncodeToString([]byte(canary))} {
			if strings.Contains(string(data), form) {
				violations = append(violations, fmt.Sprintf("%s hold the Secret's value", what))
			}
		}
	}
	violations = append(violations, before.diff(outside(t, attacker.ns))...)
	report(t, violations)
}

// A namespace editor rewrites the labelled Secret their Guestbook takes its image from in a
// loop, 40 versions in a few seconds, while another tenant edits a CR: the looping CR is
// upgraded at most once every informers.ForcedInterval (10 s), not at each version, and ends at the
// last one; the other tenant's edit applies; the manager stays up.
func TestValuesFromSourceRewriteLoop(t *testing.T) {
	if stock {
		t.Skip("the stock helm-operator has no spec.valuesFrom")
	}
	ctx := context.Background()
	attacker, other := newTenant(t), newTenant(t)
	image := func(i int) string { return fmt.Sprintf("registry.example/guestbook:loop-%d", i) }
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: attacker.ns, Name: "frontend",
		Labels: map[string]string{valuesfrom.ReadableLabel: "true"}}, StringData: map[string]string{"image": image(0)}}
	if err := attacker.client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	cr := guestbookFrom(attacker.ns, "looping",
		map[string]any{"kind": "Secret", "name": "frontend", "valuesKey": "image", "targetPath": "image"})
	theirs := appService(other.ns, "y", "y-app", 1)
	for _, c := range []struct {
		tn *tenant
		cr *unstructured.Unstructured
	}{{attacker, cr}, {other, theirs}} {
		if err := c.tn.client.Create(ctx, c.cr); err != nil {
			t.Fatal(err)
		}
	}
	first, err := deployed(cr, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deployed(theirs, 1); err != nil {
		t.Fatal(err)
	}

	const versions = 40
	start := time.Now()
	for i := 1; i <= versions; i++ {
		secret.StringData = map[string]string{"image": image(i)}
		if err := attacker.client.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		if i == versions/2 {
			other.setReplicas(t, theirs, 2)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d versions of the Secret written in %v", versions, time.Since(start).Round(time.Millisecond))
	var v []string
	if err := deploymentReplicas(other.ns, "y-app", 2); err != nil {
		v = append(v, "the other tenant's edit: "+err.Error())
	}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), d); err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image(versions) {
			return fmt.Errorf("the looping Guestbook's Deployment runs %q, want %q, the Secret's last", got, image(versions))
		}
		got := cr.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		applied, _, _ := unstructured.NestedSlice(got.Object, "status", "valuesFrom")
		if len(applied) != 1 || applied[0].(map[string]any)["resourceVersion"] != secret.ResourceVersion {
			return fmt.Errorf("status.valuesFrom is %v, want the Secret at its last version %s", applied, secret.ResourceVersion)
		}
		return nil
	})
	last, err := deployed(cr, first+1)
	if err != nil {
		t.Fatal(err)
	}
	// One upgrade at the first version, one at the end of the interval; a third if the loop
	// outlasted it.
	t.Logf("%d versions of the source upgraded the CR %d times (revision %d to %d)", versions, last-first, first, last)
	if last-first > 3 {
		v = append(v, fmt.Sprintf("the %d versions of the source upgraded the CR %d times, want at most 3", versions, last-first))
	}
	if manager.Exited() {
		v = append(v, "the manager exited")
	}
	report(t, v)
}
