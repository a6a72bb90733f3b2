// Package releaserecords gives Helm's release storage a Secrets client that finds one
// release's records by their names instead of by a label selector.
//
// Helm's Secrets driver finds a release's records with a LIST of the namespace's Secrets
// labelled name=<release>,owner=helm. The API server indexes no label: it filters every
// Secret of the namespace for each such list, and a reconcile makes two or three of them, so
// a wave of N reconciles in one namespace costs it O(N²). At 10,000 CRs that is what a wave of
// deletes waits on (docs/bench/README.md, "10,000 CRs"). The manager already caches the
// metadata of every Secret labelled owner=helm, since its reconcilers watch them; indexed by
// the release's name, that cache says which records a release has, and a GET of each by name
// reads them as they are now, as the LIST did.
//
// The cache may lag behind the API server, so what it says is checked:
//   - A record written since the cache's last event is one it does not hold yet. Helm numbers
//     a release's records 1, 2, 3 ... and writes them in that order, so the client also reads
//     the record after the newest it knows of, and the next, until one is missing.
//   - A record the cache holds but the API server no longer has means the cache is behind a
//     deletion (an uninstall, a pruned revision) and maybe behind what followed it (a
//     reinstall numbered from 1 again): the client then asks the API server's LIST instead.
//   - Labels are those of the records read, matched against the whole selector: a record's
//     status label changes with every upgrade.
//
// Reading by name pays off only in a namespace with many Secrets: a LIST's cost grows with the
// namespace's Secrets, a GET's does not. On the local cluster (hack/release-list-cost.sh 2000,
// then 20000), the API server and etcd spent 1.9 ms on a LIST among 2000 release Secrets and
// 17 ms among 20,000 (0.85 µs a Secret), and 1.1 ms on a GET: a GET costs what a LIST spends
// on about 1300 Secrets (DefaultSecretsPerGET). A release whose cache holds k records costs
// k+1 GETs by name, so the client reads by name only where the namespace holds at least
// (k+1) × 1300 release Secrets (Census), and below that lists, as Helm does: at two records a
// release, from about 2000 CRs in the namespace.
//
// Any list it does not recognise as one release's records goes to the API server unchanged.
// What the client returns is what the LIST would have: the records themselves, which the
// layers above it verify (internal/releasesign) as before.
//
// Metadata first (MetadataFirst): a namespace editor may label Secrets of up to 1 MiB each as
// records of their own release, hundreds of them. So that none is read whole, the client
// reads a record's data only if its metadata is worth it (its signature holds on metadata:
// releasesign.Keys.VerifyMetadata): from the cache's metadata where it reads by name, and
// where the API server must answer, from a LIST of metadata, then a GET of each record worth
// reading. What it holds at once is the records it keeps, one record being read, and a page of
// metadata. Of the records it reads, it keeps for the reconcile those whose signature holds on
// their metadata (Vouched), so that the reconcile's later lists read again only the records
// written since; a record it deletes is forgotten.
package releaserecords

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cached is the object the manager's cache holds a release Secret as: its metadata, never
// its data (internal/operator/informers, managercache.go). Its Type is unknown: read whole, a
// record is checked again.
func Cached() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// CachedList is a list of Cached.
func CachedList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	return l
}

// IndexField is the cache index of Secrets by the release they are a record of (IndexRelease).
const IndexField = "warpdrive.helm.release"

// IndexRelease is the value of IndexField for a Secret: its release's name, for Helm's
// records (labelled owner=helm).
func IndexRelease(obj client.Object) []string {
	l := obj.GetLabels()
	if l["owner"] != "helm" || l["name"] == "" {
		return nil
	}
	return []string{l["name"]}
}

// MaxRecords is the most records of one release that the client reads one by one; a release
// with more (a history kept whole, or Secrets a tenant labelled as its records) is listed
// instead, so that no release costs more requests than its one LIST.
const MaxRecords = 32

// Client is a Secrets client of one namespace whose lists of a release's records are
// answered from the cache's names and GETs.
type Client struct {
	corev1client.SecretInterface
	cache     client.Reader // the manager's cache of Secrets labelled owner=helm, with IndexField
	census    *Census       // nil: read by name in any namespace
	namespace string

	meta  metadata.ResourceInterface // the namespace's Secrets as metadata; nil: LIST them whole
	worth Worth                      // nil: every record is worth reading

	// read holds the vouched records this client has read whole, by name, as read: a later
	// list that finds one at the same resourceVersion (in a LIST of metadata, or in the
	// cache) takes it from here instead of reading it again. A client serves one reconcile,
	// whose Helm actions ask for the same records several times (the reconciler's look-up,
	// the dry-run upgrade's last and deployed revisions, the upgrade's, its history's
	// pruning), and each write forgets the lists remembered above it (releaselists), not the
	// records: through a wave of upgrades in a namespace of a thousand releases that was 8.5
	// GETs of records per upgrade (docs/bench/findings.md, "Each record read once per
	// reconcile"). Only vouched records are kept, so what it holds is the one release's own
	// records, at most as many as its history, never a Secret a namespace editor planted.
	mu   sync.Mutex
	read map[string]*corev1.Secret
	// fresh are the names of the records read since the last Forget. A by-name list takes
	// the versions it asks for from the cache, which may be behind a write another client
	// made before the reader took its lock: it reuses only these. A LIST of metadata names
	// the versions the API server holds now, so every record kept at one is the same object,
	// and Forget costs it nothing (the release guard forgets at each lock it takes, before
	// the upgrade's own reads of the records).
	fresh map[string]bool
}

// Worth says whether a record is worth reading whole, by its metadata. The signed storage
// answers Skip for a record whose signature does not hold on its metadata, and reports it.
type Worth func(metav1.Object) Verdict

// Verdict is what a record's metadata says of it.
type Verdict int

const (
	// Skip: not worth reading; its metadata already refuses it.
	Skip Verdict = iota
	// Read: worth reading whole, where only its data can tell (a signature of a legacy layout).
	Read
	// Vouched: its signature holds on its metadata, so it is read whole, and the client may
	// keep it for the reconcile: a namespace editor cannot make a Secret of their own vouched.
	Vouched
)

// metadataPage is how many Secrets' metadata a LIST reads at a time: a namespace editor may
// give a Secret up to 256 KiB of annotations, so a page is bounded too.
const metadataPage = 16

// New wraps c, the Secrets of namespace ns; cache is the manager's cache, census counts the
// Secrets it holds by namespace.
func New(c corev1client.SecretInterface, cache client.Reader, census *Census, ns string) *Client {
	return &Client{SecretInterface: c, cache: cache, census: census, namespace: ns}
}

// MetadataFirst makes c read a record whole only if worth says so by its metadata: meta is the
// namespace's Secrets as metadata, for the lists the API server answers.
func (c *Client) MetadataFirst(meta metadata.ResourceInterface, worth Worth) *Client {
	c.meta, c.worth = meta, worth
	return c
}

// verdict applies c.worth; without it every record is worth reading, none vouched.
func (c *Client) verdict(m metav1.Object) Verdict {
	if c.worth == nil {
		return Read
	}
	return c.worth(m)
}

// List answers a list of one release's records (name=<release> and owner=helm, any other
// label terms) by reading them by name where that costs the API server less (Census); every
// other list goes to the API server.
func (c *Client) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	sel, release, ok := oneRelease(opts)
	if !ok {
		return c.SecretInterface.List(ctx, opts)
	}
	items, ok, err := c.records(ctx, release)
	if err != nil {
		return nil, err
	}
	if !ok {
		if c.meta != nil {
			return c.listWorth(ctx, sel, opts.LabelSelector)
		}
		return c.SecretInterface.List(ctx, opts)
	}
	list := &corev1.SecretList{}
	for _, s := range items {
		if sel.Matches(labels.Set(s.Labels)) {
			list.Items = append(list.Items, *s)
		}
	}
	return list, nil
}

// listWorth answers a list of one release's records that the API server must answer: a LIST
// of their metadata, a page at a time, and a GET of each record worth reading.
func (c *Client) listWorth(ctx context.Context, sel labels.Selector, selector string) (*corev1.SecretList, error) {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: metadataPage}
	out := &corev1.SecretList{}
	for {
		page, err := c.meta.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range page.Items {
			v := c.verdict(&page.Items[i])
			if v == Skip {
				continue
			}
			s, err := c.getAt(ctx, &page.Items[i], v == Vouched, true)
			if apierrors.IsNotFound(err) {
				continue // deleted since the LIST
			}
			if err != nil {
				return nil, err
			}
			if sel.Matches(labels.Set(s.Labels)) {
				out.Items = append(out.Items, *s)
			}
		}
		out.ResourceVersion = page.ResourceVersion
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// getAt reads the record m lists whole, or, if this client has kept it at m's resourceVersion,
// returns a copy of what it read then: the same object. Where m is the cache's (not listed
// by the API server), only a record read since the last Forget is taken (fresh). It keeps
// what it reads if keep.
func (c *Client) getAt(ctx context.Context, m *metav1.PartialObjectMetadata, keep, listed bool) (*corev1.Secret, error) {
	c.mu.Lock()
	held, ok := c.read[m.Name]
	ok = ok && (listed || c.fresh[m.Name])
	c.mu.Unlock()
	if ok && m.ResourceVersion != "" && held.ResourceVersion == m.ResourceVersion {
		return held.DeepCopy(), nil
	}
	s, err := c.SecretInterface.Get(ctx, m.Name, metav1.GetOptions{})
	if err != nil || !keep {
		return s, err
	}
	c.keep(s)
	return s.DeepCopy(), nil
}

// keep holds s, read whole and vouched, for getAt; s is not to be changed after.
func (c *Client) keep(s *corev1.Secret) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read == nil {
		c.read, c.fresh = map[string]*corev1.Secret{}, map[string]bool{}
	}
	c.read[s.Name], c.fresh[s.Name] = s, true
}

// Forget makes the next lists read what they list from the API server, for a reader that
// must see other clients' writes from now on (one that has just taken the lock such writers
// hold, as the release guard does; releaselists.Memo.Forget above this client): a by-name list
// reads every record again, once; a LIST of metadata, whose versions are the API server's,
// still takes the records kept at them.
func (c *Client) Forget() {
	c.mu.Lock()
	clear(c.fresh)
	c.mu.Unlock()
}

// forget drops the record name kept.
func (c *Client) forget(name string) {
	c.mu.Lock()
	delete(c.read, name)
	delete(c.fresh, name)
	c.mu.Unlock()
}

// Delete deletes the Secret name and forgets it: the cache may still hold it for a while,
// and the by-name reads must then find it gone on the API server (a pruned revision).
func (c *Client) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	c.forget(name)
	return c.SecretInterface.Delete(ctx, name, opts)
}

// Update writes s and forgets what was kept of it: the cache may still list it at the
// version kept for a while, and the by-name reads must then read what was written (Helm
// marks the previous revision superseded within the upgrade).
func (c *Client) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	c.forget(s.Name)
	return c.SecretInterface.Update(ctx, s, opts)
}

// oneRelease says whether opts lists one release's records, and which. A first page (a
// Limit, no Continue: the signed storage pages its lists, internal/releasesign) is answered
// whole, as a LIST may answer it; a page after it belongs to a LIST already begun.
func oneRelease(opts metav1.ListOptions) (labels.Selector, string, bool) {
	if opts.FieldSelector != "" || opts.Continue != "" || opts.ResourceVersion != "" ||
		opts.Watch || opts.SendInitialEvents != nil {
		return nil, "", false
	}
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, "", false
	}
	release, ok := sel.RequiresExactMatch("name")
	if !ok || release == "" {
		return nil, "", false
	}
	if owner, ok := sel.RequiresExactMatch("owner"); !ok || owner != "helm" {
		return nil, "", false
	}
	return sel, release, true
}

// records reads the release's records by name, those the cache knows of and any after its
// newest; ok is false when the API server's LIST must answer: where it costs less, or where
// the cache cannot be trusted for this release (see the package's doc).
func (c *Client) records(ctx context.Context, release string) (_ []*corev1.Secret, ok bool, _ error) {
	cached := CachedList()
	err := c.cache.List(ctx, cached, client.InNamespace(c.namespace),
		client.MatchingFields{IndexField: release}, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, false, nil
	}
	type candidate struct {
		m       *metav1.PartialObjectMetadata
		vouched bool
	}
	var worth []candidate
	for i := range cached.Items {
		if v := c.verdict(&cached.Items[i]); v != Skip {
			worth = append(worth, candidate{&cached.Items[i], v == Vouched})
		}
	}
	if len(worth) > MaxRecords || c.census.listCheaper(c.namespace, len(worth)) {
		return nil, false, nil
	}
	newest := 0
	for _, w := range worth {
		if v, ok := version(release, w.m.Name); ok && v > newest {
			newest = v
		}
	}
	var found []*corev1.Secret
	for _, w := range worth {
		s, err := c.getAt(ctx, w.m, w.vouched, false)
		if apierrors.IsNotFound(err) {
			return nil, false, nil // the cache is behind a deletion
		}
		if err != nil {
			return nil, false, err
		}
		found = append(found, s)
	}
	// Records written since the cache's last event are read whole to be found: only a few, the
	// names after the newest, each dropped at once unless worth keeping.
	for v, read := newest+1, 0; ; v, read = v+1, read+1 {
		if len(found) >= MaxRecords || read >= MaxRecords {
			return nil, false, nil
		}
		s, err := c.SecretInterface.Get(ctx, Name(release, v), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if v := c.verdict(s); v != Skip {
			if v == Vouched {
				c.keep(s.DeepCopy())
			}
			found = append(found, s)
		}
	}
	// In the order of the LIST: by name.
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return found, true, nil
}

// Name is the Secret of a release's record of version v, as Helm's Secrets driver names it.
func Name(release string, v int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, v)
}

// version is the version of the release's record named name, if Helm named it.
func version(release, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "sh.helm.release.v1."+release+".v")
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(rest)
	return v, err == nil && v > 0
}
