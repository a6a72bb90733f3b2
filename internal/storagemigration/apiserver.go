package storagemigration

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"time"

	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager creates a StorageVersionMigration per kind and storage version, and reads it
// until it is done.
// +kubebuilder:rbac:groups=storagemigration.k8s.io,resources=storageversionmigrations,verbs=get;create

const (
	// pollCap bounds the wait between two reads of a StorageVersionMigration.
	pollCap = 10 * time.Second
	// DefaultPickupTimeout is how long a StorageVersionMigration may go without any status
	// before the operator's pass does the work instead (Migrator.PickupTimeout): the API
	// server serves them, but no kube-controller-manager runs its
	// storage-version-migrator-controller (its feature gate off).
	DefaultPickupTimeout = 2 * time.Minute
)

// migrationFailed is why a StorageVersionMigration did not migrate: its Failed condition, or
// no controller picking it up.
type migrationFailed struct{ why string }

func (e *migrationFailed) Error() string { return e.why }

// migrationsServed reports whether the API server serves storagemigration.k8s.io/v1beta1
// StorageVersionMigrations.
func (m *Migrator) migrationsServed() (bool, error) {
	gk := schema.GroupKind{Group: svmv1beta1.GroupName, Kind: "StorageVersionMigration"}
	_, err := m.Mapper.RESTMapping(gk, svmv1beta1.SchemeGroupVersion.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// migrationName is the StorageVersionMigration of crd's objects to storage, the same for the
// same CRD spec, so that a leader that restarted finds the one it created before. The CRD's
// generation is in it: after the storage version went back and forth, an old migration to
// the same version, long Succeeded, is not taken for this one.
func migrationName(crd *apiextensionsv1.CustomResourceDefinition, storage string) string {
	name := fmt.Sprintf("%s-%s-%d", crd.Name, storage, crd.Generation)
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%s-%x", name[:validation.DNS1123SubdomainMaxLength-17], h.Sum64())
}

// viaAPIServer creates the StorageVersionMigration name of gr, or finds it made
// by a previous leader, and waits until it succeeded (nil), failed (a *migrationFailed), or
// ctx ended.
func (m *Migrator) viaAPIServer(ctx context.Context, gvk schema.GroupVersionKind, gr schema.GroupResource, name string) error {
	svm := &svmv1beta1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: svmv1beta1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: gr.Group, Resource: gr.Resource}}}
	switch err := m.Client.Create(ctx, svm); {
	case err == nil:
		m.Log.Info("StorageVersionMigration created", "kind", gvk.GroupKind().String(), "storageVersionMigration", name)
	case apierrors.IsAlreadyExists(err):
		m.Log.Info("StorageVersionMigration found", "kind", gvk.GroupKind().String(), "storageVersionMigration", name)
	default:
		return fmt.Errorf("creating StorageVersionMigration %s: %w", name, err)
	}
	if n, err := m.count(ctx, gvk); err == nil {
		remaining.WithLabelValues(gvk.Kind).Set(float64(n))
	}
	return m.await(ctx, name)
}

// await reads the StorageVersionMigration name, every second at first, then less often,
// until it succeeded or failed.
func (m *Migrator) await(ctx context.Context, name string) error {
	since, pickup := time.Now(), cmp.Or(m.PickupTimeout, DefaultPickupTimeout)
	for delay := time.Second; ; delay = min(2*delay, pollCap) {
		svm := &svmv1beta1.StorageVersionMigration{}
		if err := m.Reader.Get(ctx, client.ObjectKey{Name: name}, svm); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1beta1.MigrationSucceeded)) {
			return nil
		}
		if c := meta.FindStatusCondition(svm.Status.Conditions, string(svmv1beta1.MigrationFailed)); c != nil && c.Status == metav1.ConditionTrue {
			return &migrationFailed{why: "failed: " + c.Message}
		}
		if svm.Status.ResourceVersion == "" && len(svm.Status.Conditions) == 0 && time.Since(since) > pickup {
			return &migrationFailed{why: fmt.Sprintf("no status after %s (does kube-controller-manager run its storage-version-migrator-controller?)", pickup)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// count is how many objects of gvk's kind there are, from a list of one.
func (m *Migrator) count(ctx context.Context, gvk schema.GroupVersionKind) (int64, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := m.Reader.List(ctx, list, client.Limit(1)); err != nil {
		return 0, err
	}
	return ptrOr(list.GetRemainingItemCount(), 0) + int64(len(list.Items)), nil
}
