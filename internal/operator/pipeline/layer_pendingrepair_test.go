package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	helmtime "helm.sh/helm/v3/pkg/time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/releaseguard"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func TestNeedsRepair(t *testing.T) {
	for _, tc := range []struct {
		status  release.Status
		running bool
		want    bool
	}{
		{release.StatusPendingInstall, false, true},
		{release.StatusPendingUpgrade, false, true},
		{release.StatusPendingRollback, false, true},
		{release.StatusPendingUpgrade, true, false}, // this process's own operation
		{release.StatusDeployed, false, false},
		{release.StatusFailed, false, false},
		{release.StatusSuperseded, false, false},
		{release.StatusUninstalling, false, false}, // a new uninstall resumes it
		{release.StatusUninstalled, false, false},
	} {
		rel := &release.Release{Info: &release.Info{Status: tc.status}}
		if got := needsRepair(rel, tc.running); got != tc.want {
			t.Errorf("needsRepair(%s, running=%v) = %v, want %v", tc.status, tc.running, got, tc.want)
		}
	}
	if needsRepair(nil, false) || needsRepair(&release.Release{}, false) {
		t.Error("needsRepair of a release without info: true, want false")
	}
}

// repairing is the action client the reconciler of AppServices gets: the repair over the
// release guard over f.
func repairing(t *testing.T, f *actiontest.StoreActions, ops *Operations) (helmclient.ActionInterface, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(10)
	base := helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
		return f, nil
	})
	guard := releaseguard.New(base, &chart.Chart{Metadata: &chart.Metadata{Name: "appservice"}}, releases.NewKeyedMutex(), releaseguard.Checks{})
	c, err := withPendingRepair(guard, rec, ops).ActionClientFor(context.Background(), actiontest.AppServiceCR())
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

func storedStatus(t *testing.T, f *actiontest.StoreActions, version int) (release.Status, string) {
	t.Helper()
	r, err := f.Cfg.Releases.Get("x", version)
	if err != nil {
		t.Fatal(err)
	}
	return r.Info.Status, r.Info.Description
}

// A revision left pending-upgrade is marked failed in the storage, the Get returns it so, and
// an Event on the CR says what was done; the deployed revision before it is left alone.
func TestRepairMarksPendingRevisionFailed(t *testing.T) {
	for _, pending := range []release.Status{release.StatusPendingUpgrade, release.StatusPendingRollback} {
		f := actiontest.NewStoreActions(actiontest.Revision("appservice", 1, release.StatusDeployed), actiontest.Revision("appservice", 2, pending))
		c, rec := repairing(t, f, leaderOperations())

		rel, err := c.Get("x")
		if err != nil {
			t.Fatal(err)
		}
		if rel.Version != 2 || rel.Info.Status != release.StatusFailed {
			t.Errorf("%s: Get returned revision %d %s, want revision 2 failed", pending, rel.Version, rel.Info.Status)
		}
		status, desc := storedStatus(t, f, 2)
		wantDesc := string(pending) + " interrupted: the operation that started it ended without recording its outcome (marked failed by warpdrive-operator)"
		if status != release.StatusFailed || desc != wantDesc {
			t.Errorf("%s: stored revision 2 is %s (%q), want failed (%q)", pending, status, desc, wantDesc)
		}
		if status, _ := storedStatus(t, f, 1); status != release.StatusDeployed {
			t.Errorf("%s: revision 1 is %s, want deployed", pending, status)
		}
		want := "Warning PendingReleaseRepaired release x revision 2 was left " + string(pending) +
			" by an interrupted operation; marked failed and retried"
		if got := actiontest.Events(rec); len(got) != 1 || got[0] != want {
			t.Errorf("%s: events %q, want [%q]", pending, got, want)
		}
		// Repaired once: the next Get finds a failed revision and changes nothing.
		if rel, err := c.Get("x"); err != nil || rel.Info.Status != release.StatusFailed || len(actiontest.Events(rec)) != 0 {
			t.Errorf("%s: second Get: %v %v, want the failed revision and no new Event", pending, rel, err)
		}
	}
}

// An install interrupted before its first revision was recorded deployed: the only revision
// is marked failed (the reconciler then upgrades it, which Helm allows from a failed revision).
func TestRepairMarksPendingInstallFailed(t *testing.T) {
	f := actiontest.NewStoreActions(actiontest.Revision("appservice", 1, release.StatusPendingInstall))
	c, rec := repairing(t, f, leaderOperations())
	rel, err := c.Get("x")
	if err != nil || rel.Info.Status != release.StatusFailed {
		t.Fatalf("Get: %v, %v; want revision 1 failed", rel, err)
	}
	if status, _ := storedStatus(t, f, 1); status != release.StatusFailed {
		t.Errorf("stored revision 1 is %s, want failed", status)
	}
	if got := actiontest.Events(rec); len(got) != 1 || !strings.Contains(got[0], "revision 1 was left pending-install") {
		t.Errorf("events %q, want one saying revision 1 was left pending-install", got)
	}
}

// What must not be touched: an operation of this process in progress on the release, another
// chart's release (another kind's CR of the same name), and a given revision asked for.
func TestRepairLeavesAlone(t *testing.T) {
	t.Run("own operation running", func(t *testing.T) {
		f := actiontest.NewStoreActions(actiontest.Revision("appservice", 1, release.StatusPendingInstall))
		ops := leaderOperations()
		c, rec := repairing(t, f, ops)
		var seen *release.Release
		f.During = func() { seen, _ = c.Get("x") } // a Get while this process installs
		if _, err := c.Install("x", "team-a", nil, nil); err != nil {
			t.Fatal(err)
		}
		if seen == nil || seen.Info.Status != release.StatusPendingInstall {
			t.Errorf("Get during the install returned %v, want the pending revision untouched", seen)
		}
		if status, _ := storedStatus(t, f, 1); status != release.StatusPendingInstall || len(actiontest.Events(rec)) != 0 {
			t.Errorf("the running install's revision was repaired: %s", status)
		}
		if ops.isRunning(releases.Key("team-a", "x")) {
			t.Error("the install is still counted as running after it returned")
		}
		// Once the install has returned without recording an outcome, the revision is stuck.
		if rel, _ := c.Get("x"); rel.Info.Status != release.StatusFailed {
			t.Errorf("after the install returned: %s, want failed", rel.Info.Status)
		}
	})
	t.Run("another chart's release", func(t *testing.T) {
		f := actiontest.NewStoreActions(actiontest.Revision("warpdrivepool", 1, release.StatusPendingUpgrade))
		c, rec := repairing(t, f, leaderOperations())
		var foreign *releaseguard.ForeignReleaseError
		if _, err := c.Get("x"); !errors.As(err, &foreign) {
			t.Errorf("Get: %v, want the guard's foreign release error", err)
		}
		if status, _ := storedStatus(t, f, 1); status != release.StatusPendingUpgrade || len(actiontest.Events(rec)) != 0 {
			t.Errorf("another chart's release was repaired: %s", status)
		}
	})
	t.Run("a given revision", func(t *testing.T) {
		f := actiontest.NewStoreActions(actiontest.Revision("appservice", 1, release.StatusPendingInstall))
		c, rec := repairing(t, f, leaderOperations())
		rel, err := c.Get("x", func(g *action.Get) error { g.Version = 1; return nil })
		if err != nil || rel.Info.Status != release.StatusPendingInstall || len(actiontest.Events(rec)) != 0 {
			t.Errorf("Get of revision 1: %v %v, want it as stored, no Event", rel, err)
		}
	})
}

// A failed upgrade that left a pending revision below its rollback: the Get repair would
// never see it (it is not the last), so the failed upgrade repairs it at once. A failed dry
// run records nothing and repairs nothing.
func TestFailedUpgradeRepairsPendingHistory(t *testing.T) {
	chrt := &chart.Chart{Metadata: &chart.Metadata{Name: "appservice"}}
	f := actiontest.NewStoreActions(actiontest.Revision("appservice", 1, release.StatusSuperseded))
	c, rec := repairing(t, f, leaderOperations())

	dryRun := func(u *action.Upgrade) error { u.DryRun = true; return nil }
	if _, err := c.Upgrade("x", "team-a", chrt, nil, dryRun); err == nil {
		t.Fatal("dry run: no error")
	}
	if got := actiontest.Events(rec); len(got) != 0 {
		t.Errorf("a failed dry run recorded %q", got)
	}

	if _, err := c.Upgrade("x", "team-a", chrt, nil); err == nil {
		t.Fatal("upgrade: no error")
	}
	for v, want := range map[int]release.Status{1: release.StatusSuperseded, 2: release.StatusFailed, 3: release.StatusDeployed} {
		if status, _ := storedStatus(t, f, v); status != want {
			t.Errorf("revision %d is %s, want %s", v, status, want)
		}
	}
	if got := actiontest.Events(rec); len(got) != 1 || !strings.Contains(got[0], "revision 2 was left pending-upgrade") {
		t.Errorf("events %q, want one saying revision 2 was left pending-upgrade", got)
	}
}

// leaderOperations are the operations of a process that has led since now.
func leaderOperations() *Operations {
	ops := NewOperations()
	ops.Elected(time.Now())
	return ops
}

// A pending revision is repaired only when no live operation can hold it.
func TestMayRepair(t *testing.T) {
	now := time.Now()
	pending := func(age time.Duration) *release.Release {
		return &release.Release{Info: &release.Info{Status: release.StatusPendingUpgrade, LastDeployed: helmtime.Time{Time: now.Add(-age)}}}
	}
	key := releases.Key("t1", "x")

	noElection := NewOperations()
	if noElection.mayRepair(key, pending(time.Hour), now) {
		t.Error("repaired without leader election")
	}

	ops := NewOperations()
	ops.Elected(now.Add(-time.Minute))
	if !ops.mayRepair(key, pending(2*time.Minute), now) {
		t.Error("a revision begun before this process led was not repaired")
	}
	if ops.mayRepair(key, pending(30*time.Second), now) {
		t.Error("a revision begun since this process leads, not by it, was repaired (another manager's live operation)")
	}
	if !ops.mayRepair(key, pending(staleAfter+time.Second), now) {
		t.Error("a revision older than any operation was not repaired")
	}
	done := ops.start(key)
	if ops.mayRepair(key, pending(time.Hour), now) {
		t.Error("repaired under this process's running operation")
	}
	done()
	if !ops.mayRepair(key, pending(30*time.Second), now) {
		t.Error("this process's own ended operation was not repaired")
	}
	ops.forget(key)
	if ops.mayRepair(key, pending(30*time.Second), now) {
		t.Error("a forgotten release still counts as this process's own")
	}
}
