// Package sidecar composes the sidecar process (`manager sidecar`): for every kind in
// watches.yaml, a status controller that writes the live state of each CR's workloads into
// the CR's status (sidecar/internal/workloadstatus), and for the pool kind the books of each
// WarpdrivePool's claims (sidecar/internal/poolstatus); and, when asked, the CRD conversion
// webhook of the kinds whose chart has a conversions.yaml (sidecar/internal/conversionwebhook).
// It is to the sidecar what internal/operator is to the manager.
package sidecar

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
	"transwarp.io/tos/warpdrive-operator/sidecar/internal/poolstatus"
	"transwarp.io/tos/warpdrive-operator/sidecar/internal/workloadstatus"
)

// DefaultWorkers is how many CRs of each kind the status controllers sync at once unless
// told otherwise (see workloadstatus.DefaultWorkers).
const DefaultWorkers = workloadstatus.DefaultWorkers

// Options configures the sidecar.
type Options struct {
	// Watches are the kinds of the helm-operator's watches file; a status controller runs
	// for each.
	Watches []watchfile.Watch
	// Workers is how many CRs of each kind the status controllers sync at once (see
	// workloadstatus.DefaultWorkers).
	Workers int
	// Conversion configures the CRD conversion webhook; its zero value serves none.
	Conversion Conversion
	// LeaderElection is whether the sidecar elects a leader: the conversion webhook's
	// certificate is then written by the leader only.
	LeaderElection bool
	// LeaderElectionNamespace is the namespace of the Secret of the conversion webhook's
	// certificate out of a cluster, when the flag names none.
	LeaderElectionNamespace string
}

// ManagerOptions completes mgrOpts with the scheme, cache and client options the sidecar's
// controllers need; it must be called before the manager is created.
//
// The cache keeps of each object only what the controllers read (see
// workloadstatus.CacheOptions and poolstatus.CacheOptions), and no managed fields.
// controller-runtime reads unstructured objects straight from the API server unless told
// otherwise; the CRs are read on every sync, so they are served from the (trimmed) cache
// too.
func ManagerOptions(mgrOpts *ctrl.Options, opts Options) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("building the scheme: %w", err)
	}
	mgrOpts.Scheme = scheme
	mgrOpts.Cache = cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         cacheByObject(opts),
	}
	mgrOpts.Client = client.Options{Cache: &client.CacheOptions{Unstructured: true}}
	return nil
}

// cacheByObject is what the cache keeps of each type the controllers read.
func cacheByObject(opts Options) map[client.Object]cache.ByObject {
	gvks := make([]schema.GroupVersionKind, 0, len(opts.Watches))
	for _, w := range opts.Watches {
		gvks = append(gvks, w.GroupVersionKind())
	}
	return poolstatus.CacheOptions(workloadstatus.CacheOptions(gvks), poolstatus.PoolKind)
}

// informerGetter is the part of a manager's cache addInformers uses.
type informerGetter interface {
	GetInformer(ctx context.Context, obj client.Object,
		opts ...cache.InformerGetOption) (cache.Informer, error)
}

// addInformers gives the manager's cache c an informer of every type the controllers read,
// before it starts. controller-runtime otherwise adds a controller's informers as the
// controller starts, which is on the leader only: a new pod would answer /readyz before
// listing the CRs and the workloads, and, once leader, list them while the CRs' status waits
// (19 s at 10,000 CRs, docs/bench/restart-10000). Added here, they are listed as the process
// starts, and /readyz waits for them (internal/mgropts).
func addInformers(ctx context.Context, c informerGetter, opts Options) error {
	for obj := range cacheByObject(opts) {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("informer of %T %s: %w", obj, obj.GetObjectKind().GroupVersionKind(), err)
		}
	}
	return nil
}

// Setup registers on mgr the workload index, the informers of every type the controllers
// read (addInformers), one status controller per watched kind, the pool bookkeeping for the
// pool kind, and the conversion webhook if opts.Conversion has a port.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	log := ctrl.Log.WithName("setup")
	gks := make([]schema.GroupKind, 0, len(opts.Watches))
	for _, w := range opts.Watches {
		gks = append(gks, w.GroupVersionKind().GroupKind())
	}
	kinds := workloadstatus.NewKindSet(gks...)
	if err := workloadstatus.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := addInformers(ctx, mgr.GetCache(), opts); err != nil {
		return err
	}
	for _, w := range opts.Watches {
		r := &workloadstatus.StatusReconciler{
			Client:   mgr.GetClient(),
			Live:     mgr.GetAPIReader(),
			GVK:      w.GroupVersionKind(),
			Kinds:    kinds,
			Selector: w.Selector,
			Workers:  opts.Workers,
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("status controller for %s: %w", w.GroupVersionKind(), err)
		}
		log.Info("Configured status controller", "gvk", w.GroupVersionKind(), "chart", w.Chart)
		if w.GroupVersionKind().GroupKind() == poolstatus.PoolKind {
			if err := poolstatus.Setup(ctx, mgr, w.GroupVersionKind(), w.Selector); err != nil {
				return fmt.Errorf("pool bookkeeping for %s: %w", w.GroupVersionKind(), err)
			}
			log.Info("Configured pool bookkeeping", "gvk", w.GroupVersionKind())
		}
	}
	if opts.Conversion.Port != 0 {
		if err := setupConversion(ctx, mgr, opts); err != nil {
			return fmt.Errorf("conversion webhook: %w", err)
		}
	}
	return nil
}
