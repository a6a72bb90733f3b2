package releaseguard

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/manifest"
	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// New hands out action clients that refuse releases of charts other than c,
// and what checks refuses (see Checks). Operations on a release name are serialised
// across kinds by locks (shared by every kind's guard), so that the check and the operation
// it guards cannot interleave with another kind's.
func New(getter helmclient.ActionClientGetter, c *chart.Chart, locks *releases.KeyedMutex, checks Checks) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(ac helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return guardedClient{ActionInterface: ac, chart: c.Name(), namespace: cr.GetNamespace(), locks: locks,
			cr: cr, checks: checks}
	})
}

// Checks are what the release guard asks of a release the operator cannot prove its
// own, beyond its chart; a nil field is not checked.
type Checks struct {
	// Unproven counts the records of a release that no key of the operator verifies
	// (trustedconfig.Configs.UnprovenRecords): an install over them is refused (anotherTools).
	Unproven func(ctx context.Context, ns, name string) (int, error)
	// Live reads, uncached, the objects a release would adopt (ownershipProof).
	Live client.Reader
	// FirstRun is when the operator first ran in the cluster (trustedconfig.Configs.FirstRun):
	// a CR created before may adopt its release's objects by Helm's annotations.
	FirstRun func(ctx context.Context) (time.Time, error)
}

// ForeignReleaseError says that a release of the CR's name belongs to another chart.
type ForeignReleaseError struct {
	name, namespace, chart, want string
}

func (e *ForeignReleaseError) Error() string {
	return fmt.Sprintf("Helm release %q in namespace %q is of chart %s, not %s: it belongs to a custom resource "+
		"of another kind with the same name; give this one another name", e.name, e.namespace, e.chart, e.want)
}

// guardedClient is the release guard, the layer next to the engine (see pipeline.go): it
// makes each reconciler see only releases of its own chart (one chart per kind, see
// watches.yaml). Another chart's release is an error to it, which the CR reports
// (Irreconcilable), and when the CR is deleted the release is left alone, as if there were
// none, so that the CR's finalizer is removed without touching it.
//
// Why: a CR's Helm release is named after the CR, and the kinds share that namespace of
// names: a Memcached "x" and a Guestbook "x" in one namespace would both be release "x". The
// helm-operator's reconciler looks a release up by name only, so each kind's reconciler
// would upgrade the other's release to its own chart, back and forth, and deleting either CR
// would uninstall whatever the release was at that moment.
//
// That is an escalation: a namespace editor, who may create AppServices, could name one
// after a WarpdrivePool of the namespace and so make the operator delete (and recreate, and
// delete again) the pool's cluster-scoped StorageClass, which the editor may not touch.
type guardedClient struct {
	helmclient.ActionInterface
	chart     string
	namespace string // the CR's, where its release lives
	locks     *releases.KeyedMutex
	cr        client.Object
	checks    Checks
}

// lock holds the release name in the CR's namespace until the returned func is called.
// What the storage reads from then on is read afresh (freshReleaseReads): a list of the
// release's records made before the lock would not show another kind's install that the
// lock waited for.
func (c guardedClient) lock(name string) (unlock func()) {
	unlock = c.locks.Lock(releases.Key(c.namespace, name))
	trustedconfig.FreshReleaseReads(c.ActionInterface)
	return unlock
}

// Install installs a release only if no release of that name exists, of any chart.
//
// Why the lock: two CRs of different kinds with one name, created together, race to
// install the same release. The loser's install fails, and helm-operator-plugins then
// uninstalls the failed install by name, inside its Install, below every wrapper: the
// winner's release, with its objects, was uninstalled. Under the lock the loser finds the
// winner's release first and refuses, without touching it.
func (c guardedClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	defer c.lock(name)()
	if err := c.foreign(name); err != nil {
		return nil, err
	}
	if err := c.anotherTools(name); err != nil {
		return nil, err
	}
	if c.checks.Live != nil {
		byAnnotations, err := c.adoptsByAnnotations(name)
		if err != nil {
			return nil, err
		}
		opts = append(opts, func(i *action.Install) error {
			i.PostRenderer = ownershipProof{PostRenderer: i.PostRenderer, live: c.checks.Live, cr: c.cr, step: "install",
				byAnnotations: byAnnotations}
			return nil
		})
	}
	return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
}

// anotherTools refuses to install release name where records of it exist that no key of the
// operator verifies, unless the CR's status says that the operator deployed that release
// before: then they are a person's Helm command over it (`helm upgrade`, `helm rollback`),
// which the install goes on from, moving them aside (releasesign.SecretClient). Otherwise the
// release is another tool's (the helm CLI, Flux): a CR named after it must not move its
// records aside nor take its objects, which Helm adopts by their annotations alone, a name
// anyone who may create the CR can choose. Only the operator writes a CR's status; records
// and annotations, whoever may write the namespace's Secrets and objects.
func (c guardedClient) anotherTools(name string) error {
	if c.checks.Unproven == nil || deployedBefore(c.cr, name) {
		return nil
	}
	n, err := c.checks.Unproven(context.Background(), c.namespace, name)
	if err != nil || n == 0 {
		return err
	}
	return refusal.Refuse(statuscontract.Failure{Reason: statuscontract.ReasonReleaseNameTaken, Step: "install", Message: fmt.Sprintf(
		"Helm release %q in namespace %q has %d record(s) that this operator did not sign: another tool installed it "+
			"(the helm CLI, Flux) or someone wrote them; the operator neither installs over it nor takes its objects. "+
			"Give this resource another name, or uninstall that release; if it is this operator's release after all, "+
			"an administrator takes its records over (%s)", name, c.namespace, n, releasesign.KeyDocs)})
}

// deployedBefore reports whether cr's status says the operator deployed its release name.
func deployedBefore(cr client.Object, name string) bool {
	u, ok := cr.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	deployed, _, _ := unstructured.NestedString(u.Object, "status", statuscontract.FieldDeployedRelease, statuscontract.FieldDeployedReleaseName)
	return deployed == name
}

// foreign returns a ForeignReleaseError if release name is another chart's. Any other error
// of reading it (such as no release at all) is for Helm to report.
func (c guardedClient) foreign(name string) error {
	_, err := c.Get(name)
	var foreign *ForeignReleaseError
	if errors.As(err, &foreign) {
		return err
	}
	return nil
}

// Get returns the release, or a ForeignReleaseError if it is another chart's.
func (c guardedClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil {
		return rel, err
	}
	if got := trustedconfig.ReleaseChart(rel); got != c.chart {
		return nil, &ForeignReleaseError{name: name, namespace: rel.Namespace, chart: got, want: c.chart}
	}
	return rel, nil
}

// Upgrade upgrades only a release of the guarded chart.
func (c guardedClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	defer c.lock(name)()
	if err := c.foreign(name); err != nil {
		return nil, err
	}
	if c.checks.Live != nil && !actionclient.IsDryRun(opts) {
		// A dry run adopts nothing; the upgrade after it is checked.
		byAnnotations, err := c.adoptsByAnnotations(name)
		if err != nil {
			return nil, err
		}
		opts = append(opts, func(u *action.Upgrade) error {
			u.PostRenderer = ownershipProof{PostRenderer: u.PostRenderer, live: c.checks.Live, cr: c.cr, step: "upgrade",
				byAnnotations: byAnnotations, known: func() ([]manifest.Head, error) { return c.releaseObjects(name) }}
			return nil
		})
	}
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
}

// adoptsByAnnotations reports whether release name may adopt an object by Helm's annotations
// naming it: when the CR's status proves the operator deployed the release (deployedBefore), or
// the CR existed when the operator first ran in the cluster (checks.FirstRun): a CR restored
// from a backup that held neither records nor key, as the unsigned records found then were
// taken over as the operator's.
func (c guardedClient) adoptsByAnnotations(name string) (bool, error) {
	if deployedBefore(c.cr, name) {
		return true, nil
	}
	if c.checks.FirstRun == nil {
		return false, nil
	}
	first, err := c.checks.FirstRun(context.Background())
	if err != nil {
		return false, err
	}
	return !c.cr.GetCreationTimestamp().After(first), nil
}

// releaseObjects are the objects of the last record of release name, which an upgrade
// updates rather than adopts.
func (c guardedClient) releaseObjects(name string) ([]manifest.Head, error) {
	rel, err := c.ActionInterface.Get(name)
	if err != nil {
		return nil, err
	}
	return manifest.Heads(rel.Manifest)
}

// Uninstall uninstalls only a release of the guarded chart; another chart's release is
// reported as not found, which lets the reconciler remove the CR's finalizer.
func (c guardedClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	defer c.lock(name)()
	if err := c.foreign(name); err != nil {
		return nil, fmt.Errorf("%w: %v", driver.ErrReleaseNotFound, err)
	}
	return c.ActionInterface.Uninstall(name, opts...)
}
