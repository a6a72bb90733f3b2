package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
)

// A chart that renders something new at every render (a random password it does not keep by
// lookup, the time, a UUID) never matches its release: each reconcile's dry run finds a
// change, and the reconciler upgrades, at every forced, periodic or drift-woken reconcile, for
// ever (the stock helm-operator's open problem, operator-sdk #5728, #6609). Each upgrade is a
// new revision and a rollout of whatever the value reaches.
//
// renderLoopUpgrades upgrades in a row of one CR with the same chart and the same values are
// taken for such a loop: the next identical upgrade is refused, with an error that says why,
// until the spec, a source of spec.valuesFrom or the chart changes, or for renderLoopHold
// after the last one (then one more is let through: a chart that looks up an object that
// changed is not looping, and a loop costs one revision an hour).
const (
	renderLoopUpgrades = 3
	renderLoopHold     = time.Hour
)

// withRenderLoopGuard hands out action clients that refuse the upgrades of a render loop.
// The count lives in outcomes, whose per-CR state goneForgetter forgets once the CR is gone.
func withRenderLoopGuard(getter helmclient.ActionClientGetter, o *outcomes.Store) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(ac helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return renderLoopClient{ActionInterface: ac, cr: cr, outcomes: o, now: time.Now}
	})
}

// renderLoopClient is the render-loop layer (see pipeline.go).
type renderLoopClient struct {
	helmclient.ActionInterface
	cr       client.Object
	outcomes *outcomes.Store
	now      func() time.Time
}

// renderLoopError says that the chart renders differently each time from the same inputs.
type renderLoopError struct{ upgrades int }

func (e renderLoopError) Error() string {
	return fmt.Sprintf("the chart renders differently at every render of the same values: %d upgrades in a row "+
		"with no change of spec, valuesFrom sources or chart; a template renders a new value each time (randAlphaNum, "+
		"uuidv4, now, genPrivateKey...) without keeping it by lookup. Upgrades stop until the spec, a source or the "+
		"chart changes (one more is tried after %s)", e.upgrades, renderLoopHold)
}

func (c renderLoopClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	if actionclient.IsDryRun(opts) {
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	}
	inputs, err := upgradeInputs(chrt, vals)
	if err != nil {
		return nil, err
	}
	if n := c.outcomes.LoopingUpgrades(c.cr, inputs, c.now(), renderLoopHold); n >= renderLoopUpgrades {
		return nil, renderLoopError{upgrades: n}
	}
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	if err == nil {
		c.outcomes.Upgraded(c.cr, inputs, c.now())
	}
	return rel, err
}

// upgradeInputs is a digest of what an upgrade renders from: the chart and the values.
func upgradeInputs(chrt *chart.Chart, vals map[string]any) (string, error) {
	data, err := json.Marshal(vals) // map keys come out sorted
	if err != nil {
		return "", fmt.Errorf("values of the upgrade: %w", err)
	}
	sum := sha256.Sum256(append([]byte(rollout.Digest(chrt)+"\n"), data...))
	return hex.EncodeToString(sum[:16]), nil
}
