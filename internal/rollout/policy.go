package rollout

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Policy is how a new chart rolls out over the CRs of one kind.
type Policy struct {
	// AllAtOnce moves every CR to the new chart at once, as fast as the workers go: no
	// waves, no halt.
	AllAtOnce bool
	// Canaries is how many CRs move first, on their own wave; CRs labelled as canaries
	// (CanaryLabel) are among them, and there are at least as many canaries as labels.
	Canaries int
	// Waves are the cumulative percentages of the CRs moved at the end of each wave after
	// the canaries, growing; the last is 100.
	Waves []int
	// Timeout is how long a CR of a wave may take to be Ready on the new chart; longer is
	// a failure.
	Timeout time.Duration
	// MinReady is how long a CR must have been on the new chart, and be Ready, to count as
	// done: the sidecar's verdict on its workloads needs a moment to follow a chart change
	// that leaves the CR's generation as it was (like a Deployment's minReadySeconds).
	MinReady time.Duration
	// Rollback moves the CRs that failed back to the chart they had; without it they are
	// left on the new chart for a person to look at.
	Rollback bool
	// OrderKey keys the order of the CRs in the waves (ordered): a secret of the operator's,
	// set by it, never parsed from a flag. Keyed, the order cannot be searched for a name
	// that comes first: with a plain hash of "namespace/name", 2 million names took 0.4 s
	// to find one in the lowest 1.5e-6 of the order, and a tenant so named a CR to be the
	// canary of every rollout of the kind.
	OrderKey []byte
}

// Waved is the policy "waved" names: a canary, then 10%, 25%, 50% and 100% of the CRs.
var Waved = Policy{Canaries: 1, Waves: []int{10, 25, 50, 100}, Timeout: 10 * time.Minute,
	MinReady: 10 * time.Second, Rollback: true}

// Default is the policy of a kind no flag names: Waved, for a chart that breaks should break
// one CR, not the fleet; "all" is one flag away.
var Default = Waved

// String is the policy as Parse reads it.
func (p Policy) String() string {
	if p.AllAtOnce {
		return "all"
	}
	waves := make([]string, len(p.Waves))
	for i, w := range p.Waves {
		waves[i] = strconv.Itoa(w)
	}
	onFailure := "hold"
	if p.Rollback {
		onFailure = "rollback"
	}
	return fmt.Sprintf("canaries:%d,waves:%s,timeout:%s,minready:%s,onfailure:%s",
		p.Canaries, strings.Join(waves, "/"), p.Timeout, p.MinReady, onFailure)
}

// Parse reads a policy: "all" (every CR at once), "waved" (Waved), or a comma-separated
// list of settings over Waved: canaries:N, waves:P/P/.../100, timeout:DURATION,
// minready:DURATION, onfailure:rollback|hold. For example
// "canaries:2,waves:20/100,timeout:5m".
func Parse(s string) (Policy, error) {
	switch strings.TrimSpace(s) {
	case "all":
		return Policy{AllAtOnce: true}, nil
	case "waved", "":
		return Waved, nil
	}
	p := Waved
	p.Waves = append([]int(nil), Waved.Waves...)
	for _, part := range strings.Split(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return Policy{}, fmt.Errorf("%q is not key:value", part)
		}
		var err error
		switch key {
		case "canaries", "canary":
			p.Canaries, err = strconv.Atoi(val)
			if err == nil && p.Canaries < 0 {
				err = fmt.Errorf("negative")
			}
		case "waves":
			p.Waves, err = parseWaves(val)
		case "timeout":
			p.Timeout, err = time.ParseDuration(val)
			if err == nil && p.Timeout <= 0 {
				err = fmt.Errorf("not positive")
			}
		case "minready":
			p.MinReady, err = time.ParseDuration(val)
			if err == nil && p.MinReady < 0 {
				err = fmt.Errorf("negative")
			}
		case "onfailure":
			switch val {
			case "rollback":
				p.Rollback = true
			case "hold":
				p.Rollback = false
			default:
				err = fmt.Errorf("not rollback or hold")
			}
		default:
			return Policy{}, fmt.Errorf("unknown setting %q (canaries, waves, timeout, minready, onfailure)", key)
		}
		if err != nil {
			return Policy{}, fmt.Errorf("%s:%s: %w", key, val, err)
		}
	}
	return p, nil
}

func parseWaves(s string) ([]int, error) {
	var waves []int
	for _, f := range strings.Split(s, "/") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		if n <= 0 || n > 100 || (len(waves) > 0 && n <= waves[len(waves)-1]) {
			return nil, fmt.Errorf("percentages must grow, each in 1..100")
		}
		waves = append(waves, n)
	}
	if len(waves) == 0 || waves[len(waves)-1] != 100 {
		return nil, fmt.Errorf("the last wave must be 100")
	}
	return waves, nil
}

// Policies are the policies by kind, from the flag --rollout=Kind=POLICY (repeated); a
// kind not named has Default, or the policy of "*=POLICY".
type Policies map[string]Policy

// For is kind's policy.
func (ps Policies) For(kind string) Policy {
	if p, ok := ps[kind]; ok {
		return p
	}
	if p, ok := ps["*"]; ok {
		return p
	}
	return Default
}

// String lists the policies, for the flag's help.
func (ps Policies) String() string {
	var parts []string
	for k, p := range ps {
		parts = append(parts, k+"="+p.String())
	}
	return strings.Join(parts, ";")
}

// Set reads one Kind=POLICY (flag.Value).
func (ps Policies) Set(s string) error {
	kind, pol, ok := strings.Cut(s, "=")
	if !ok || kind == "" {
		return fmt.Errorf("%q is not Kind=POLICY", s)
	}
	p, err := Parse(pol)
	if err != nil {
		return fmt.Errorf("rollout policy of %s: %w", kind, err)
	}
	ps[kind] = p
	return nil
}
