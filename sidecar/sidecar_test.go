package sidecar

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// informersAsked records the types whose informers addInformers asks for.
type informersAsked []string

func (a *informersAsked) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	name := fmt.Sprintf("%T", obj)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		name = u.GetKind()
	}
	*a = append(*a, name)
	return nil, nil
}

func TestSetupAsksForTheInformerOfEveryCachedType(t *testing.T) {
	ws, err := watchfile.Load("../watches.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var asked informersAsked
	if err := addInformers(context.Background(), &asked, Options{Watches: ws}); err != nil {
		t.Fatal(err)
	}
	// Every CR kind, whose list is most of a start at 10,000 CRs, and every workload type.
	want := []string{"*v1.Deployment", "*v1.StatefulSet", "*v1.DaemonSet", "*v1.PersistentVolumeClaim"}
	for _, w := range ws {
		want = append(want, w.GroupVersionKind().Kind)
	}
	slices.Sort(asked)
	slices.Sort(want)
	if !slices.Equal(asked, want) {
		t.Errorf("informers asked for %v, want %v", asked, want)
	}
}
