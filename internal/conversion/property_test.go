package conversion

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// threeVersions has renames, swaps, a chain of renames, nesting and un-nesting, drops, and
// pointers of one step that the other step uses too.
const threeVersions = `
- from: v1alpha1
  to: v1beta1
  moves:
  - {from: /replicaCount, to: /replicas}
  - {from: /password, to: /auth/password}
  - {from: /image, to: /container/image}
  - {from: /a, to: /b}
  - {from: /b, to: /a}
  - {from: /c, to: /d}
  - {from: /d, to: /e}
  - {from: "/x~1y", to: "/x~0y"}
  - {from: /old/nested/port, to: /port}
  drops: [/legacy, /old/flag]
- from: v1beta1
  to: v1
  moves:
  - {from: /replicas, to: /scale/replicas}
  - {from: /container/image, to: /image}
  - {from: /auth/password, to: /auth/secret/password}
  - {from: /e, to: /deep/er/e}
  drops: [/a]
`

// The round trips Kubernetes requires of a conversion webhook: a CR converted to another
// version and back is the CR it was, deep-equal, whatever its spec holds. The specs are
// random, made of the keys the moves name (so that values sit at, above, below and in the way
// of the moved fields), nulls, empty objects and lists.
func TestRoundTrips(t *testing.T) {
	for name, file := range map[string]string{"two versions": redisSteps, "three versions": threeVersions} {
		t.Run(name, func(t *testing.T) {
			c := mustParse(t, file)
			g := newGen(c, 1)
			for _, from := range c.versions {
				for _, to := range c.versions {
					if from == to {
						continue
					}
					for i := range 1000 {
						obj := g.cr(from)
						out := convert(t, c, obj, to)
						if !reflect.DeepEqual(out["status"], obj["status"]) || !reflect.DeepEqual(otherMetadata(out), otherMetadata(obj)) {
							t.Fatalf("%s -> %s, object %d: status or metadata changed:\n%v\n%v", from, to, i, obj, out)
						}
						back := convert(t, c, out, from)
						if !reflect.DeepEqual(back, obj) {
							t.Fatalf("%s -> %s -> %s, object %d:\n%v\n(-want +got):\n%s", from, to, from, i, obj, cmp.Diff(obj, back))
						}
					}
				}
			}
		})
	}
}

// otherMetadata is the metadata of obj but for the Annotation, which a conversion alone may
// change.
func otherMetadata(obj map[string]any) map[string]any {
	meta := copyValue(obj["metadata"]).(map[string]any)
	if annotations, ok := meta["annotations"].(map[string]any); ok {
		delete(annotations, Annotation)
		if len(annotations) == 0 {
			delete(meta, "annotations")
		}
	}
	return meta
}

// Any sequence of conversions that returns to a CR's version returns the CR.
func TestRandomWalks(t *testing.T) {
	c := mustParse(t, threeVersions)
	g := newGen(c, 2)
	for i := range 2000 {
		start := c.versions[g.r.IntN(len(c.versions))]
		obj := g.cr(start)
		cur, walk := obj, []string{start}
		for range 1 + g.r.IntN(5) {
			v := c.versions[g.r.IntN(len(c.versions))]
			cur = convert(t, c, cur, v)
			walk = append(walk, v)
		}
		cur = convert(t, c, cur, start)
		if !reflect.DeepEqual(cur, obj) {
			t.Fatalf("walk %d, %v -> %s:\n%v\n(-want +got):\n%s", i, walk, start, obj, cmp.Diff(obj, cur))
		}
	}
}

// gen makes random CRs whose specs are made of the keys the chain's pointers name.
type gen struct {
	r        *rand.Rand
	pointers []pointer // every pointer of every step
	keys     []string
}

// newGen seeds its generator with seed, so that a failure recurs.
func newGen(c *Chain, seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, 75))}
	seen := map[string]bool{}
	for _, s := range c.steps {
		for _, m := range s.moves {
			for _, p := range []pointer{m.from, m.to} {
				if p == nil {
					continue
				}
				g.pointers = append(g.pointers, p)
				for _, k := range p {
					if !seen[k] {
						seen[k] = true
						g.keys = append(g.keys, k)
					}
				}
			}
		}
	}
	g.keys = append(g.keys, "other", "", "0", "~", "/")
	return g
}

// cr is a CR at version, with a random spec (now and then not an object) and metadata, and
// sometimes a status.
func (g *gen) cr(version string) map[string]any {
	obj := map[string]any{
		"apiVersion": "cache.example.com/" + version,
		"kind":       "Redis",
		"metadata":   map[string]any{"name": "cr", "namespace": "tenant"},
	}
	if g.r.IntN(2) == 0 {
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{"note": g.scalarString()}
	}
	if g.r.IntN(4) == 0 {
		obj["status"] = g.object(2)
	}
	switch g.r.IntN(20) {
	case 0:
		// no spec
	case 1:
		obj["spec"] = g.value(2)
	default:
		spec := g.object(3)
		// Values at the moved pointers, or above them (blocking them, or holding them
		// empty), or below them.
		for _, p := range g.pointers {
			switch g.r.IntN(6) {
			case 0:
				set(spec, p, g.value(2))
			case 1:
				set(spec, p[:1+g.r.IntN(len(p))], g.value(1))
			case 2:
				set(spec, append(p[:len(p):len(p)], g.key()), g.value(1))
			}
		}
		obj["spec"] = spec
	}
	return obj
}

// set puts v at p in spec, replacing whatever is on the way.
func set(spec map[string]any, p pointer, v any) {
	m := spec
	for _, k := range p[:len(p)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[p[len(p)-1]] = v
}

func (g *gen) key() string {
	if g.r.IntN(8) == 0 {
		return fmt.Sprint("k", g.r.IntN(100))
	}
	return g.keys[g.r.IntN(len(g.keys))]
}

func (g *gen) value(depth int) any {
	switch n := g.r.IntN(10); {
	case depth <= 0 || n < 5:
		return g.scalar()
	case n < 8:
		return g.object(depth - 1)
	default:
		l := make([]any, g.r.IntN(4))
		for i := range l {
			l[i] = g.value(depth - 1)
		}
		return l
	}
}

func (g *gen) object(depth int) map[string]any {
	m := map[string]any{}
	for range g.r.IntN(5) {
		m[g.key()] = g.value(depth)
	}
	return m
}

// scalar is a value as JSON decodes it into an unstructured object: whole numbers are
// int64, so the floats have a fraction.
func (g *gen) scalar() any {
	switch g.r.IntN(6) {
	case 0:
		return nil
	case 1:
		return g.r.IntN(2) == 0
	case 2:
		return g.r.Int64() - g.r.Int64()
	case 3:
		return float64(g.r.IntN(1e6)) + 0.5
	default:
		return g.scalarString()
	}
}

func (g *gen) scalarString() string {
	return []string{"", "redis", "~0/1", "<&>", "ünïcödé", "{\"a\":1}", "null", "3"}[g.r.IntN(8)]
}

// FuzzRoundTrip converts CRs whose spec is any JSON (go test -fuzz FuzzRoundTrip): a
// conversion never panics, and the round trip returns the CR.
func FuzzRoundTrip(f *testing.F) {
	for _, seed := range []string{
		`{"replicaCount": 3, "password": "p", "auth": {}}`,
		`{"password": "p", "auth": "none", "replicas": 5, "legacyPort": null}`,
		`{"old": {"nested": {"port": 1, "x": []}}, "port": {"a": 1}, "a": 1, "b": [2]}`,
		`"a string"`, `[1, {"replicaCount": 2}]`, `null`,
	} {
		f.Add(seed)
	}
	c := mustParse(f, threeVersions)
	f.Fuzz(func(t *testing.T, spec string) {
		var v any
		if err := utiljson.Unmarshal([]byte(spec), &v); err != nil {
			return
		}
		for _, from := range c.versions {
			for _, to := range c.versions {
				obj := map[string]any{"apiVersion": "g/" + from, "metadata": map[string]any{"name": "n"}, "spec": v}
				out, err := c.ConvertMap(obj, to)
				if err != nil {
					if strings.Contains(err.Error(), "may hold") {
						continue
					}
					t.Fatal(err)
				}
				back, err := c.ConvertMap(out, from)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(back, obj) {
					t.Fatalf("%s -> %s -> %s:\n%s", from, to, from, cmp.Diff(obj, back))
				}
			}
		}
	})
}
