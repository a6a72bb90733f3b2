package informers

import (
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/sharedstrings"
)

// CacheOptions is the manager's cache: what the reconcilers read, and no more. bound, if not
// nil, sees every object first: the operator's keeps a CR whose spec holds too many values
// without its spec (internal/operator.CacheOptions).
func CacheOptions(bound func(obj any)) cache.Options {
	return cache.Options{
		// Nothing reads managedFields or kubectl's last-applied copy from the cache; they are
		// a large part of every object (see StripUnread). Release objects are cached as
		// metadata only (drift.Filter).
		DefaultTransform: func(obj any) (any, error) {
			if bound != nil {
				bound(obj)
			}
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				boundMetadata(m)
			}
			return StripUnread(obj)
		},
		// The reconcilers watch Secrets only to notice deleted release Secrets (Helm reads
		// releases through its own client): without a selector the cache would hold every
		// Secret of the cluster, and with their data every release, chart included.
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Label:     labels.SelectorFromSet(labels.Set{"owner": "helm"}),
				Transform: dropSecretData,
			},
		},
	}
}

// lastApplied is the annotation in which `kubectl apply` keeps a copy of what it applied.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// StripUnread drops from every cached object what the manager never reads: managed fields
// and kubectl's last-applied copy of the object. A CR applied with kubectl carries its spec
// twice; the cache of a CR kind is as large as a tenant makes its CRs, and is shared by every
// tenant, so only what is read is kept.
//
// What is kept has its strings interned (internal/sharedstrings): at 10,000 CRs the manager's heap
// holds every CR and the metadata of three or four release objects per CR, whose keys and
// most values are the same strings over and over.
func StripUnread(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a[lastApplied] != "" {
			delete(a, lastApplied)
			m.SetAnnotations(a)
		}
	}
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		o.Object = sharedstrings.Value(o.Object).(map[string]any)
	case metav1.Object:
		sharedstrings.Meta(o)
	}
	return obj, nil
}

// The reconcilers and the signed storage watch and read release Secrets as metadata only
// (filteringCache.GetInformer, internal/operator/trustedconfig): a watch of typed Secrets
// receives each Secret whole, so the informer would decode up to 1 MiB for every Secret a
// namespace editor labels as a record before its data could be dropped. The cache holds them
// as the metadata of a Secret (releaserecords.Cached), and dropSecretData bounds what it keeps of each.

// dropSecretData keeps of a cached release Secret only the metadata the manager reads: Helm's
// labels and the signature's annotations (and, like every cached object, no managed fields: a
// per-object transform replaces the default one). A namespace editor may label Secrets as
// records of their own release, with up to 1 MiB of data and 256 KiB of annotations each; the
// cache holds them for as long as they exist, so it holds no more of them than of a record.
func dropSecretData(obj any) (any, error) {
	if s, ok := obj.(*corev1.Secret); ok {
		s.Data, s.StringData = nil, nil
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetLabels(keepOnly(m.GetLabels(), recordLabels, maxRecordMeta))
		m.SetAnnotations(keepOnly(m.GetAnnotations(), recordAnnotations, maxRecordMeta))
	}
	return StripUnread(obj)
}

// The manager caches as metadata the objects of every kind its charts render (drift.Filter), of
// every namespace: each ConfigMap, Service or Deployment of the cluster, a chart's or not. A
// namespace editor may give each of their objects 256 KiB of annotations and more of labels;
// 2,000 ConfigMaps so annotated would hold 500 MiB on each replica. Of an object cached as
// metadata, boundMetadata keeps:
//   - the annotations that tie it to a CR and a release (cachedAnnotations), each bounded;
//   - in place of every other annotation, their digest (annotationsDigest), which changes as
//     they do: the drift filter passes an update that changed one (drift.Filter), and reads the
//     object from the API server to judge it;
//   - its labels, up to maxCachedLabels bytes in all; past that, in their place, their digest
//     (labelsDigest). The labels the manager selects cached objects by (the Namespaces'
//     rollout labels, written by cluster administrators) are a few short ones.
//
// The deployment controller's annotations (drift.ControllerAnnotations) are dropped: no change of
// them wakes a drift check.
var cachedAnnotations = []string{ownership.OwnerNameAnnotation, ownership.OwnerTypeAnnotation,
	ownership.HelmReleaseNameAnnotation, ownership.HelmReleaseNamespaceAnnotation}

const (
	annotationsDigest = "warpdrive.transwarp.io/cached-annotations-digest"
	labelsDigest      = "warpdrive.transwarp.io/cached-labels-digest"
	// maxCachedAnnotation is the longest annotation of cachedAnnotations kept: a
	// "<namespace>/<name>" is at most 507 bytes, a group and kind less. A longer value ties
	// nothing, and is kept empty.
	maxCachedAnnotation = 512
	maxCachedLabels     = 4 << 10
)

func boundMetadata(m *metav1.PartialObjectMetadata) {
	if a := m.GetAnnotations(); len(a) > 0 {
		kept := keepOnly(a, cachedAnnotations, maxCachedAnnotation)
		rest := maps.Clone(a)
		maps.DeleteFunc(rest, func(k, _ string) bool {
			return slices.Contains(cachedAnnotations, k) || strings.HasPrefix(k, drift.ControllerAnnotations)
		})
		if len(rest) > 0 {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[annotationsDigest] = digestOf(rest)
		}
		m.SetAnnotations(kept)
	}
	if l := m.GetLabels(); len(l) > 0 {
		size := 0
		for k, v := range l {
			size += len(k) + len(v)
		}
		if size > maxCachedLabels {
			m.SetLabels(map[string]string{labelsDigest: digestOf(l)})
		}
	}
}

// digestOf is a short digest of m, the same for the same entries.
func digestOf(m map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(m[k]))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:18])
}

// recordLabels are the labels Helm gives a record; recordAnnotations those its signature is.
var (
	recordLabels      = []string{"owner", "name", "status", "version"}
	recordAnnotations = []string{releasesign.SignatureAnnotation, releasesign.DigestAnnotation}
)

// maxRecordMeta is the longest label or annotation value of a record kept in the cache: Helm's
// labels are at most 63 bytes (a label value), a signature 56, a digest 43. A longer value
// can be neither, so it is kept empty, which no signature verifies.
const maxRecordMeta = 64

// keepOnly returns the entries of m under keys, those longer than max emptied.
func keepOnly(m map[string]string, keys []string, max int) map[string]string {
	var out map[string]string
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(keys))
		}
		if len(v) > max {
			v = ""
		}
		out[k] = v
	}
	return out
}
