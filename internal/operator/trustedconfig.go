package operator

import (
	"context"
	"fmt"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releaserecords"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/secretmemo"
)

// kindPolicy is what the operator lets the releases of one kind do: render its chart, and
// touch the cluster-scoped kinds the chart declares.
type kindPolicy struct {
	gvk          schema.GroupVersionKind
	chart        string // the chart's name, as release records carry it
	clusterKinds []schema.GroupKind
	hooks        bool // the chart has Helm hooks; without them no hook of any record runs
}

// trustedConfigs hands out Helm action configurations whose release storage is signed
// (internal/releasesign) and whose Kubernetes client is confined to the release (confinedKube).
// It is the innermost layer of every action client: everything Helm reads of a release's
// history, and everything it applies, passes through it.
//
// Before the first configuration it loads the signing key and, once per cluster, takes
// over the unsigned records an earlier version of the operator wrote (takeOver). Both wait
// for the first reconcile, which runs on the leader only, so standbys never write.
type trustedConfigs struct {
	inner     helmclient.ActionConfigGetter
	secrets   kubernetes.Interface
	reader    client.Reader
	records   client.Reader // the manager's cache of release Secrets, indexed by release (releaserecords)
	census    *releaserecords.Census
	mapper    meta.RESTMapper
	policies  map[schema.GroupVersionKind]kindPolicy
	keySecret types.NamespacedName

	mu  sync.Mutex
	key releasesign.Key
}

func newTrustedConfigs(cfg *rest.Config, mgr ctrl.Manager, keySecret types.NamespacedName, policies []kindPolicy,
	secretsPerGET int) (*trustedConfigs, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The reconcilers' watch of release Secrets fills this index and census (see releaserecords).
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Secret{},
		releaserecords.IndexField, releaserecords.IndexRelease); err != nil {
		return nil, fmt.Errorf("indexing release Secrets: %w", err)
	}
	census := releaserecords.NewCensus(secretsPerGET)
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Secret{})
	if err != nil {
		return nil, fmt.Errorf("counting release Secrets: %w", err)
	}
	if _, err := inf.AddEventHandler(census); err != nil {
		return nil, fmt.Errorf("counting release Secrets: %w", err)
	}
	t := &trustedConfigs{
		secrets: cs, reader: mgr.GetAPIReader(), records: mgr.GetCache(), census: census, mapper: mgr.GetRESTMapper(),
		policies: map[schema.GroupVersionKind]kindPolicy{}, keySecret: keySecret,
	}
	for _, p := range policies {
		t.policies[p.gvk] = p
	}
	t.inner, err = helmclient.NewActionConfigGetter(cfg, mgr.GetRESTMapper(), helmclient.StorageDriverMapper(t.storageDriver))
	if err != nil {
		return nil, fmt.Errorf("creating action config getter: %w", err)
	}
	return t, nil
}

// signingKey returns the key, loading it (and taking over unsigned records) the first time.
func (t *trustedConfigs) signingKey(ctx context.Context) (releasesign.Key, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.key != nil {
		return t.key, nil
	}
	key, keySecret, err := releasesign.LoadOrCreateKey(ctx, t.secrets, t.keySecret.Namespace, t.keySecret.Name)
	if err != nil {
		return nil, err
	}
	if err := t.takeOver(ctx, key, keySecret); err != nil {
		return nil, err
	}
	t.key = key
	return key, nil
}

// ActionConfigFor is the configuration for the release of the CR obj.
func (t *trustedConfigs) ActionConfigFor(ctx context.Context, obj client.Object) (*action.Configuration, error) {
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
	cfg.KubeClient = newConfinedKube(kc, obj.GetNamespace(), policy.clusterKinds)
	return cfg, nil
}

// storageDriver is Helm's Secrets driver for the CR's namespace, over a Secrets client that
// signs what it writes and hides what does not verify, and that sets the CR as the owner
// of each record (as helm-operator-plugins' default driver does). The driver serves one
// reconcile, and answers the same query twice from one LIST until it writes (secretmemo);
// in a namespace crowded with release Secrets, a LIST of one release's records is made of
// GETs by name (releaserecords).
func (t *trustedConfigs) storageDriver(ctx context.Context, obj client.Object, _ *rest.Config) (driver.Driver, error) {
	key, err := t.signingKey(ctx)
	if err != nil {
		return nil, err
	}
	ns := obj.GetNamespace()
	owner := metav1.NewControllerRef(obj, obj.GetObjectKind().GroupVersionKind())
	var records corev1client.SecretInterface = t.secrets.CoreV1().Secrets(ns)
	if t.records != nil {
		records = releaserecords.New(records, t.records, t.census, ns)
	}
	secrets := helmclient.NewOwnerRefSecretClient(records, []metav1.OwnerReference{*owner}, helmclient.MatchAllSecrets)
	d := &signedDriver{refused: &refusals{}}
	d.lists = secretmemo.New(releasesign.NewSecretClient(secrets, ns, key, d.refused.add))
	d.Secrets = driver.NewSecrets(d.lists)
	return d, nil
}

// signedDriver is Helm's Secrets driver with the records it refused, for the CR's report
// (withRecordReport), and the lists of records it remembers (freshReleaseReads).
type signedDriver struct {
	*driver.Secrets
	refused *refusals
	lists   *secretmemo.Memo
}

// freshReleaseReads makes the storage of c read the API server again from now on, instead
// of answering a list from one it made earlier in the reconcile: the release guard calls it
// once it holds a release name's lock, so that what it reads under the lock includes what
// another kind's reconcile wrote before releasing it.
func freshReleaseReads(c helmclient.ActionInterface) {
	cfg := c.Config()
	if cfg == nil || cfg.Releases == nil {
		return
	}
	if s, ok := cfg.Releases.Driver.(*signedDriver); ok && s.lists != nil {
		s.lists.Forget()
	}
}

// refusedRecords returns the records the storage of c refused so far, by Secret name.
func refusedRecords(c helmclient.ActionInterface) map[string]error {
	cfg := c.Config()
	if cfg == nil {
		return nil
	}
	if s, ok := cfg.Releases.Driver.(*signedDriver); ok {
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
