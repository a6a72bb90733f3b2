package crdgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

// widgetWithVersions writes the Widget chart with conversions.yaml and, for v1alpha1, the
// spec schema of v1 itself or, with renamed, one whose replicas were replicaCount.
func widgetWithVersions(t *testing.T, conversions string, renamed bool) string {
	t.Helper()
	dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), map[string]string{
		AnnotationPlural: "widgets", AnnotationReplicasPath: ".spec.replicas",
	}, testSchema)
	crd, err := Generate(dir, widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if renamed {
		spec.Properties["replicaCount"] = spec.Properties["replicas"]
		delete(spec.Properties, "replicas")
	}
	data, err := MarshalSpecSchema(&spec)
	if err != nil {
		t.Fatal(err)
	}
	write := func(rel, content string) {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(conversion.VersionsDir, SchemaFile("v1alpha1")), string(data))
	write("conversions.yaml", conversions)
	return dir
}

func TestGenerateVersions(t *testing.T) {
	t.Run("same schema", func(t *testing.T) {
		dir := widgetWithVersions(t, "- {from: v1alpha1, to: v1}\n", false)
		crd, err := Generate(dir, widgetGVK)
		if err != nil {
			t.Fatal(err)
		}
		vs := crd.Spec.Versions
		if len(vs) != 2 || vs[0].Name != "v1alpha1" || vs[1].Name != "v1" {
			t.Fatalf("versions %v, want v1alpha1 and v1", vs)
		}
		if !vs[0].Served || vs[0].Storage || !vs[1].Served || !vs[1].Storage {
			t.Errorf("v1alpha1 served %v storage %v, v1 served %v storage %v; want both served, v1 stored",
				vs[0].Served, vs[0].Storage, vs[1].Served, vs[1].Storage)
		}
		if c := crd.Spec.Conversion; c == nil || c.Strategy != apiextv1.NoneConverter || c.Webhook != nil {
			t.Errorf("conversion %+v, want None", c)
		}
	})

	t.Run("moved values", func(t *testing.T) {
		dir := widgetWithVersions(t, "- from: v1alpha1\n  to: v1\n  moves: [{from: /replicaCount, to: /replicas}]\n", true)
		if err := os.WriteFile(filepath.Join(dir, conversion.VersionsDir, DeprecatedFile), []byte("v1alpha1: use v1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		crd, err := Generate(dir, widgetGVK)
		if err != nil {
			t.Fatal(err)
		}
		c := crd.Spec.Conversion
		if c == nil || c.Strategy != apiextv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig.Service == nil {
			t.Fatalf("conversion %+v, want Webhook to a Service", c)
		}
		svc := c.Webhook.ClientConfig.Service
		if svc.Name != WebhookServiceName || svc.Namespace != WebhookServiceNamespace || *svc.Path != WebhookPath || *svc.Port != WebhookPort {
			t.Errorf("service %+v", svc)
		}
		if got := c.Webhook.ConversionReviewVersions; len(got) != 1 || got[0] != "v1" {
			t.Errorf("conversionReviewVersions %v, want [v1]", got)
		}
		old := crd.Spec.Versions[0]
		if !old.Deprecated || old.DeprecationWarning == nil || *old.DeprecationWarning != "use v1" {
			t.Errorf("v1alpha1 deprecated %v warning %v, want deprecated with its warning", old.Deprecated, old.DeprecationWarning)
		}
		// v1alpha1 has no spec.replicas: no scale subresource, the newest keeps it.
		if old.Subresources.Scale != nil || crd.Spec.Versions[1].Subresources.Scale == nil {
			t.Errorf("scale of v1alpha1 %v, of v1 %v; want none, then one", old.Subresources.Scale, crd.Spec.Versions[1].Subresources.Scale)
		}
		if _, ok := old.Schema.OpenAPIV3Schema.Properties["spec"].Properties["replicaCount"]; !ok {
			t.Errorf("v1alpha1's spec has no replicaCount: not the schema of its file")
		}
	})

	for _, tc := range []struct {
		name, conversions, extra, want string
	}{
		{"newest is not watched", "- {from: v1alpha1, to: v2}\n", "", "newest version of conversions.yaml is v2"},
		{"schema of no version", "- {from: v1alpha1, to: v1}\n", SchemaFile("v1beta1"), "v1beta1.schema.json is of no older version"},
		{"deprecated newest", "- {from: v1alpha1, to: v1}\n", DeprecatedFile, "v1 is not an older version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := widgetWithVersions(t, tc.conversions, false)
			var err error
			switch tc.extra {
			case DeprecatedFile:
				err = os.WriteFile(filepath.Join(dir, conversion.VersionsDir, DeprecatedFile), []byte("v1: no\n"), 0o644)
			case "":
			default:
				err = os.WriteFile(filepath.Join(dir, conversion.VersionsDir, tc.extra), []byte("{}"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = Generate(dir, widgetGVK)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}

	t.Run("schema without conversions", func(t *testing.T) {
		dir := widgetWithVersions(t, "", false)
		if err := os.Remove(filepath.Join(dir, "conversions.yaml")); err != nil {
			t.Fatal(err)
		}
		_, err := Generate(dir, widgetGVK)
		if err == nil || !strings.Contains(err.Error(), "conversions.yaml is not") {
			t.Errorf("error %v, want one saying conversions.yaml is missing", err)
		}
	})
}
