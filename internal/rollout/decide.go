package rollout

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// Labels and annotations people set.
const (
	// CanaryLabel "true" on a Namespace makes the CRs in it the canaries of their kind. It is
	// read from the Namespace, not the CR: labelling a Namespace is a cluster administrator's
	// right, while anyone who may edit a CR could label it, and so choose the fleet's
	// canaries (labelling every CR would make the canary wave the whole fleet).
	CanaryLabel = "warpdrive.transwarp.io/canary"
	// ForceAnnotation set on a CR to a chart digest moves that CR to that chart now, whatever
	// the waves and a halt say: the way its owner retries a CR that failed. It clears the CR's
	// failure only once the CR is healthy on the chart, and so resumes a halted rollout only
	// on that evidence: anyone who may edit one CR may set it, and must not be able to send a
	// chart that failed on to every other tenant.
	ForceAnnotation = "warpdrive.transwarp.io/force-chart"
	// ForceNamespaceLabel set on a Namespace to a chart digest forces its CRs to that chart
	// and clears their failures at once: an administrator's word that the failures say nothing
	// of the chart, which resumes a halted rollout. Labelling a Namespace is an
	// administrator's right, as for CanaryLabel.
	ForceNamespaceLabel = "warpdrive.transwarp.io/force-chart"
)

// Member is what the rollout controller observes of one CR of the kind, all of it from the
// cluster (the CR's status, labels and annotations), so that a restarted manager decides as
// the previous one would have.
type Member struct {
	// Key names the CR: namespace/name.
	Key string
	// Generation is the CR's metadata.generation: a spec edit changes it.
	Generation int64
	// Inputs names what else its owner gave the CR's deployed release: the versions of the
	// sources of its spec.valuesFrom (status.valuesFrom), digested; "" if none. A source
	// edited changes no generation.
	Inputs string
	// InputsPending: the CR's owner changed its input since its release was deployed, and
	// the release does not have it yet: a source edited, deleted or past its bound, or a
	// failure that names the owner's input (a source that cannot be read, a spec over the
	// bound). Its state says nothing of a chart.
	InputsPending bool
	// Canary: the CR's Namespace carries CanaryLabel "true".
	Canary bool
	// Digest is the digest of the chart of the CR's release (status.chart.digest); "" if
	// not known yet.
	Digest string
	// Deployed is when the release was last deployed (status.chart.lastDeployed).
	Deployed time.Time
	// Ready is the Ready condition True at the CR's generation; NotReadySince is when it
	// last went to not True.
	Ready         bool
	NotReadySince time.Time
	// Stalled is the Stalled condition True.
	Stalled bool
	// FailedDigest is the chart the CR was marked as failing with (status.chart.failedDigest).
	FailedDigest string
	// Forced is the value of the CR's ForceAnnotation; NamespaceForced of its Namespace's
	// ForceNamespaceLabel.
	Forced          string
	NamespaceForced string
	// Paused: the CR's reconciles are paused (its owner's annotation). It cannot move, so its
	// wave does not wait for it; it moves once resumed, if its wave is admitted by then.
	Paused bool
	// Baseline is the CR's state on its own chart when it was last observed before the move
	// (status.chart.baseline); zero if none was recorded.
	Baseline Baseline
}

// healthy: Ready at its generation and not Stalled.
func (m Member) healthy() bool { return m.Ready && !m.Stalled }

// Baseline is how a CR stood on its own chart just before the rollout moved it to the chart
// of Digest: its state on the new chart is judged against it. Only a CR that was healthy
// before, and whose input has not changed since (its spec, the sources of its values), can
// fail a chart: a CR that was already broken, or whose owner changed what it is given during
// its move, says nothing of the chart, and must not halt every other tenant's rollout (a
// person who may edit one CR, or one ConfigMap it reads, could otherwise stop the fleet's
// upgrades at will).
type Baseline struct {
	Digest     string
	Generation int64
	Inputs     string
	Healthy    bool
}

// sameInput reports whether b was recorded with the input m has now, none of it pending.
func (b Baseline) sameInput(m *Member) bool {
	return b.Generation == m.Generation && b.Inputs == m.Inputs && !m.InputsPending
}

// Counts are the CRs of a kind by where they stand in the rollout.
type Counts struct {
	Behind, InProgress, Upgraded, Failed int
}

// Plan is Decide's answer.
type Plan struct {
	// Target is the digest of the chart the operator carries.
	Target string
	// Waves are the members' keys in rollout order, in waves: the canaries first (if
	// any), then the growing batches.
	Waves [][]string
	// Wave is the index of the wave under way, len(Waves) when every wave is done.
	Wave int
	// WaveOf is the index of each member's wave.
	WaveOf map[string]int
	// Admitted are the CRs that may move to the target chart now (or stay on it).
	Admitted map[string]bool
	// Halted: a CR failed on the target chart; no further CR moves to it.
	Halted bool
	// Failed are the CRs that failed on the target chart: those marked before and those
	// that failed now. NewlyFailed are the ones to mark now.
	Failed      map[string]bool
	NewlyFailed []string
	Counts      Counts
	// AllAtOnce is the policy's: no waves, no halt, no baselines.
	AllAtOnce bool
}

// Done reports whether every wave is done.
func (p Plan) Done() bool { return p.Wave >= len(p.Waves) }

// Decide picks the rollout's next step from what is observed now: which CRs may move to the
// chart of digest target, whether the rollout halts, and which CRs failed. It keeps no
// state: the waves are the members in a stable order (canaries first, then by a hash of
// their names) cut by the policy, and the wave under way is the first whose CRs are not all
// done (on the target chart, Ready, for MinReady), so the same cluster gives the same plan
// whoever asks. A failure is marked on the CR (status.chart.failedDigest) by the caller, so
// that the halt outlives the failed CR's rollback and a restart.
func Decide(p Policy, target string, members []Member, now time.Time) Plan {
	plan := Plan{Target: target, Admitted: map[string]bool{}, Failed: map[string]bool{}, AllAtOnce: p.AllAtOnce}
	order := ordered(members, p.OrderKey)
	byKey := make(map[string]*Member, len(members))
	for i := range members {
		byKey[members[i].Key] = &members[i]
	}
	if p.AllAtOnce {
		plan.Waves = [][]string{keys(order)}
	} else {
		plan.Waves = cut(keys(order), canaries(p, order), p.Waves)
	}
	// judged: the CR's state on the target chart says something of the chart (Baseline).
	judged := func(m *Member) bool {
		return m.Baseline.Digest == target && m.Baseline.Healthy && m.Baseline.sameInput(m)
	}
	done := func(m *Member) bool {
		if m.Paused && m.Digest != target {
			return true // not waited for: anyone who may edit a CR could hold the waves
		}
		if m.Stalled && m.Digest != target && !judged(m) {
			// Nor one its own spec keeps Stalled on its chart (an edit its chart refuses, a
			// missing source, a spec over the bound): it moves once its owner mends it. A CR
			// that failed on the target chart is judged, and halts the rollout below.
			return true
		}
		if m.Digest != target {
			return false
		}
		return !judged(m) || (m.Ready && !m.Deployed.IsZero() && now.Sub(m.Deployed) >= p.MinReady)
	}
	// retried: its owner forced the CR to the target after it failed there, and it is
	// healthy on it now: the failure is lifted by that evidence, not by the annotation.
	retried := func(m *Member) bool { return m.Forced == target && m.Digest == target && m.healthy() }
	failing := func(m *Member) bool {
		switch {
		case m.NamespaceForced == target:
			return false // an administrator lifted it
		case m.FailedDigest == target:
			return !retried(m)
		case m.Forced == target:
			return false // being retried by its owner
		case m.Paused:
			return false
		case p.AllAtOnce, !judged(m):
			return false
		case m.Stalled:
			return true
		default:
			// Not Ready on the target chart for longer than the timeout, counted from the
			// move if it was not Ready before.
			since := m.NotReadySince
			if m.Deployed.After(since) {
				since = m.Deployed
			}
			return m.Digest == target && !m.Ready && !since.IsZero() && now.Sub(since) > p.Timeout
		}
	}
	// A CR marked failed anywhere halts the rollout, even outside the waves admitted: the
	// order may have shifted since (a CR was created or deleted).
	for i := range order {
		if m := &order[i]; m.FailedDigest == target && m.NamespaceForced != target && !retried(m) {
			plan.Failed[m.Key] = true
		}
	}
	plan.WaveOf = make(map[string]int, len(members))
	for w, ks := range plan.Waves {
		for _, k := range ks {
			plan.WaveOf[k] = w
		}
	}
	plan.Wave = len(plan.Waves)
	upTo := 0 // members in the waves admitted
	for w, wave := range plan.Waves {
		upTo += len(wave)
		failedHere := false
		for i := range order[:upTo] {
			m := &order[i]
			if failing(m) && !plan.Failed[m.Key] {
				plan.Failed[m.Key] = true
				plan.NewlyFailed = append(plan.NewlyFailed, m.Key)
			}
			failedHere = failedHere || plan.Failed[m.Key]
		}
		if failedHere {
			plan.Wave = w
			break
		}
		allDone := true
		for _, k := range wave {
			if !done(byKey[k]) {
				allDone = false
			}
		}
		if !allDone {
			plan.Wave = w
			break
		}
	}
	plan.Halted = len(plan.Failed) > 0 && !p.AllAtOnce
	for i, m := range order {
		switch {
		case m.Forced == target, m.NamespaceForced == target:
			plan.Admitted[m.Key] = true
		case plan.Failed[m.Key]:
			plan.Admitted[m.Key] = !p.Rollback
		case plan.Halted:
			// No further CR moves; those already on the target chart stay there.
			plan.Admitted[m.Key] = m.Digest == target
		default:
			// A CR moves once its baseline is recorded at its input (Baseline).
			plan.Admitted[m.Key] = i < upTo && (m.Digest == target || p.AllAtOnce ||
				(m.Baseline.Digest == target && m.Baseline.Generation == m.Generation && m.Baseline.Inputs == m.Inputs))
		}
		switch {
		case plan.Failed[m.Key]:
			plan.Counts.Failed++
		case m.Digest == target:
			if done(&order[i]) {
				plan.Counts.Upgraded++
			} else {
				plan.Counts.InProgress++
			}
		case plan.Admitted[m.Key]:
			plan.Counts.InProgress++
		default:
			plan.Counts.Behind++
		}
	}
	sort.Strings(plan.NewlyFailed)
	return plan
}

// Baseline is the baseline to record for m: a CR not yet on the target chart records its
// state now, until the plan admits it; from then on (and once on the target chart) the one
// recorded stays, for the move is judged against the state before it, unless a spec edit or
// a source's makes a new one.
func (p Plan) Baseline(m Member) Baseline {
	kept := m.Baseline
	if kept.Digest != p.Target {
		kept = Baseline{}
	}
	switch {
	case p.AllAtOnce:
		return Baseline{}
	case m.Digest == p.Target:
		return kept // moved, or on the chart before the rollout reached it (nothing to judge)
	case kept.Digest != "" && p.Admitted[m.Key] && kept.Generation == m.Generation && kept.Inputs == m.Inputs:
		return kept
	}
	return Baseline{Digest: p.Target, Generation: m.Generation, Inputs: m.Inputs, Healthy: m.healthy() && !m.InputsPending}
}

// ordered sorts the members in rollout order: canaries first, then by an HMAC of the key
// under orderKey (spread over namespaces, and the same in every process that holds
// orderKey), then by key. No tenant can compute where a name falls in it.
//
// Why not another order for each chart: a test that breaks a chart for one CR of a wave
// names that CR in the chart, and so in its digest.
func ordered(members []Member, orderKey []byte) []Member {
	o := rolloutOrder{members: append([]Member(nil), members...), hashes: make([]uint64, len(members))}
	h := hmac.New(sha256.New, orderKey)
	var in, sum []byte
	for i, m := range o.members {
		in = append(in[:0], m.Key...)
		h.Reset()
		h.Write(in)
		sum = h.Sum(sum[:0])
		o.hashes[i] = binary.BigEndian.Uint64(sum)
	}
	sort.Sort(o)
	return o.members
}

// rolloutOrder sorts members with their key's hash alongside, computed once per member: the
// plans of a fleet of N CRs sort N members each.
type rolloutOrder struct {
	members []Member
	hashes  []uint64
}

func (o rolloutOrder) Len() int { return len(o.members) }

func (o rolloutOrder) Swap(i, j int) {
	o.members[i], o.members[j] = o.members[j], o.members[i]
	o.hashes[i], o.hashes[j] = o.hashes[j], o.hashes[i]
}

func (o rolloutOrder) Less(i, j int) bool {
	a, b := &o.members[i], &o.members[j]
	if a.Canary != b.Canary {
		return a.Canary
	}
	if o.hashes[i] != o.hashes[j] {
		return o.hashes[i] < o.hashes[j]
	}
	return a.Key < b.Key
}

func keys(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Key
	}
	return out
}

// canaries is the size of the canary wave: the policy's count, or the labelled canaries if
// there are more.
func canaries(p Policy, order []Member) int {
	labelled := 0
	for _, m := range order {
		if m.Canary {
			labelled++
		}
	}
	return min(max(p.Canaries, labelled), len(order))
}

// cut cuts the ordered keys into the canary wave and the waves of the cumulative
// percentages; every wave has at least one CR, and the last ends with the last key.
func cut(order []string, canaries int, percents []int) [][]string {
	var waves [][]string
	n, end := len(order), 0
	if canaries > 0 {
		waves, end = append(waves, order[:canaries]), canaries
	}
	for _, pct := range percents {
		if end >= n {
			break
		}
		next := min(n, max(end+1, (pct*n+99)/100))
		waves, end = append(waves, order[end:next]), next
	}
	if end < n {
		waves = append(waves, order[end:])
	}
	return waves
}

// Describe says in a sentence where a CR stands, for its ChartRollout condition: whether it
// is on the target chart, and if not, why not.
func (p Plan) Describe(key string, m Member) (onTarget bool, reason, message string) {
	wave, ok := p.WaveOf[key]
	if !ok {
		wave = -1
	}
	switch {
	case p.Failed[key]:
		return m.Digest == p.Target, statuscontract.ReasonRolloutFailed, fmt.Sprintf(
			"this resource failed on chart %s, which halted the rollout; to retry it, annotate it %s=%s "+
				"(the halt lifts once it is healthy on that chart), or ship a fixed chart", p.Target, ForceAnnotation, p.Target)
	case m.Digest == p.Target:
		return true, statuscontract.ReasonUpgraded, fmt.Sprintf("the release is on the chart the operator carries (%s)", p.Target)
	case p.Halted && !p.Admitted[key]:
		return false, statuscontract.ReasonRolloutHalted, fmt.Sprintf(
			"held on its chart: the rollout of chart %s halted after %d resource(s) failed on it; "+
				"spec edits apply with the chart of its own release. It resumes with a fixed chart, once the "+
				"failed resources are retried and healthy, or when an administrator labels their Namespaces %s=%s",
			p.Target, len(p.Failed), ForceNamespaceLabel, p.Target)
	case p.Admitted[key] || (!p.Halted && wave >= 0 && wave <= p.Wave):
		return false, statuscontract.ReasonUpgrading, fmt.Sprintf("moving to chart %s in wave %d of %d", p.Target, wave+1, len(p.Waves))
	default:
		return false, statuscontract.ReasonWaiting, fmt.Sprintf("waiting for wave %d of %d of the rollout of chart %s (wave %d under way)",
			wave+1, len(p.Waves), p.Target, p.Wave+1)
	}
}
