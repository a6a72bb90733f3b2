package trustedconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"transwarp.io/tos/warpdrive-operator/internal/operator/restconfig"
	"transwarp.io/tos/warpdrive-operator/internal/releasechunks"
	"transwarp.io/tos/warpdrive-operator/internal/releaselists"
	"transwarp.io/tos/warpdrive-operator/internal/releaserecords"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// KindPolicy is what the operator lets the releases of one kind do: render its chart, and
// touch the cluster-scoped kinds the chart declares.
type KindPolicy struct {
	GVK          schema.GroupVersionKind
	Chart        string // the chart's name, as release records carry it
	ClusterKinds []schema.GroupKind
	RBACKinds    []schema.GroupKind // the Roles and RoleBindings the chart declares (chartpolicy.RBACKinds)
	Hooks        bool               // the chart has Helm hooks; without them no hook of any record runs
	// InstallsCRDs: the chart installs CustomResourceDefinitions, so its templates may ask
	// .Capabilities for an API the same action has just added. Its releases read the
	// capabilities afresh for each action, as Helm does, never the shared ones.
	InstallsCRDs bool
}

// Configs hands out Helm action configurations whose release storage is signed
// (internal/releasesign), whose Kubernetes client is confined to the release (confinedKube),
// and whose templates' `lookup` reads only what the release may read (restconfig.Lookup).
// It is the innermost layer of every action client: everything Helm reads of a release's
// history, and everything it applies, passes through it.
//
// Before the first configuration it loads the signing key and, once per cluster, takes
// over the unsigned records an earlier version of the operator wrote (takeOver). Both wait
// for the first reconcile, which runs on the leader only, so standbys never write.
type Configs struct {
	inner   helmclient.ActionConfigGetter
	secrets kubernetes.Interface
	reader  client.Reader
	records client.Reader // the manager's cache of release Secrets, indexed by release (releaserecords)
	// metaSecrets reads Secrets as metadata, so that a record is read whole only once its
	// signature holds on its metadata (recordSecrets).
	metaSecrets metadata.Getter
	census      *releaserecords.Census
	mapper      meta.RESTMapper
	policies    map[schema.GroupVersionKind]KindPolicy
	keySecret   types.NamespacedName

	mu  sync.Mutex
	key releasesign.Keys // loaded once: Current is nil until then
	// loadedKey is key once loaded, for the informers' handlers, which must not wait on mu
	// while a first reconcile loads the key and takes records over (SignedRecord).
	loadedKey atomic.Pointer[releasesign.Keys]
	// previousFields are the fields of the key Secret holding the previous keys, by key id.
	previousFields map[string]string
	// firstRun is when the operator first ran with its key in this cluster (FirstRun).
	firstRun time.Time
	// loaded is closed once the keys are: the re-signing of records of previous keys
	// (resignPrevious) waits for it.
	loaded chan struct{}
	// keyMissingLogged: the refusal to create a key (mayCreateKey) was logged.
	keyMissingLogged bool
	// recorder records on each CR that its reconcile failed for want of the key.
	recorder record.EventRecorder
	// capabilities serve the configurations of every release but those of charts that
	// install CRDs (KindPolicy.InstallsCRDs).
	capabilities sharedCapabilities
}

// reasonKeyMissing is the reason of the Warning Event of a CR not reconciled for want of the
// signing key (KeyMissingError).
const reasonKeyMissing = "ReleaseSigningKeyMissing"

func New(cfg *rest.Config, mgr ctrl.Manager, keySecret types.NamespacedName, policies []KindPolicy,
	secretsPerGET int) (*Configs, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The reconcilers' watch of release Secrets fills this index and census (see releaserecords).
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), releaserecords.Cached(),
		releaserecords.IndexField, releaserecords.IndexRelease); err != nil {
		return nil, fmt.Errorf("indexing release Secrets: %w", err)
	}
	census := releaserecords.NewCensus(secretsPerGET)
	inf, err := mgr.GetCache().GetInformer(context.Background(), releaserecords.Cached())
	if err != nil {
		return nil, fmt.Errorf("counting release Secrets: %w", err)
	}
	if _, err := inf.AddEventHandler(census); err != nil {
		return nil, fmt.Errorf("counting release Secrets: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	t := &Configs{
		secrets: cs, reader: mgr.GetAPIReader(), records: mgr.GetCache(), census: census, mapper: mgr.GetRESTMapper(),
		policies: map[schema.GroupVersionKind]KindPolicy{}, keySecret: keySecret,
		metaSecrets: meta.Resource(corev1.SchemeGroupVersion.WithResource("secrets")),
		loaded:      make(chan struct{}),
		recorder:    mgr.GetEventRecorderFor("release-signing-key"),
	}
	for _, p := range policies {
		t.policies[p.GVK] = p
	}
	// A runnable that needs leader election: only the leader writes records.
	if err := mgr.Add(manager.RunnableFunc(t.resignPrevious)); err != nil {
		return nil, fmt.Errorf("re-signing the records of previous keys: %w", err)
	}
	t.inner, err = helmclient.NewActionConfigGetter(cfg, mgr.GetRESTMapper(), helmclient.StorageDriverMapper(t.storageDriver))
	if err != nil {
		return nil, fmt.Errorf("creating action config getter: %w", err)
	}
	return t, nil
}

// signingKey returns the keys, loading them (and taking over records) the first time. The
// keys are read once per process: a rotation takes a restart (docs/security.md), after which
// the records of the previous keys are re-signed in the background (resignPrevious). Where the
// key's Secret is missing and records were signed before, it creates none (mayCreateKey): each
// call fails until an administrator puts the Secret back, which the next call loads.
func (t *Configs) signingKey(ctx context.Context) (releasesign.Keys, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.key.Current != nil {
		return t.key, nil
	}
	keys, keySecret, created, err := releasesign.LoadOrCreateKeys(ctx, t.secrets, t.keySecret.Namespace, t.keySecret.Name,
		t.mayCreateKey)
	if err != nil {
		return releasesign.Keys{}, err
	}
	keyMissing.Set(0)
	if err := t.reportKeys(ctx, keys, created); err != nil {
		return releasesign.Keys{}, err
	}
	if err := t.takeOver(ctx, keys.Current, keySecret); err != nil {
		return releasesign.Keys{}, err
	}
	if t.firstRun, err = t.stateCreated(ctx, keySecret); err != nil {
		return releasesign.Keys{}, err
	}
	if err := t.takeOverOtherKeys(ctx, keys, keySecret); err != nil {
		return releasesign.Keys{}, err
	}
	if err := t.takeOverReleases(ctx, keys, keySecret); err != nil {
		return releasesign.Keys{}, err
	}
	if keys, err = t.resignLegacy(ctx, keys, keySecret); err != nil {
		return releasesign.Keys{}, err
	}
	t.key = keys
	t.loadedKey.Store(&keys)
	t.previousFields = releasesign.PreviousFields(keySecret.Data)
	if t.loaded != nil {
		close(t.loaded)
	}
	return keys, nil
}

// FirstRun is when the operator first ran with its signing key in this cluster: when it took
// over the unsigned records it found (the state beside the key records it, once). What
// existed then is taken as the operator's, as those records were: a CR created before it,
// such as one restored from a backup that held neither the records nor the key
// (docs/deploying.md, "Backups"), may adopt the objects of its release by Helm's annotations;
// a CR created after must prove them its own (internal/operator's ownershipProof).
func (t *Configs) FirstRun(ctx context.Context) (time.Time, error) {
	if _, err := t.signingKey(ctx); err != nil {
		return time.Time{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.firstRun, nil
}

// UnprovenRecords counts the records of release name in namespace ns, as the manager's cache
// holds them, that no key of the operator verifies: those of a release another tool made (the
// helm CLI, Flux), of a person's Helm command over one of the operator's, or planted by a
// namespace editor. It reads the cache only: the metadata of the release Secrets and their
// signatures.
func (t *Configs) UnprovenRecords(ctx context.Context, ns, name string) (int, error) {
	list := releaserecords.CachedList()
	if err := t.records.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		return 0, fmt.Errorf("listing the records of release %s/%s: %w", ns, name, err)
	}
	n := 0
	for i := range list.Items {
		if !t.SignedRecord(&list.Items[i]) {
			n++
		}
	}
	return n, nil
}

// RolloutOrderKey keys the order of the chart rollouts' waves (rollout.Policy.OrderKey): a
// key derived from the signing key, so that every replica and every restart orders the CRs
// alike, and no namespace editor can compute where a name falls. A rotation of the signing
// key changes it: a rollout under way then goes on in another order (docs/rollouts.md).
func (t *Configs) RolloutOrderKey(ctx context.Context) ([]byte, error) {
	keys, err := t.signingKey(ctx)
	if err != nil {
		return nil, err
	}
	return keys.Current.Derive(RolloutOrderPurpose), nil
}

// RolloutOrderPurpose is the purpose the rollout order's key is derived for
// (releasesign.Key.Derive): tests that predict the waves derive it from the signing key too.
const RolloutOrderPurpose = "rollout-order"

// ActionConfigFor is the configuration for the release of the CR obj.
func (t *Configs) ActionConfigFor(ctx context.Context, obj client.Object) (*action.Configuration, error) {
	policy, ok := t.policies[obj.GetObjectKind().GroupVersionKind()]
	if !ok {
		return nil, fmt.Errorf("no chart policy for %s", obj.GetObjectKind().GroupVersionKind())
	}
	cfg, err := t.inner.ActionConfigFor(ctx, obj)
	if err != nil {
		return nil, err
	}
	kc, ok := cfg.KubeClient.(*kube.Client)
	if !ok {
		return nil, fmt.Errorf("unexpected Helm Kubernetes client %T", cfg.KubeClient)
	}
	getter, ok := cfg.RESTClientGetter.(genericclioptions.RESTClientGetter)
	if !ok {
		return nil, fmt.Errorf("unexpected Helm REST client getter %T", cfg.RESTClientGetter)
	}
	reads := &restconfig.UpdateReads{}
	kc.Factory = cmdutil.NewFactory(restconfig.UpdateReadsGetter{RESTClientGetter: getter, Reads: reads})
	cfg.KubeClient = newConfinedKube(kc, obj.GetNamespace(), policy.ClusterKinds, policy.RBACKinds, reads)
	// The release is named after its CR (helm-operator-plugins' reconciler).
	cfg.RESTClientGetter = restconfig.Lookup{RESTClientGetter: cfg.RESTClientGetter, Namespace: obj.GetNamespace(), Release: obj.GetName(),
		Owner: obj.GetUID(), ClusterKinds: policy.ClusterKinds}
	if !policy.InstallsCRDs {
		cfg.Capabilities = t.capabilities.get(cfg.RESTClientGetter)
	}
	return cfg, nil
}

// storageDriver is Helm's Secrets driver for the CR's namespace, over a Secrets client that
// signs what it writes and hides what does not verify, and that sets the CR as the owner
// of each record (as helm-operator-plugins' default driver does). The driver serves one
// reconcile, and answers the same query twice from one LIST until it writes (releaselists);
// in a namespace crowded with release Secrets, a LIST of one release's records is made of
// GETs by name, and no record is read whole unless its signature holds on its metadata
// (recordSecrets); a record larger than a Secret holds is stored in parts, signed and
// verified whole (releasechunks).
func (t *Configs) storageDriver(ctx context.Context, obj client.Object, _ *rest.Config) (driver.Driver, error) {
	key, err := t.signingKey(ctx)
	if missing := (*KeyMissingError)(nil); errors.As(err, &missing) && t.recorder != nil {
		t.recorder.Event(obj, corev1.EventTypeWarning, reasonKeyMissing, err.Error())
	}
	if err != nil {
		return nil, err
	}
	ns := obj.GetNamespace()
	owner := metav1.NewControllerRef(obj, obj.GetObjectKind().GroupVersionKind())
	d := &SignedDriver{refused: &refusals{}}
	records := t.recordSecrets(ns, key, d.Refuse)
	d.kept, _ = records.(*releaserecords.Client)
	secrets := helmclient.NewOwnerRefSecretClient(records, []metav1.OwnerReference{*owner}, helmclient.MatchAllSecrets)
	d.lists = releaselists.New(releasesign.NewSecretClient(releasechunks.New(secrets), ns, key, d.Refuse))
	d.Secrets = driver.NewSecrets(d.lists)
	return d, nil
}

// SignedDriver is Helm's Secrets driver with the records it refused, for the CR's report
// (withRecordReport), and the lists of records it remembers (FreshReleaseReads).
type SignedDriver struct {
	*driver.Secrets
	refused *refusals
	lists   *releaselists.Memo
	kept    *releaserecords.Client // the records it keeps for the reconcile; nil: none
}

// NewSignedDriver is a SignedDriver over records that lists serves as they are (nil: none),
// for the tests of the layers that read a driver's refusals and lists.
func NewSignedDriver(lists *releaselists.Memo) *SignedDriver {
	d := &SignedDriver{refused: &refusals{}, lists: lists, Secrets: driver.NewSecrets(nil)}
	if lists != nil {
		d.Secrets = driver.NewSecrets(lists)
	}
	return d
}

// Refuse records that the record in the Secret named secret was refused, and why.
func (d *SignedDriver) Refuse(secret string, reason error) { d.refused.add(secret, reason) }

// FreshReleaseReads makes the storage of c read the API server again from now on, instead
// of answering a list from one it made earlier in the reconcile, or a record named by the
// cache from one it read (releaserecords.Client.Forget): the release guard calls it once it
// holds a release name's lock, so that what it reads under the lock includes what another
// kind's reconcile wrote before releasing it.
func FreshReleaseReads(c helmclient.ActionInterface) {
	cfg := c.Config()
	if cfg == nil || cfg.Releases == nil {
		return
	}
	s, ok := cfg.Releases.Driver.(*SignedDriver)
	if !ok {
		return
	}
	if s.lists != nil {
		s.lists.Forget()
	}
	if s.kept != nil {
		s.kept.Forget()
	}
}

// RefusedRecords returns the records the storage of c refused so far, by Secret name.
func RefusedRecords(c helmclient.ActionInterface) map[string]error {
	cfg := c.Config()
	if cfg == nil {
		return nil
	}
	if s, ok := cfg.Releases.Driver.(*SignedDriver); ok {
		return s.refused.all()
	}
	return nil
}

// refusals collects refused records; Helm's storage may read from several goroutines.
type refusals struct {
	mu sync.Mutex
	m  map[string]error
}

func (r *refusals) add(secret string, reason error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]error{}
	}
	if _, seen := r.m[secret]; !seen {
		// Counted once per record and reconcile: a driver serves one reconcile.
		refusedRecords.WithLabelValues(releasesign.Reason(reason)).Inc()
	}
	r.m[secret] = reason
}

func (r *refusals) all() map[string]error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]error, len(r.m))
	for k, v := range r.m {
		out[k] = v
	}
	return out
}

// errNoKeyYet: the signing key is loaded by the first reconcile, on the leader; the drift
// filter does not load it.
var errNoKeyYet = errors.New("the release signing key is not loaded yet")

// StoredRelease reads a revision of the release of cr (named after it) from the signed
// storage, once the key is loaded.
func (t *Configs) StoredRelease(ctx context.Context, cr *unstructured.Unstructured, revision int) (*release.Release, error) {
	t.mu.Lock()
	loaded := t.key.Current != nil
	t.mu.Unlock()
	if !loaded {
		return nil, errNoKeyYet
	}
	d, err := t.storageDriver(ctx, cr, nil)
	if err != nil {
		return nil, err
	}
	return storage.Init(d).Get(cr.GetName(), revision)
}

// SignedRecord reports whether m, the cached metadata of a release Secret, carries a
// signature of the operator's keys that holds on its metadata, and so whether its labels
// (its status among them) are as the operator wrote them. It is false until the keys are
// loaded, and for a signature of a legacy layout, which only the record's data verifies.
func (t *Configs) SignedRecord(m metav1.Object) bool {
	keys := t.loadedKey.Load()
	return keys != nil && keys.VerifyMetadata(m.GetNamespace(), m) == nil
}

// ReleaseChart is the name of the chart a release record says it is of, "" if none.
func ReleaseChart(rel *release.Release) string {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil {
		return ""
	}
	return rel.Chart.Metadata.Name
}
