package storagemigration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The manager's rights for the migration: the kinds' objects the pass updates are granted with
// the kinds; their CRDs' status, only by name (internal/gen/kindgen).
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=update

// remaining is how many objects of a kind are still to be rewritten.
var remaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "warpdrive_storage_migration_remaining",
	Help: "Objects of the kind still to be rewritten at the storage version: counted down by the operator's pass; " +
		"with a StorageVersionMigration, the kind's objects when it started, then 0 once it succeeded.",
}, []string{"kind"})

func init() { metrics.Registry.MustRegister(remaining) }

// Migrator migrates the stored objects of the kinds, a runnable of the leader.
type Migrator struct {
	// Kinds are the kinds of watches.yaml, each at its storage version (the one it watches).
	Kinds []schema.GroupVersionKind
	// Client writes the objects, the StorageVersionMigrations and the CRDs' status; Reader
	// lists and reads them, uncached.
	Client   client.Client
	Reader   client.Reader
	Mapper   meta.RESTMapper
	Recorder record.EventRecorder
	Log      logr.Logger
	// OwnPassOnly makes the operator's own pass rewrite the objects even where the API server
	// serves StorageVersionMigrations (TestStorageMigration tests the pass so).
	OwnPassOnly bool
	// PickupTimeout is how long a StorageVersionMigration may go without any status before
	// the operator's pass does the work instead; zero is DefaultPickupTimeout.
	PickupTimeout time.Duration
}

// NeedLeaderElection says that only the leader migrates.
func (*Migrator) NeedLeaderElection() bool { return true }

// Start migrates each kind, retrying a kind whose migration failed with back-off, until all
// are done or ctx ends. A failure is logged, never fatal: the objects stay readable at every
// served version meanwhile.
func (m *Migrator) Start(ctx context.Context) error {
	for _, gvk := range m.Kinds {
		backoff := wait.Backoff{Duration: 5 * time.Second, Factor: 2, Steps: 8, Cap: 5 * time.Minute}
		err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := m.migrate(ctx, gvk); err != nil {
				m.Log.Error(err, "migrating stored objects, will retry", "kind", gvk.GroupKind().String())
				return false, nil
			}
			return true, nil
		})
		if err != nil && ctx.Err() == nil {
			m.Log.Error(err, "migrating stored objects: gave up until the next start", "kind", gvk.GroupKind().String())
		}
	}
	return nil
}

// migrate rewrites the objects of gvk's kind if its CRD lists a stored version other than
// gvk's, then prunes the list.
func (m *Migrator) migrate(ctx context.Context, gvk schema.GroupVersionKind) error {
	mapping, err := m.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: mapping.Resource.GroupResource().String()}, crd); err != nil {
		return err
	}
	if !stale(crd.Status.StoredVersions, gvk.Version) {
		remaining.WithLabelValues(gvk.Kind).Set(0)
		return nil
	}
	done, err := m.rewriteStored(ctx, gvk, mapping.Resource.GroupResource(), crd)
	if err != nil {
		return err
	}
	// Read again: the API server may have added the storage version since.
	if err := m.Reader.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		return err
	}
	before := crd.Status.StoredVersions
	crd.Status.StoredVersions = []string{gvk.Version}
	if err := m.Client.Status().Update(ctx, crd); err != nil {
		return fmt.Errorf("pruning the stored versions of %s: %w", crd.Name, err)
	}
	remaining.WithLabelValues(gvk.Kind).Set(0)
	m.Recorder.Eventf(crd, corev1.EventTypeNormal, "StorageMigrated",
		"%s; status.storedVersions %v is now [%s]", done, before, gvk.Version)
	m.Log.Info("stored objects migrated", "kind", gvk.GroupKind().String(), "how", done, "storedVersions", before)
	return nil
}

// rewriteStored has every object of gr, crd's resource, rewritten at gvk's version: by a
// StorageVersionMigration where the API server serves them, else (or if it failed) by the
// operator's own pass. It says how, for the Event.
func (m *Migrator) rewriteStored(ctx context.Context, gvk schema.GroupVersionKind, gr schema.GroupResource,
	crd *apiextensionsv1.CustomResourceDefinition) (string, error) {
	if !m.OwnPassOnly {
		served, err := m.migrationsServed()
		if err != nil {
			return "", err
		}
		if served {
			name := migrationName(crd, gvk.Version)
			err := m.viaAPIServer(ctx, gvk, gr, name)
			var failed *migrationFailed
			if !errors.As(err, &failed) {
				return fmt.Sprintf("objects rewritten at %s by StorageVersionMigration %s", gvk.Version, name), err
			}
			m.Log.Info("StorageVersionMigration did not migrate, the operator's pass does", "kind", gvk.GroupKind().String(),
				"storageVersionMigration", name, "reason", failed.why)
			m.Recorder.Eventf(crd, corev1.EventTypeWarning, "StorageVersionMigrationFailed",
				"StorageVersionMigration %s: %s; the operator rewrites the objects itself", name, failed.why)
		}
	}
	rewritten, err := m.rewrite(ctx, gvk)
	return fmt.Sprintf("%d objects rewritten at %s", rewritten, gvk.Version), err
}

// stale reports whether stored lists a version other than storage.
func stale(stored []string, storage string) bool {
	return slices.ContainsFunc(stored, func(v string) bool { return v != storage })
}

// Add adds the migration of kinds to mgr.
func Add(mgr manager.Manager, kinds []schema.GroupVersionKind) error {
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme, svmv1beta1.AddToScheme} {
		if err := add(mgr.GetScheme()); err != nil {
			return err
		}
	}
	return mgr.Add(&Migrator{Kinds: kinds, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(),
		Recorder: mgr.GetEventRecorderFor("storage-migration"), Log: mgr.GetLogger().WithName("storage-migration")})
}
