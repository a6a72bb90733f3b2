package conversion

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// openAPI decodes an openAPI v3 schema written in YAML.
func openAPI(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Between the spec schemas of two versions of Bitnami's redis chart, password moved into
// auth, which Infer finds by its name; replicaCount became replicas and usePassword
// auth.enabled, which only a person can tell.
func TestInferRedis(t *testing.T) {
	before := openAPI(t, `
type: object
properties:
  replicaCount: {type: integer}
  password: {type: string}
  usePassword: {type: boolean}
  image:
    type: object
    properties:
      registry: {type: string}
      repository: {type: string}
      tag: {type: string}
  master:
    type: object
    properties:
      persistence:
        type: object
        properties:
          enabled: {type: boolean}
          size: {type: string}
      podLabels: {type: object, additionalProperties: {type: string}}
`)
	after := openAPI(t, `
type: object
properties:
  replicas: {type: integer}
  auth:
    type: object
    properties:
      enabled: {type: boolean}
      password: {type: string}
  image:
    type: object
    properties:
      registry: {type: string}
      repository: {type: string}
      tag: {type: string}
  master:
    type: object
    properties:
      persistence:
        type: object
        properties:
          enabled: {type: boolean}
          size: {type: string}
  commonLabels: {type: object, additionalProperties: {type: string}}
  podLabels: {type: object, additionalProperties: {type: string}}
`)
	moves, review := Infer(before, after)
	wantMoves := []Move{
		{From: "/master/podLabels", To: "/podLabels"},
		{From: "/password", To: "/auth/password"},
	}
	if !reflect.DeepEqual(moves, wantMoves) {
		t.Errorf("moves:\n%s", cmp.Diff(wantMoves, moves))
	}
	wantReview := []string{
		`/replicaCount (integer): gone, and no new field is named "replicaCount" with that type`,
		`/usePassword (boolean): gone, and no new field is named "usePassword" with that type`,
	}
	if !reflect.DeepEqual(review, wantReview) {
		t.Errorf("review:\n%s", cmp.Diff(wantReview, review))
	}

	// What Infer proposes, conversions.yaml accepts.
	data, err := yaml.Marshal([]map[string]any{{"from": "v1alpha1", "to": "v1", "moves": moves}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(data); err != nil {
		t.Errorf("Parse of the inferred moves: %v\n%s", err, data)
	}
}

func TestInfer(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after string
		moves         []Move
		review        []string
	}{{
		name:   "same schema",
		before: `{properties: {a: {type: string}, b: {properties: {c: {type: integer}}}}}`,
		after:  `{properties: {a: {type: string}, b: {properties: {c: {type: integer}}}}}`,
	}, {
		name:   "no schema",
		before: `{}`, after: `{type: object, x-kubernetes-preserve-unknown-fields: true}`,
	}, {
		name:   "new fields only",
		before: `{properties: {a: {type: string}}}`,
		after:  `{properties: {a: {type: string}, b: {type: string}}}`,
	}, {
		name:   "renamed: same type, another name",
		before: `{properties: {replicaCount: {type: integer}}}`,
		after:  `{properties: {replicas: {type: integer}}}`,
		review: []string{`/replicaCount (integer): gone, and no new field is named "replicaCount" with that type`},
	}, {
		name:   "moved with another type",
		before: `{properties: {port: {type: integer}}}`,
		after:  `{properties: {service: {properties: {port: {type: string}}}}}`,
		review: []string{`/port (integer): gone, and no new field is named "port" with that type`},
	}, {
		name:   "moved, the name kept",
		before: `{properties: {metrics: {properties: {port: {x-kubernetes-int-or-string: true}}}}}`,
		after:  `{properties: {monitoring: {properties: {metrics: {properties: {port: {x-kubernetes-int-or-string: true}}}}}}}`,
		moves:  []Move{{From: "/metrics/port", To: "/monitoring/metrics/port"}},
	}, {
		name:   "several places for one field",
		before: `{properties: {password: {type: string}}}`,
		after:  `{properties: {auth: {properties: {password: {type: string}}}, sentinel: {properties: {password: {type: string}}}}}`,
		review: []string{`/password (string): gone, and several new fields could be it: /auth/password, /sentinel/password`},
	}, {
		name:   "several fields for one place",
		before: `{properties: {master: {properties: {port: {type: integer}}}, replica: {properties: {port: {type: integer}}}}}`,
		after:  `{properties: {port: {type: integer}}}`,
		review: []string{
			`/master/port (integer): gone, and /port could be it as well as the new place of /master/port, /replica/port`,
			`/replica/port (integer): gone, and /port could be it as well as the new place of /master/port, /replica/port`,
		},
	}, {
		name:   "lists of other items",
		before: `{properties: {hosts: {type: array, items: {type: string}}}}`,
		after:  `{properties: {ingress: {properties: {hosts: {type: array, items: {type: object, properties: {name: {type: string}}}}}}}}`,
		review: []string{`/hosts (array of string): gone, and no new field is named "hosts" with that type`},
	}, {
		name:   "lists of the same items",
		before: `{properties: {hosts: {type: array, items: {type: string}}}}`,
		after:  `{properties: {ingress: {properties: {hosts: {type: array, items: {type: string}}}}}}`,
		moves:  []Move{{From: "/hosts", To: "/ingress/hosts"}},
	}, {
		name:   "a string became an object",
		before: `{properties: {image: {type: string}, tag: {type: string}}}`,
		after:  `{properties: {image: {properties: {repository: {type: string}, tag: {type: string}}}}}`,
		moves:  []Move{{From: "/tag", To: "/image/tag"}},
		review: []string{`/image (string): gone, and no new field is named "image" with that type`},
	}, {
		name:   "moves that overlap",
		before: `{properties: {image: {type: string}, tag: {type: string}}}`,
		after:  `{properties: {container: {properties: {image: {type: string}}}, image: {properties: {tag: {type: string}}}}}`,
		review: []string{
			`/image (string): would move to /container/image, which overlaps another move: place it by hand`,
			`/tag (string): would move to /image/tag, which overlaps another move: place it by hand`,
		},
	}, {
		name:   "keys to escape",
		before: `{properties: {"a/b": {type: boolean}}}`,
		after:  `{properties: {"c~d": {properties: {"a/b": {type: boolean}}}}}`,
		moves:  []Move{{From: "/a~1b", To: "/c~0d/a~1b"}},
	}, {
		name:   "malformed schemas",
		before: `{properties: {a: 1, b: {type: 2}, c: {properties: []}}}`,
		after:  `{properties: "none"}`,
		review: []string{
			`/a (untyped): gone, and no new field is named "a" with that type`,
			`/b (untyped): gone, and no new field is named "b" with that type`,
			`/c (untyped): gone, and no new field is named "c" with that type`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			moves, review := Infer(openAPI(t, tc.before), openAPI(t, tc.after))
			if !reflect.DeepEqual(moves, tc.moves) {
				t.Errorf("moves:\n%s", cmp.Diff(tc.moves, moves))
			}
			if !reflect.DeepEqual(review, tc.review) {
				t.Errorf("review:\n%s", strings.Join(review, "\n"))
			}
		})
	}
}

func TestInferNil(t *testing.T) {
	if moves, review := Infer(nil, nil); moves != nil || review != nil {
		t.Errorf("Infer(nil, nil) = %v, %v", moves, review)
	}
}
