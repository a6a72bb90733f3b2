package manifest

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestHeads(t *testing.T) {
	got, err := Heads(`---
# Source: app/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: team
data: {x: "1"}
---
# an empty document
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: b
`, "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: c}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Head{
		{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "team", Name: "a"},
		{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Name: "b"},
		{GVK: schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, Name: "c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Heads = %+v, want %+v", got, want)
	}
	if _, err := Heads("kind: [unclosed"); err == nil {
		t.Fatal("Heads of a document that is not YAML: no error")
	}
}
