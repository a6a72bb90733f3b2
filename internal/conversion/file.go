package conversion

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// FileName is the file of a chart directory that lists its kind's conversions.
const FileName = "conversions.yaml"

// VersionsDir is the directory of a chart that keeps what its kind's older versions were:
// the chart holds only the newest version's chart, and the CRD serves every version.
const VersionsDir = "versions"

// IsVersionHistory reports whether the file at rel, a slash-separated path in a chart
// directory, records the versions of the chart's kind (FileName and VersionsDir) rather than
// being a part of the chart.
func IsVersionHistory(rel string) bool {
	return rel == FileName || rel == VersionsDir || strings.HasPrefix(rel, VersionsDir+"/")
}

// Move is one move of conversions.yaml: the value at From, a JSON pointer into the spec of a
// step's older version, is at To in the newer version's spec. The tags are the file's keys,
// so that a Move marshals as the file writes it.
type Move struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Chain is a kind's versions, oldest first, with the steps that convert values between
// neighbours, as the chart's conversions.yaml lists them.
type Chain struct {
	versions []string
	steps    []step // steps[i] converts versions[i] to versions[i+1]
}

// step converts values of version from into values of version to. A drop of the file is a
// move to nowhere (to nil), and reversed a move from nowhere (from nil): the same rules then
// serve both directions.
type step struct {
	from, to string
	moves    []move
}

type move struct{ from, to pointer }

// reversed is the step that converts values of s.to back into values of s.from.
func (s step) reversed() step {
	r := step{from: s.to, to: s.from, moves: make([]move, len(s.moves))}
	for i, m := range s.moves {
		r.moves[i] = move{from: m.to, to: m.from}
	}
	return r
}

// Versions returns the kind's versions, oldest first.
func (c *Chain) Versions() []string {
	return slices.Clone(c.versions)
}

// Load reads and validates the conversions.yaml of the chart directory chartDir. A chart
// without one has an error that satisfies errors.Is(err, fs.ErrNotExist): its kind has one
// version, or its versions share one schema without saying so, which Load cannot tell.
func Load(chartDir string) (*Chain, error) {
	path := filepath.Join(chartDir, FileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates the content of a conversions.yaml. People edit the file by
// hand, and a conversion webhook must not find out at a tenant's read that a step is
// ambiguous, so Parse refuses, naming the step: unknown keys, malformed versions and
// pointers, a pointer moved twice or moved into twice, a pointer inside another pointer of
// its step (whether the inner value moves with the outer one is unclear), a version pair
// listed twice (in either direction), and steps that do not form one chain from an oldest
// version to a newest.
func Parse(data []byte) (*Chain, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("malformed YAML: %w", err)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(js, &raws); err != nil {
		return nil, errors.New("want a list of steps, each {from, to, moves, drops}")
	}
	if len(raws) == 0 {
		return nil, errors.New("file lists no steps (a kind with one version needs no " + FileName + ")")
	}
	steps := make([]step, len(raws))
	for i, raw := range raws {
		s, err := parseStep(raw)
		if err != nil {
			if s.from != "" && s.to != "" {
				return nil, fmt.Errorf("step %d (%s -> %s): %w", i+1, s.from, s.to, err)
			}
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		steps[i] = s
	}
	return chainOf(steps)
}

// parseStep decodes and validates one step. It returns the versions it read along with an
// error, so that the error can name the step.
func parseStep(raw json.RawMessage) (step, error) {
	var s step
	var moves []json.RawMessage
	var drops []string
	err := decodeObject(raw, "a step", map[string]field{
		"from":  {&s.from, "a version"},
		"to":    {&s.to, "a version"},
		"moves": {&moves, "a list of moves, each {from, to}"},
		"drops": {&drops, "a list of JSON pointers"},
	})
	if err != nil {
		return s, err
	}
	for _, v := range []struct{ key, version string }{{"from", s.from}, {"to", s.to}} {
		if v.version == "" {
			return s, fmt.Errorf("%s: a version is missing", v.key)
		}
		if errs := validation.IsDNS1035Label(v.version); len(errs) > 0 {
			return s, fmt.Errorf("%s: version %q: %s", v.key, v.version, strings.Join(errs, "; "))
		}
	}
	if s.from == s.to {
		return s, fmt.Errorf("converts %s to itself", s.from)
	}

	// Every pointer of the step, with what it is, for the checks below.
	type use struct {
		p      pointer
		source bool   // read from the older version (a move's from, a drop)
		what   string // where the file says it, for errors
		move   int    // index of its move, -1 for a drop
	}
	var uses []use
	for i, raw := range moves {
		var m Move
		if err := decodeObject(raw, "a move {from, to}", map[string]field{
			"from": {&m.From, "a JSON pointer"},
			"to":   {&m.To, "a JSON pointer"},
		}); err != nil {
			return s, fmt.Errorf("move %d: %w", i+1, err)
		}
		for _, k := range []struct{ key, p string }{{"from", m.From}, {"to", m.To}} {
			if k.p == "" {
				return s, fmt.Errorf("move %d: %s is missing", i+1, k.key)
			}
		}
		from, err := parsePointer(m.From)
		if err != nil {
			return s, fmt.Errorf("move %d: from: %w", i+1, err)
		}
		to, err := parsePointer(m.To)
		if err != nil {
			return s, fmt.Errorf("move %d: to: %w", i+1, err)
		}
		if slices.Equal(from, to) {
			return s, fmt.Errorf("move %d: moves %s onto itself", i+1, m.From)
		}
		s.moves = append(s.moves, move{from: from, to: to})
		uses = append(uses,
			use{from, true, fmt.Sprintf("move %d from", i+1), i},
			use{to, false, fmt.Sprintf("move %d to", i+1), i})
	}
	for i, d := range drops {
		p, err := parsePointer(d)
		if err != nil {
			return s, fmt.Errorf("drop %d: %w", i+1, err)
		}
		s.moves = append(s.moves, move{from: p})
		uses = append(uses, use{p, true, fmt.Sprintf("drop %d", i+1), -1})
	}

	// A pointer may be a source and a destination of the same step (a rename chain, a swap:
	// all values are taken before any is put), but not twice either, and none may lie inside
	// another: whether the inner value moves with the outer one would be unclear, and a value
	// kept from the outer place (what a tenant had beside the inner one) could not be put
	// back once the inner one is.
	for i, a := range uses {
		for _, b := range uses[i+1:] {
			switch {
			case slices.Equal(a.p, b.p) && a.source && b.source:
				return s, fmt.Errorf("%s is moved twice (%s, %s)", a.p, a.what, b.what)
			case slices.Equal(a.p, b.p) && !a.source && !b.source:
				return s, fmt.Errorf("two values are moved to %s (%s, %s)", a.p, a.what, b.what)
			case a.p.inside(b.p):
				return s, fmt.Errorf("%s (%s) lies inside %s (%s): the pointers of a step must not overlap", a.p, a.what, b.p, b.what)
			case b.p.inside(a.p):
				return s, fmt.Errorf("%s (%s) lies inside %s (%s): the pointers of a step must not overlap", b.p, b.what, a.p, a.what)
			}
		}
	}
	return s, nil
}

// chainOf orders the steps into one chain of versions, oldest first, or says why they do
// not form one. A chain makes the way between two versions unique: composing the steps along
// it is the only conversion.
func chainOf(steps []step) (*Chain, error) {
	type pair struct{ from, to string }
	listed := map[pair]int{}
	next := map[string]int{} // version -> the step that converts it to a newer one
	prev := map[string]int{} // version -> the step that converts an older one to it
	for i, s := range steps {
		if j, ok := listed[pair{s.from, s.to}]; ok {
			return nil, fmt.Errorf("steps %d and %d both convert %s to %s", j+1, i+1, s.from, s.to)
		}
		if j, ok := listed[pair{s.to, s.from}]; ok {
			return nil, fmt.Errorf("steps %d and %d convert between %s and %s both ways: a step's reverse is derived from it", j+1, i+1, s.from, s.to)
		}
		if j, ok := next[s.from]; ok {
			return nil, fmt.Errorf("%s is converted to both %s (step %d) and %s (step %d): versions must form one chain", s.from, steps[j].to, j+1, s.to, i+1)
		}
		if j, ok := prev[s.to]; ok {
			return nil, fmt.Errorf("both %s (step %d) and %s (step %d) are converted to %s: versions must form one chain", steps[j].from, j+1, s.from, i+1, s.to)
		}
		listed[pair{s.from, s.to}] = i
		next[s.from] = i
		prev[s.to] = i
	}

	var oldest []string
	for v := range next {
		if _, ok := prev[v]; !ok {
			oldest = append(oldest, v)
		}
	}
	slices.Sort(oldest)
	switch {
	case len(oldest) == 0:
		return nil, fmt.Errorf("the steps form a cycle (%s): a chain has an oldest version", strings.Join(slices.Sorted(maps.Keys(next)), ", "))
	case len(oldest) > 1:
		return nil, fmt.Errorf("the steps form %d chains, from %s: versions must form one chain", len(oldest), strings.Join(oldest, ", "))
	}

	c := &Chain{versions: []string{oldest[0]}}
	for v := oldest[0]; ; {
		i, ok := next[v]
		if !ok {
			break
		}
		c.steps = append(c.steps, steps[i])
		v = steps[i].to
		c.versions = append(c.versions, v)
	}
	if len(c.steps) < len(steps) {
		// With one oldest version and no version converted twice, the steps off the chain
		// can only go round.
		var cycle []string
		for v, i := range next {
			if !slices.Contains(c.versions, v) {
				cycle = append(cycle, steps[i].from)
			}
		}
		slices.Sort(cycle)
		return nil, fmt.Errorf("the steps form a cycle (%s) apart from the chain from %s", strings.Join(cycle, ", "), oldest[0])
	}
	return c, nil
}

// field is where decodeObject puts a key's value, and what the key wants, for errors.
type field struct {
	dst  any
	want string
}

// decodeObject decodes the JSON object raw (what yaml.YAMLToJSONStrict made of a mapping)
// into fields, refusing keys fields does not have. Unlike encoding/json's struct decoding,
// keys match exactly: "From" is a typo, not "from".
func decodeObject(raw json.RawMessage, what string, fields map[string]field) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return fmt.Errorf("want %s", what)
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		f, ok := fields[k]
		if !ok {
			return fmt.Errorf("unknown key %q (want %s)", k, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
		}
		if err := json.Unmarshal(obj[k], f.dst); err != nil {
			return fmt.Errorf("%s: want %s", k, f.want)
		}
	}
	return nil
}

// Identity reports whether no step moves or drops a value. Every version's spec then keeps
// its values in the same places, and when the versions' schemas are equal too, the API
// server can convert by changing apiVersion alone, without a webhook.
func (c *Chain) Identity() bool {
	for _, s := range c.steps {
		if len(s.moves) > 0 {
			return false
		}
	}
	return true
}
