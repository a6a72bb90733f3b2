package drift

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// statusManifests are the Manifests of CRs whose status holds their release's manifest
// (--status-release-manifest): the operator's releases.Manifests without release records. No
// Helm operation ever holds a release.
type statusManifests struct{}

func (statusManifests) Changing(string, string) bool { return false }

func (statusManifests) Object(_ context.Context, cr *unstructured.Unstructured, gvk schema.GroupVersionKind, name string) map[string]any {
	manifest, _, _ := unstructured.NestedString(cr.Object, "status", statuscontract.FieldDeployedRelease, statuscontract.FieldDeployedReleaseManifest)
	for _, doc := range strings.Split(manifest, manifestSeparator) {
		var obj map[string]any
		if yaml.Unmarshal([]byte(doc), &obj) != nil || obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GroupVersionKind() == gvk && u.GetName() == name {
			return obj
		}
	}
	return nil
}
