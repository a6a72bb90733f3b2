package trustedconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/manifest"
	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/releasechunks"
	"transwarp.io/tos/warpdrive-operator/internal/releaserecords"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// takenOverAnnotation, on the signing key's Secret, records that the unsigned records found
// when the key was first used have been taken over: from then on an unsigned record is
// never trusted, whoever wrote it.
const takenOverAnnotation = "warpdrive.transwarp.io/unsigned-records-taken-over"

// StateSuffix names, after the key's Secret, the ConfigMap beside it that records what was
// done once to the release records: the take-over of unsigned records (TakeOverStateKey), the
// re-signing of legacy signatures (resignedStateKey). Apart from the key, so that a key
// Secret deleted, recreated or restored from a copy made before does not run the take-over
// again, when records a namespace editor forged since could pass its checks. The key's
// annotation (takenOverAnnotation) says the same for people, and is how earlier versions
// recorded the take-over.
const (
	StateSuffix      = "-take-over"
	TakeOverStateKey = "unsigned-records-taken-over"
)

// recordedState is the field of the records' state ConfigMap, "" if it has none.
func (t *Configs) recordedState(ctx context.Context, keySecret *corev1.Secret, field string) (string, error) {
	cm, err := t.secrets.CoreV1().ConfigMaps(keySecret.Namespace).Get(ctx, keySecret.Name+StateSuffix, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the state of the release records: %w", err)
	}
	return cm.Data[field], nil
}

// stateCreated is when the records' state ConfigMap was created: the take-over, the
// operator's first run with its key in the cluster.
func (t *Configs) stateCreated(ctx context.Context, keySecret *corev1.Secret) (time.Time, error) {
	cm, err := t.secrets.CoreV1().ConfigMaps(keySecret.Namespace).Get(ctx, keySecret.Name+StateSuffix, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the state of the release records: %w", err)
	}
	return cm.CreationTimestamp.Time, nil
}

// recordState sets the field of the records' state ConfigMap, creating it if need be.
func (t *Configs) recordState(ctx context.Context, keySecret *corev1.Secret, field, value string) error {
	configMaps := t.secrets.CoreV1().ConfigMaps(keySecret.Namespace)
	cm, err := configMaps.Get(ctx, keySecret.Name+StateSuffix, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: keySecret.Namespace, Name: keySecret.Name + StateSuffix},
			Data: map[string]string{field: value}}
		_, err = configMaps.Create(ctx, cm, metav1.CreateOptions{})
	case err == nil:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[field] = value
		_, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("recording the state of the release records: %w", err)
	}
	return nil
}

// takeOver signs, once per cluster, the release records that an earlier version of the
// operator wrote without a signature, so that upgrading the operator keeps every release.
//
// Which unsigned records are the operator's cannot be proven: a namespace editor could have
// forged one before the upgrade. So a record is taken over only if it could have been
// written by this operator for a CR that exists: it decodes, it is stored under its own
// name in its own namespace, a CR of that name exists in that namespace of a kind whose
// chart the record names, its manifest touches only that namespace and the cluster-scoped
// kinds the chart declares, and it has hooks only if the chart has. Any other record stays
// unsigned, so it is refused (and reported on its CR) from then on. Whatever a taken-over
// record says, the release operations stay confined (confinedKube).
func (t *Configs) takeOver(ctx context.Context, key releasesign.Key, keySecret *corev1.Secret) error {
	recorded, err := t.recordedState(ctx, keySecret, TakeOverStateKey)
	if err != nil {
		return err
	}
	if annotated, done := keySecret.Annotations[takenOverAnnotation]; done || recorded != "" {
		if recorded == "" {
			// Recorded by a version that kept it on the key only: kept apart from now on.
			return t.recordState(ctx, keySecret, TakeOverStateKey, annotated)
		}
		return nil
	}
	signed, refused, err := t.takeOverRecords(ctx, isUnsignedRecord, isUnsignedRecord, key.Sign,
		"not taking over release record: it stays unsigned and will be refused")
	if err != nil {
		return err
	}
	outcome := fmt.Sprintf("%s: %d signed, %d refused", time.Now().UTC().Format(time.RFC3339), signed, refused)
	if err := t.recordState(ctx, keySecret, TakeOverStateKey, outcome); err != nil {
		return err
	}
	keySecret = keySecret.DeepCopy()
	if keySecret.Annotations == nil {
		keySecret.Annotations = map[string]string{}
	}
	keySecret.Annotations[takenOverAnnotation] = outcome
	if _, err := t.secrets.CoreV1().Secrets(keySecret.Namespace).Update(ctx, keySecret, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("recording the take-over of release records: %w", err)
	}
	ctrl.Log.WithName("release-takeover").Info("took over the unsigned release records of an earlier version",
		"signed", signed, "refused", refused)
	return nil
}

// takeOverRecords is the loop of both take-overs (takeOver, takeOverOtherKeys): it signs with
// sign each release record that mayTakeOver allows among those whose metadata in the
// manager's cache passes listed and which, read from the API server, pass read; refusing
// logs refusal with the record and the reason.
//
// The candidates come from the manager's cache, which holds the Secrets labelled owner=helm
// without their data: a namespace editor can label Secrets of up to 1 MiB each, so the
// take-over reads the data of one candidate at a time, and none of a Secret that listed
// rules out.
func (t *Configs) takeOverRecords(ctx context.Context, listed, read func(*corev1.Secret) bool,
	sign func(namespace string, s *corev1.Secret), refusal string) (signed, refused int, err error) {
	log := ctrl.Log.WithName("release-takeover")
	candidates, err := t.cachedRecords(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("listing release records to take over: %w", err)
	}
	for i := range candidates {
		c := &candidates[i]
		if !listed(c) {
			continue
		}
		// A record in parts (releasechunks) is read, and signed, whole.
		records := releasechunks.New(t.secrets.CoreV1().Secrets(c.Namespace))
		s, err := records.Get(ctx, c.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return signed, refused, fmt.Errorf("reading release record %s/%s to take over: %w", c.Namespace, c.Name, err)
		}
		if !read(s) {
			continue // changed since the cache saw it
		}
		if err := t.mayTakeOver(ctx, s); err != nil {
			refused++
			log.Info(refusal, "namespace", s.Namespace, "secret", s.Name, "reason", err.Error())
			continue
		}
		sign(s.Namespace, s)
		_, err = records.Update(ctx, s, metav1.UpdateOptions{})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			signed++
		case refusedForGood(err):
			// A record the API server will not take with a signature (its annotations padded
			// to their size limit): refused like a forged one, and no reason to fail the
			// take-over of the others, which would run again at each reconcile of every CR.
			refused++
			log.Info(refusal, "namespace", s.Namespace, "secret", s.Name, "reason", "the API server refused it signed: "+err.Error())
		default:
			return signed, refused, fmt.Errorf("signing release record %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return signed, refused, nil
}

// cachedRecords are the Secrets labelled as release records that the manager's cache holds:
// their metadata, as Secrets of a record's type, which the cache does not hold; whatever acts
// on one reads it whole first, and checks it again.
func (t *Configs) cachedRecords(ctx context.Context) ([]corev1.Secret, error) {
	list := releaserecords.CachedList()
	if err := t.records.List(ctx, list, client.MatchingLabels{"owner": "helm"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]corev1.Secret, len(list.Items))
	for i := range list.Items {
		out[i] = corev1.Secret{ObjectMeta: list.Items[i].ObjectMeta, Type: releasesign.RecordType}
	}
	return out, nil
}

// refusedForGood reports whether the API server refused a write for what the object is, so
// that writing it again would be refused again.
func refusedForGood(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// isUnsignedRecord reports whether s is a Helm record without any signature: only such a
// record is an earlier version's; one whose signature fails was changed, or signed with
// another key, and stays refused.
func isUnsignedRecord(s *corev1.Secret) bool {
	_, signed := s.Annotations[releasesign.SignatureAnnotation]
	return !signed && s.Type == "helm.sh/release.v1"
}

// mayTakeOver returns nil if s is a record this operator could have written (see takeOver).
func (t *Configs) mayTakeOver(ctx context.Context, s *corev1.Secret) error {
	rel, err := decodeRecord(s.Data["release"])
	if err != nil {
		return err
	}
	if rel.Namespace != s.Namespace || s.Name != fmt.Sprintf("sh.helm.release.v1.%s.v%d", rel.Name, rel.Version) ||
		s.Labels["name"] != rel.Name {
		return fmt.Errorf("record of release %s/%s revision %d is stored as %s/%s", rel.Namespace, rel.Name, rel.Version, s.Namespace, s.Name)
	}
	chartName := rel.Chart.Metadata.Name
	for _, p := range t.policies {
		if p.Chart != chartName {
			continue
		}
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(p.GVK)
		if err := t.reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: rel.Name}, cr); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if len(rel.Hooks) > 0 && !p.Hooks {
			return fmt.Errorf("the record has hooks and chart %s has none", chartName)
		}
		manifests := []string{rel.Manifest}
		for _, h := range rel.Hooks {
			manifests = append(manifests, h.Manifest)
		}
		if err := confinedManifest(t.mapper, s.Namespace, p.ClusterKinds, p.RBACKinds, manifests...); err != nil {
			return err
		}
		return t.clusterObjectsOwned(ctx, s.Namespace, rel.Name, manifests...)
	}
	return fmt.Errorf("no custom resource %s/%s of a kind with chart %q", s.Namespace, rel.Name, chartName)
}

// confinedManifest returns an error if a manifest names an object outside namespace ns, a
// cluster-scoped kind not in clusterKinds or a Role or RoleBinding not in rbacKinds (as
// confinedKube would refuse it).
func confinedManifest(mapper meta.RESTMapper, ns string, clusterKinds, rbacKinds []schema.GroupKind, manifests ...string) error {
	heads, err := manifest.Heads(manifests...)
	if err != nil {
		return err
	}
	for _, h := range heads {
		mapping, err := mapper.RESTMapping(h.GVK.GroupKind(), h.GVK.Version)
		if err != nil {
			return fmt.Errorf("manifest names %s: %w", h.GVK, err)
		}
		gk := h.GVK.GroupKind()
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if h.Namespace != "" && h.Namespace != ns {
				return &outsideReleaseError{kind: gk.String(), namespace: h.Namespace, name: h.Name, releaseNamespace: ns}
			}
			if chartpolicy.IsNamespacedRBAC(gk) && !slices.Contains(rbacKinds, gk) {
				return &outsideReleaseError{kind: gk.String(), namespace: ns, name: h.Name, undeclaredRBAC: true}
			}
			continue
		}
		if !slices.Contains(clusterKinds, gk) {
			return &outsideReleaseError{kind: gk.String(), name: h.Name}
		}
	}
	return nil
}

// clusterObjectsOwned returns an error if a cluster-scoped object the manifests name exists
// and is not the release's own, by Helm's ownership annotations. A declared cluster-scoped
// kind passes confinedManifest under any name: without this, a record a namespace editor
// wrote, naming an administrator's StorageClass, would be signed, and the release's next
// upgrade or uninstall would delete that class as its own.
func (t *Configs) clusterObjectsOwned(ctx context.Context, ns, releaseName string, manifests ...string) error {
	heads, err := manifest.Heads(manifests...)
	if err != nil {
		return err // confinedManifest has refused it already
	}
	for _, h := range heads {
		mapping, err := t.mapper.RESTMapping(h.GVK.GroupKind(), h.GVK.Version)
		if err != nil || mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			continue
		}
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(mapping.GroupVersionKind)
		if err := t.reader.Get(ctx, client.ObjectKey{Name: h.Name}, live); err != nil {
			if apierrors.IsNotFound(err) {
				continue // the release would create it
			}
			return err
		}
		if a := live.GetAnnotations(); a[ownership.HelmReleaseNameAnnotation] != releaseName || a[ownership.HelmReleaseNamespaceAnnotation] != ns {
			return fmt.Errorf("the record names %s %s, which is not release %s/%s's", h.GVK.Kind, h.Name, ns, releaseName)
		}
	}
	return nil
}

// maxRecordBytes bounds a record's release once decompressed: the take-over reads records
// anyone may have written, and a few KiB of gzip can expand to gigabytes. A record of the
// operator's own charts is far smaller.
const maxRecordBytes = 16 << 20

// recordHead is what the take-over reads of a record's release: neither its values nor its
// chart's files, which a forged record can make as large and as deeply nested as the bound
// allows, and which would cost many times their size decoded into maps.
type recordHead struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Manifest  string `json:"manifest"`
	Chart     struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"chart"`
	Hooks []struct {
		Manifest string `json:"manifest"`
	} `json:"hooks"`
}

// decodeRecord decodes the release in a record's data, as Helm's Secrets driver stores it:
// base64 of the (usually gzipped) JSON of the release, at most maxRecordBytes of it. Helm
// does not export its decoder, and reading each record again through its driver would cost
// one request per record.
func decodeRecord(data []byte) (*recordHead, error) {
	if len(data) == 0 {
		return nil, errors.New("the record holds no release")
	}
	b, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, fmt.Errorf("decoding the record: %w", err)
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b, 0x08}) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("decoding the record: %w", err)
		}
		if b, err = io.ReadAll(io.LimitReader(r, maxRecordBytes+1)); err != nil {
			return nil, fmt.Errorf("decoding the record: %w", err)
		}
	}
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("the record's release is larger than %d MiB", maxRecordBytes>>20)
	}
	rel := &recordHead{}
	if err := json.Unmarshal(b, rel); err != nil {
		return nil, fmt.Errorf("decoding the record: %w", err)
	}
	if rel.Name == "" || strings.ContainsAny(rel.Name, "/ ") {
		return nil, fmt.Errorf("the record names no valid release")
	}
	return rel, nil
}
