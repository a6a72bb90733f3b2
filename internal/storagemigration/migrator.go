package storagemigration

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The manager's rights for the pass: the kinds' objects it updates are granted with the kinds;
// their CRDs' status, only by name (internal/gen/kindgen).
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=update

// remaining is how many objects of a kind the pass has still to rewrite.
var remaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "warpdrive_storage_migration_remaining",
	Help: "Objects of the kind still stored at a version other than the storage version, as the migration pass last counted them.",
}, []string{"kind"})

func init() { metrics.Registry.MustRegister(remaining) }

// pageSize bounds each list of the pass, so that a kind of 10,000 objects is not one answer.
const pageSize = 500

// Migrator is the pass, a runnable of the leader.
type Migrator struct {
	// Kinds are the kinds of watches.yaml, each at its storage version (the one it watches).
	Kinds []schema.GroupVersionKind
	// Client writes the objects and the CRDs' status; Reader lists and reads them, uncached.
	Client   client.Client
	Reader   client.Reader
	Mapper   meta.RESTMapper
	Recorder record.EventRecorder
	Log      logr.Logger
}

// NeedLeaderElection says that only the leader migrates.
func (*Migrator) NeedLeaderElection() bool { return true }

// Start migrates each kind, retrying a kind whose pass failed with back-off, until all are done
// or ctx ends. A failure is logged, never fatal: the objects stay readable at every served
// version meanwhile.
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
	rewritten, err := m.rewrite(ctx, gvk)
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
	m.Recorder.Eventf(crd, corev1.EventTypeNormal, "StorageMigrated",
		"%d objects rewritten at %s; status.storedVersions %v is now [%s]", rewritten, gvk.Version, before, gvk.Version)
	m.Log.Info("stored objects migrated", "kind", gvk.GroupKind().String(), "rewritten", rewritten, "storedVersions", before)
	return nil
}

// stale reports whether stored lists a version other than storage.
func stale(stored []string, storage string) bool {
	return slices.ContainsFunc(stored, func(v string) bool { return v != storage })
}

// rewrite updates each object of gvk's kind as it is listed, so that the API server stores it
// at the storage version, and returns how many it rewrote.
func (m *Migrator) rewrite(ctx context.Context, gvk schema.GroupVersionKind) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := m.Reader.List(ctx, list, client.Limit(pageSize)); err != nil {
		return 0, err
	}
	left := int(ptrOr(list.GetRemainingItemCount(), 0)) + len(list.Items)
	remaining.WithLabelValues(gvk.Kind).Set(float64(left))
	rewritten := 0
	for {
		for i := range list.Items {
			switch err := m.Client.Update(ctx, &list.Items[i]); {
			case err == nil:
				rewritten++
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				// Written since it was listed (stored at the new version, the edit kept), or gone.
			default:
				return rewritten, fmt.Errorf("rewriting %s %s/%s: %w", gvk.Kind, list.Items[i].GetNamespace(), list.Items[i].GetName(), err)
			}
			left--
			remaining.WithLabelValues(gvk.Kind).Set(float64(left))
		}
		next := list.GetContinue()
		if next == "" {
			return rewritten, nil
		}
		list = &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := m.Reader.List(ctx, list, client.Limit(pageSize), client.Continue(next)); err != nil {
			return rewritten, err
		}
	}
}

func ptrOr(p *int64, or int64) int64 {
	if p == nil {
		return or
	}
	return *p
}

// Add adds the pass over kinds to mgr.
func Add(mgr manager.Manager, kinds []schema.GroupVersionKind) error {
	if err := apiextensionsv1.AddToScheme(mgr.GetScheme()); err != nil {
		return err
	}
	return mgr.Add(&Migrator{Kinds: kinds, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Mapper: mgr.GetRESTMapper(),
		Recorder: mgr.GetEventRecorderFor("storage-migration"), Log: mgr.GetLogger().WithName("storage-migration")})
}
