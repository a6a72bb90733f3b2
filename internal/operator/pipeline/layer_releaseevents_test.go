package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/client-go/tools/record"

	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func eventing(t *testing.T, f helmclient.ActionInterface) (helmclient.ActionInterface, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(10)
	c, err := withReleaseEvents(actiontest.EngineOf(f), rec).ActionClientFor(context.Background(), actiontest.AppServiceCR())
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// Each failed operation leaves one Warning Event on the CR with Helm's error.
func TestReleaseEventsOnFailure(t *testing.T) {
	f := actiontest.Failing(errors.New(`execution error at (x/templates/a.yaml:1:1): boom`), errors.New("secrets is forbidden"))
	c, rec := eventing(t, f)
	dryRun := func(u *action.Upgrade) error { u.DryRun = true; u.DryRunOption = "server"; return nil }

	_, _ = c.Get("x")
	_, _ = c.Install("x", "team-a", nil, nil)
	_, _ = c.Upgrade("x", "team-a", nil, nil, dryRun)
	_, _ = c.Upgrade("x", "team-a", nil, nil)
	_, _ = c.Uninstall("x")
	_ = c.Reconcile(&release.Release{Name: "x"})
	want := []string{
		"Warning ReleaseLookupFailed reading release x: secrets is forbidden",
		"Warning InstallFailed installing release x: execution error at (x/templates/a.yaml:1:1): boom",
		"Warning UpgradeFailed checking the upgrade (server-side dry run) of release x: execution error at (x/templates/a.yaml:1:1): boom",
		"Warning UpgradeFailed upgrading release x: execution error at (x/templates/a.yaml:1:1): boom",
		"Warning UninstallFailed uninstalling release x: execution error at (x/templates/a.yaml:1:1): boom",
		"Warning ReconcileFailed repairing the objects of release x: execution error at (x/templates/a.yaml:1:1): boom",
	}
	if got := actiontest.Events(rec); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// No release (a new CR, or one already uninstalled) is not a failure.
func TestReleaseEventsNotFoundIsQuiet(t *testing.T) {
	c, rec := eventing(t, actiontest.Failing(driver.ErrReleaseNotFound, driver.ErrReleaseNotFound))
	_, _ = c.Get("x")
	_, _ = c.Uninstall("x")
	if got := actiontest.Events(rec); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

// An error quoting a huge value gives an Event of bounded size that still says what failed
// and why, cut between characters.
func TestReleaseEventsBoundedMessage(t *testing.T) {
	c, rec := eventing(t, actiontest.Failing(errors.New("Invalid value: \""+strings.Repeat("é", 4096)+"\": must be no more than 63 bytes"), nil))
	_, _ = c.Install("x", "team-a", nil, nil)
	got := actiontest.Events(rec)
	if len(got) != 1 {
		t.Fatalf("events %q, want one", got)
	}
	msg := strings.TrimPrefix(got[0], "Warning InstallFailed ")
	if len(msg) > refusal.MaxEventMessage+len(" … ") || !utf8.ValidString(msg) ||
		!strings.HasPrefix(msg, "installing release x: Invalid value: \"éé") || !strings.Contains(msg, "éé … éé") ||
		!strings.HasSuffix(msg, "éé\": must be no more than 63 bytes") {
		t.Errorf("message of %d bytes %q, want at most %d bytes, whole characters, its start and its end", len(msg), msg, refusal.MaxEventMessage)
	}
}
