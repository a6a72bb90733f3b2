package releaseguard

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/releaselists"
	"transwarp.io/tos/warpdrive-operator/internal/releaserecords"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func guarded(t *testing.T, f *actiontest.FakeActions) helmclient.ActionInterface {
	t.Helper()
	g := New(actiontest.EngineOf(f), &chart.Chart{Metadata: &chart.Metadata{Name: "appservice"}}, releases.NewKeyedMutex(), Checks{})
	c, err := g.ActionClientFor(context.Background(), actiontest.AppServiceCR())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Another chart's release of the same name is neither read, upgraded nor uninstalled.
func TestReleaseGuardRefusesAnotherChartsRelease(t *testing.T) {
	f := &actiontest.FakeActions{Rel: actiontest.ReleaseOf("warpdrivepool")}
	c := guarded(t, f)

	_, err := c.Get("x")
	var foreign *ForeignReleaseError
	if !errors.As(err, &foreign) || !strings.Contains(err.Error(), "warpdrivepool") || errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Get: %v, want a foreign release error naming chart warpdrivepool", err)
	}
	if _, err := c.Upgrade("x", "team-a", nil, nil); !errors.As(err, &foreign) {
		t.Errorf("Upgrade: %v, want a foreign release error", err)
	}
	// The reconciler removes the finalizer when the release is not found: the CR can go,
	// and the other CR's release stays.
	if _, err := c.Uninstall("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Uninstall: %v, want release not found", err)
	}
	if len(f.Calls) != 0 {
		t.Errorf("the other chart's release was changed: %v", f.Calls)
	}
}

// The guard is transparent for the chart's own release, and for no release at all.
func TestReleaseGuardPassesOwnRelease(t *testing.T) {
	f := &actiontest.FakeActions{Rel: actiontest.ReleaseOf("appservice")}
	c := guarded(t, f)
	if rel, err := c.Get("x"); err != nil || rel != f.Rel {
		t.Errorf("Get: %v, %v", rel, err)
	}
	if _, err := c.Upgrade("x", "team-a", nil, nil); err != nil {
		t.Errorf("Upgrade: %v", err)
	}
	if _, err := c.Uninstall("x"); err != nil {
		t.Errorf("Uninstall: %v", err)
	}
	if got := strings.Join(f.Calls, ","); got != "upgrade,uninstall" {
		t.Errorf("calls %q, want upgrade,uninstall", got)
	}

	none := &actiontest.FakeActions{}
	c = guarded(t, none)
	if _, err := c.Get("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Get without a release: %v, want release not found", err)
	}
	if _, err := c.Uninstall("x"); err != nil || len(none.Calls) != 1 {
		t.Errorf("Uninstall without a release: %v, calls %v; want it passed to Helm", err, none.Calls)
	}
}

// sharedStore is one namespace's releases, shared by the action clients of every kind,
// whose Install behaves as helm-operator-plugins' does: a failed install is uninstalled by
// name.
type sharedStore struct {
	helmclient.ActionInterface
	mu   sync.Mutex
	rels map[string]*release.Release
}

// Config: no Helm configuration (the store is its own).
func (s *sharedStore) Config() *action.Configuration { return nil }

func (s *sharedStore) Get(name string, _ ...helmclient.GetOption) (*release.Release, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rels[name]; r != nil {
		return r, nil
	}
	return nil, driver.ErrReleaseNotFound
}

func (s *sharedStore) Install(name, _ string, chrt *chart.Chart, _ map[string]any, _ ...helmclient.InstallOption) (*release.Release, error) {
	s.mu.Lock()
	_, taken := s.rels[name]
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond) // rendering and applying, between Helm's check and its record
	s.mu.Lock()
	defer s.mu.Unlock()
	rel := &release.Release{Name: name, Namespace: "team-a", Chart: chrt}
	if taken || s.rels[name] != nil {
		delete(s.rels, name) // the clean-up of the failed install: uninstall by name
		return rel, errors.New("cannot re-use a name that is still in use")
	}
	s.rels[name] = rel
	return rel, nil
}

// Two kinds installing one release name at once: the loser is refused, and the winner's
// release stays.
func TestReleaseGuardSerialisesInstallsAcrossKinds(t *testing.T) {
	for range 20 {
		store := &sharedStore{rels: map[string]*release.Release{}}
		getter := helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
			return store, nil
		})
		locks := releases.NewKeyedMutex()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, name := range []string{"appservice", "guestbook"} {
			c, err := New(getter, &chart.Chart{Metadata: &chart.Metadata{Name: name}}, locks, Checks{}).ActionClientFor(context.Background(), actiontest.AppServiceCR())
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.Install("x", "team-a", &chart.Chart{Metadata: &chart.Metadata{Name: name}}, nil)
			}()
		}
		wg.Wait()
		rel := store.rels["x"]
		if rel == nil {
			t.Fatalf("no release left after the race (errors %v): the loser's failed install uninstalled the winner's", errs)
		}
		var foreign *ForeignReleaseError
		if (errs[0] == nil) == (errs[1] == nil) || !(errors.As(errs[0], &foreign) || errors.As(errs[1], &foreign)) {
			t.Fatalf("errors %v, want one install to win and the other refused as another chart's release", errs)
		}
	}
}

// The guard reads the release afresh once it holds the name's lock: a list of its records
// that the reconcile made before the lock (answered from memory since, releaselists) does not
// hide another kind's release installed meanwhile, which the guard then refuses to touch. So
// too when the records are read by name (releaserecords) and the manager's cache has not yet
// seen the other kind's record.
func TestReleaseGuardReadsAfreshUnderTheLock(t *testing.T) {
	notYetSeen := crfake.NewClientBuilder().
		WithIndex(&corev1.Secret{}, releaserecords.IndexField, releaserecords.IndexRelease).Build()
	for name, records := range map[string]func(corev1client.SecretInterface) corev1client.SecretInterface{
		"listed": func(c corev1client.SecretInterface) corev1client.SecretInterface { return c },
		"by name": func(c corev1client.SecretInterface) corev1client.SecretInterface {
			return releaserecords.New(c, notYetSeen, nil, "team-a")
		},
	} {
		t.Run(name, func(t *testing.T) {
			cs := k8sfake.NewClientset()
			lists := releaselists.New(records(cs.CoreV1().Secrets("team-a")))
			d := trustedconfig.NewSignedDriver(lists)
			f := &actiontest.StoreActions{Cfg: &action.Configuration{Releases: storage.Init(d)}}
			if _, err := f.Get("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
				t.Fatalf("before the other kind's install: %v, want no release", err)
			}
			// The other kind's reconcile installs release x, and its record is written.
			other := storage.Init(driver.NewSecrets(cs.CoreV1().Secrets("team-a")))
			if err := other.Create(&release.Release{Name: "x", Namespace: "team-a", Version: 1,
				Info:  &release.Info{Status: release.StatusDeployed},
				Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "guestbook", Version: "1.0.0"}}}); err != nil {
				t.Fatal(err)
			}
			installed := false
			f.During = func() { installed = true }
			g := guardedClient{ActionInterface: f, chart: "appservice", namespace: "team-a", locks: releases.NewKeyedMutex()}
			_, err := g.Install("x", "team-a", &chart.Chart{Metadata: &chart.Metadata{Name: "appservice"}}, nil)
			var foreign *ForeignReleaseError
			if !errors.As(err, &foreign) || installed {
				t.Fatalf("install over the other kind's release: %v, installed %v; want it refused as another chart's", err, installed)
			}
		})
	}
}

// A CR named like a release whose records no key of the operator verifies is not installed
// over it (Stalled ReleaseNameTaken), unless its status says the operator deployed that
// release: then the records are a person's Helm command over it, which the install goes on
// from.
func TestReleaseGuardRefusesAnotherToolsRelease(t *testing.T) {
	for _, tc := range []struct {
		name     string
		unproven int
		deployed string // status.deployedRelease.name
		refused  bool
	}{
		{"another tool's release", 2, "", true},
		{"no records", 0, "", false},
		{"the operator's release, a person's helm upgrade over it", 2, "x", false},
		{"another release deployed before under the CR's status", 2, "y", true},
	} {
		f := &actiontest.FakeActions{}
		cr := actiontest.AppServiceCR().(*unstructured.Unstructured)
		if tc.deployed != "" {
			_ = unstructured.SetNestedField(cr.Object, tc.deployed, "status", "deployedRelease", "name")
		}
		var asked string
		unproven := func(_ context.Context, ns, name string) (int, error) {
			asked = ns + "/" + name
			return tc.unproven, nil
		}
		c, err := New(actiontest.EngineOf(f), &chart.Chart{Metadata: &chart.Metadata{Name: "appservice"}}, releases.NewKeyedMutex(),
			Checks{Unproven: unproven}).ActionClientFor(context.Background(), cr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Install("x", "team-a", nil, nil)
		failure, refused := refusal.Of(err)
		if refused != tc.refused || (refused && (failure.Reason != statuscontract.ReasonReleaseNameTaken ||
			!strings.Contains(failure.Message, `release "x" in namespace "team-a" has 2 record(s)`))) {
			t.Errorf("%s: Install: %v, refused %v (%+v), want refused %v", tc.name, err, refused, failure, tc.refused)
		}
		if installed := len(f.Calls) > 0; installed == tc.refused {
			t.Errorf("%s: Helm's install called: %v", tc.name, f.Calls)
		}
		if tc.deployed != "x" && asked != "team-a/x" {
			t.Errorf("%s: the records counted are of %q, want team-a/x", tc.name, asked)
		}
	}
}
