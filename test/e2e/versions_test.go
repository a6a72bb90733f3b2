package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestOldVersionsServed: the kinds that grew from v1alpha1 to v1 (make add-version) serve
// both. Their samples as they were written at v1alpha1 (testdata/v1alpha1, the files people
// keep in Git) apply verbatim with kubectl, converge to Ready, and read back as written at
// v1alpha1 (with the schema's defaults beside) and with the same spec at v1; applied again,
// kubectl finds nothing to change.
// Each CRD stores v1 alone (status.storedVersions), the storage migration having rewritten
// whatever an earlier version stored.
func TestOldVersionsServed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "v1alpha1", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no v1alpha1 manifests in testdata: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		written := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &written.Object); err != nil {
			t.Fatal(err)
		}
		t.Run(written.GetKind(), func(t *testing.T) {
			ns := env.Namespace(t)
			gvk := written.GroupVersionKind()
			if out, err := env.Kubectl("apply", "-n", ns, "-f", file); err != nil {
				t.Fatalf("kubectl apply of the v1alpha1 manifest: %v: %s", err, out)
			}
			written.SetNamespace(ns)
			waitCondition(t, written, statuscontract.Ready, "True")

			resource := strings.ToLower(gvk.Kind) + "s." + gvk.Group
			var specs []any // as read at each version
			for _, version := range []string{"v1alpha1", "v1"} {
				// resource.version.group: kubectl's way to read a kind at one of its versions.
				out, err := env.Kubectl("get", strings.ToLower(gvk.Kind)+"s."+version+"."+gvk.Group, written.GetName(),
					"-n", ns, "-o", "json")
				if err != nil {
					t.Fatalf("kubectl get at %s: %v: %s", version, err, out)
				}
				read := &unstructured.Unstructured{}
				if err := json.Unmarshal([]byte(out), &read.Object); err != nil {
					t.Fatal(err)
				}
				if read.GetAPIVersion() != gvk.Group+"/"+version {
					t.Errorf("kubectl get at %s read apiVersion %s", version, read.GetAPIVersion())
				}
				// What was written reads back as written; beside it, only the defaults of the
				// CRD's schema, which the API server applies at every version.
				spec, _ := read.Object["spec"].(map[string]any)
				for field, value := range written.Object["spec"].(map[string]any) {
					if !reflect.DeepEqual(spec[field], value) {
						t.Errorf("spec.%s read at %s: %v, want %v as written at v1alpha1", field, version, spec[field], value)
					}
				}
				specs = append(specs, read.Object["spec"])
			}
			if !reflect.DeepEqual(specs[0], specs[1]) {
				t.Errorf("spec at v1alpha1 %v, at v1 %v: want the same", specs[0], specs[1])
			}
			if out, err := env.Kubectl("apply", "-n", ns, "-f", file); err != nil || !strings.Contains(out, "unchanged") {
				t.Errorf("kubectl apply of the same v1alpha1 manifest again: %v: %s, want unchanged", err, out)
			}
			framework.Eventually(t, converge, func(ctx context.Context) error {
				crd := &unstructured.Unstructured{}
				crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
				if err := env.Client.Get(ctx, client.ObjectKey{Name: resource}, crd); err != nil {
					return err
				}
				stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
				if !slices.Equal(stored, []string{"v1"}) {
					return fmt.Errorf("CRD %s stores %v, want [v1]", resource, stored)
				}
				return nil
			})
		})
	}
}
