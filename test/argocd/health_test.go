// Package argocd tests the Argo CD health checks in config/argocd against the status contract
// (docs/status.md), and checks that they agree with kstatus, which Flux and kpt use.
//
// # Fixtures
//
// Every file testdata/*.yaml is one situation: a single, complete custom resource of a kind in
// watches.yaml (apiVersion, kind, metadata with generation, and status as the operator leaves
// it), preceded by header comment lines of the form "# key: value":
//
//	# health: Progressing              required: the health Argo CD must show (Healthy,
//	                                   Progressing, Degraded or Suspended)
//	# kstatus: InProgress              required: what kstatus' status.Compute must say (Current,
//	                                   InProgress, Failed or Terminating)
//	# message: generation 5 waits      optional: a text Argo CD's message must contain
//	# kstatus-differs: <why>           optional: health and kstatus are expected to disagree
//	                                   (see below); says why
//
// Other comment lines are free text. Header lines are read only before the first line that is
// not a comment or blank. The test runs every kind's script from config/argocd/argocd-cm.yaml
// on the object (re-labelled as that kind: all must give the same health and message), checks
// health and message, computes kstatus and checks it, and then checks that the two agree:
// Healthy↔Current, Degraded↔Failed, Progressing↔InProgress or Terminating. Suspended has no
// kstatus counterpart, so that check is skipped for it; any other disagreement needs
// kstatus-differs. To add a situation, add a file; fixtures recorded from the e2e suite use the
// same format.
package argocd

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// fixture is one file of testdata.
type fixture struct {
	health, kstatus, message, kstatusDiffers string
	obj                                      *unstructured.Unstructured
}

// readFixture parses a file of testdata (format in the package comment).
func readFixture(path string) (*fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &fixture{}
	fields := map[string]*string{
		"health": &f.health, "kstatus": &f.kstatus, "message": &f.message, "kstatus-differs": &f.kstatusDiffers,
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		comment, ok := strings.CutPrefix(line, "#")
		if !ok {
			break
		}
		key, value, ok := strings.Cut(strings.TrimSpace(comment), ":")
		if field := fields[key]; ok && field != nil {
			*field = strings.TrimSpace(value)
		}
	}
	if f.health == "" || f.kstatus == "" {
		return nil, fmt.Errorf("%s: the header must have '# health: ...' and '# kstatus: ...' lines", path)
	}

	// Decode as a client does (JSON, numbers as int64 or float64), the form Argo CD and kstatus get.
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.obj = &unstructured.Unstructured{}
	if err := f.obj.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// loadKinds returns the kinds of watches.yaml keyed by Argo CD's "<group>_<Kind>".
func loadKinds(t *testing.T) map[string]schema.GroupVersionKind {
	t.Helper()
	ks, err := framework.Kinds()
	if err != nil {
		t.Fatal(err)
	}
	kinds := make(map[string]schema.GroupVersionKind, len(ks))
	for _, k := range ks {
		kinds[k.GVK.Group+"_"+k.GVK.Kind] = k.GVK
	}
	return kinds
}

// agrees tells whether an Argo CD health and a kstatus status mean the same.
func agrees(health string, ks status.Status) bool {
	switch health {
	case "Healthy":
		return ks == status.CurrentStatus
	case "Degraded":
		return ks == status.FailedStatus
	case "Progressing":
		return ks == status.InProgressStatus || ks == status.TerminatingStatus
	}
	return false
}

func TestHealth(t *testing.T) {
	scripts, err := framework.ArgoHealthScripts()
	if err != nil {
		t.Fatal(err)
	}
	kinds := loadKinds(t)
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata: %v", err)
	}

	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			f, err := readFixture(file)
			if err != nil {
				t.Fatal(err)
			}
			gvk := f.obj.GroupVersionKind()
			// Argo CD keys a health check by group and kind: a fixture at any version a kind
			// has had (v1alpha1 beside v1) is that kind's.
			if _, ok := kinds[gvk.Group+"_"+gvk.Kind]; !ok {
				t.Fatalf("the fixture is a %s, not a kind of watches.yaml", gvk)
			}

			// Each kind's own script, on the object as that kind, as Argo CD would run it.
			var health, message, first string
			for _, key := range slices.Sorted(maps.Keys(scripts)) {
				w, ok := kinds[key]
				if !ok {
					t.Fatalf("argocd-cm.yaml has a health check for %s, not a kind of watches.yaml", key)
				}
				obj := f.obj.DeepCopy()
				obj.SetGroupVersionKind(w)
				h, m, err := framework.ArgoHealth(scripts[key], obj)
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if first == "" {
					health, message, first = h, m, key
				} else if h != health || m != message {
					t.Errorf("%s says %s %q, %s says %s %q: the kinds' checks differ", key, h, m, first, health, message)
				}
			}
			if health != f.health {
				t.Errorf("Argo CD health: got %s (%q), want %s", health, message, f.health)
			}
			if health != "Healthy" && message == "" {
				t.Errorf("%s without a message: it must say what is awaited", health)
			}
			if !strings.Contains(message, f.message) {
				t.Errorf("Argo CD message %q does not contain %q", message, f.message)
			}

			res, err := status.Compute(f.obj)
			if err != nil {
				t.Fatalf("kstatus: %v", err)
			}
			if string(res.Status) != f.kstatus {
				t.Errorf("kstatus: got %s (%q), want %s", res.Status, res.Message, f.kstatus)
			}
			switch {
			case f.health == "Suspended" || f.kstatusDiffers != "":
				// Suspended has no kstatus counterpart; other disagreements are explained in the file.
			case !agrees(f.health, status.Status(f.kstatus)):
				t.Errorf("health %s and kstatus %s disagree: fix the fixture or explain with '# kstatus-differs:'", f.health, f.kstatus)
			}
		})
	}
}

// TestHealthOddObjects runs the check on objects the operator never writes but a user or
// another controller could: the script must still return a health and a message, not fail
// (Argo CD would show Unknown with a Lua error).
func TestHealthOddObjects(t *testing.T) {
	script := readHealthLua(t)
	for name, status := range map[string]any{
		"status not an object":          "broken",
		"conditions null":               map[string]any{"conditions": nil},
		"conditions not a list":         map[string]any{"conditions": "Ready"},
		"condition without fields":      map[string]any{"conditions": []any{map[string]any{}, nil, "x"}},
		"observedGeneration a string":   map[string]any{"observedGeneration": "1", "conditions": []any{map[string]any{"type": "Ready", "status": "True", "observedGeneration": "1"}}},
		"Ready without status or texts": map[string]any{"observedGeneration": int64(1), "conditions": []any{map[string]any{"type": "Ready"}}},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cache.example.com/v1alpha1",
			"kind":       "Memcached",
			"metadata":   map[string]any{"name": "odd", "generation": int64(1)},
			"status":     status,
		}}
		health, message, err := framework.ArgoHealth(script, obj)
		if err != nil || message == "" {
			t.Errorf("%s: got %s %q, %v; want a health with a message", name, health, message, err)
		}
	}
}

// readHealthLua reads config/argocd/health.lua, the one source of every kind's check.
func readHealthLua(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestConfigMap checks config/argocd/argocd-cm.yaml, the patch users apply: it is a patch of
// argocd-cm in namespace argocd with exactly one health check per kind of watches.yaml (a
// kind without one would get no health at all, since Argo CD has none for custom resources),
// and every check is health.lua byte for byte. make manifests (internal/gen/kindgen) writes it.
func TestConfigMap(t *testing.T) {
	script := readHealthLua(t)
	path := filepath.Join(framework.RepoRoot(), "config", "argocd", "argocd-cm.yaml")

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(data, cm); err != nil {
		t.Fatal(err)
	}
	if cm.APIVersion != "v1" || cm.Kind != "ConfigMap" || cm.Name != "argocd-cm" || cm.Namespace != "argocd" {
		t.Errorf("argocd-cm.yaml is %s %s %s/%s, want v1 ConfigMap argocd/argocd-cm", cm.APIVersion, cm.Kind, cm.Namespace, cm.Name)
	}

	scripts, err := framework.ArgoHealthScripts()
	if err != nil {
		t.Fatal(err)
	}
	kinds := loadKinds(t)
	for key := range kinds {
		if _, ok := scripts[key]; !ok {
			t.Errorf("argocd-cm.yaml has no %s%s", framework.ArgoHealthKeyPrefix, key)
		}
	}
	for key, s := range scripts {
		if _, ok := kinds[key]; !ok {
			t.Errorf("argocd-cm.yaml has %s%s, not a kind of watches.yaml", framework.ArgoHealthKeyPrefix, key)
		}
		if s != script {
			t.Errorf("%s%s differs from health.lua: run make manifests", framework.ArgoHealthKeyPrefix, key)
		}
	}
}
