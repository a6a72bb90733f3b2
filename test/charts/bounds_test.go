package charts

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp/syntax"
	"sort"
	"testing"
)

// Namespace editors create the custom resources and the operator, shared by every tenant,
// holds each one's spec in memory (informer cache, Helm values, release records). So every
// free-form field of a house chart's values.schema.json must be bounded: the apiserver
// enforces the same bounds through the generated CRD before the operator sees an object.
// Another chart's spec is open where its schema is (an inferred spec is open everywhere):
// there, what bounds a spec is the largest write etcd admits.

// maxSpecBytes is the budget for the largest spec a house chart's schema admits, as compact
// JSON. The figures (go test -v -run TestSchemasBounded) are: warpdrivepool 154,745 bytes
// (its nodeSelector's 32 entries and the 2 x 16 resource quantities dominate, each key up
// to 317 characters), appservice and uniteddeployment 79,968, memcached 79,566, guestbook
// 85,752.
const maxSpecBytes = 256 << 10

// maxWriteBytes is the largest write etcd admits (its default --max-request-bytes, 1.5 MiB):
// the bound of a spec that an open schema admits. It binds before the apiserver's 3 MiB limit
// on a request body (--max-request-body-bytes): on the local cluster the largest CR admitted
// is 1,572,533 bytes of JSON (TestManagerMemoryWithLargestOpenCRs, docs/security.md).
const maxWriteBytes = 3 << 19

// Worst-case sizes in compact JSON as Go's encoder writes it: a character of a string may
// take 6 bytes (\u003c for <, > and &, \u2028, control characters), while JSON Schema's
// maxLength and CEL's size() count characters.
const (
	bytesPerChar = 6
	intBytes     = len("-9223372036854775808")
	numberBytes  = len("-1.2345678901234567e-308")
	boolBytes    = len("false")
)

// schemaBound returns the size in bytes of the largest JSON value that schema s admits, and
// a problem for each place under path that admits values of any size: an object that
// admits any field (no "additionalProperties"), a map without
// maxProperties or a bound on its keys (propertyNames' maxLength), an array without
// maxItems, a string without maxLength, an enum or an anchored pattern of bounded length.
func schemaBound(path string, s map[string]any) (int, []string) {
	if enum, ok := s["enum"].([]any); ok {
		longest := 0
		for _, v := range enum {
			data, _ := json.Marshal(v)
			longest = max(longest, len(data))
		}
		return longest, nil
	}
	if _, ok := s["anyOf"]; ok { // an int-or-string (the only anyOf crdgen allows)
		size, problems := stringBound(path, s)
		return max(size, intBytes), problems
	}
	switch s["type"] {
	case "string":
		return stringBound(path, s)
	case "integer":
		return intBytes, nil
	case "number":
		return numberBytes, nil
	case "boolean":
		return boolBytes, nil
	case "array":
		items, _ := s["items"].(map[string]any)
		itemSize, problems := schemaBound(path+"[]", items)
		n, ok := count(s, "maxItems")
		if !ok {
			return 0, append(problems, path+": an array without maxItems")
		}
		return 2 + n*itemSize + max(n-1, 0), problems
	case "object":
		return objectBound(path, s)
	}
	if ref, ok := s["$ref"].(string); ok { // crdgen resolves it; a house chart has none
		return 0, []string{fmt.Sprintf("%s: a $ref (%s), which this test does not follow", path, ref)}
	}
	if s["type"] == nil {
		return 0, []string{path + ": any type of value"}
	}
	return 0, []string{fmt.Sprintf("%s: no type this test knows (%v)", path, s["type"])}
}

func objectBound(path string, s map[string]any) (int, []string) {
	var problems []string
	size := 2 // {}
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		sub, _ := props[name].(map[string]any)
		valueSize, p := schemaBound(path+"."+name, sub)
		problems = append(problems, p...)
		key, _ := json.Marshal(name)
		size += len(key) + 1 + valueSize // "name":value
		if i > 0 {
			size++ // ,
		}
	}
	if s["additionalProperties"] == false {
		return size, problems
	}
	values, ok := s["additionalProperties"].(map[string]any)
	if !ok {
		// JSON Schema admits any other field: the CRD would prune them, Helm would not.
		return size, append(problems, path+`: an object without "additionalProperties": false or a schema`)
	}
	valueSize, p := schemaBound(path+"{}", values)
	problems = append(problems, p...)
	n, ok := count(s, "maxProperties")
	if !ok {
		problems = append(problems, path+": a map without maxProperties")
	}
	keys, _ := s["propertyNames"].(map[string]any)
	keyLength, ok := count(keys, "maxLength")
	if !ok {
		problems = append(problems, path+`: a map without "propertyNames": {"maxLength": n}`)
	}
	if n > 0 {
		size += n*(2+keyLength*bytesPerChar+1+valueSize) + (n - 1)
	}
	return size, problems
}

func stringBound(path string, s map[string]any) (int, []string) {
	length, ok := count(s, "maxLength")
	if pattern, isString := s["pattern"].(string); isString {
		if n, bounded := patternMaxLength(pattern); bounded && (!ok || n < length) {
			length, ok = n, true
		}
	}
	if !ok {
		return 0, []string{path + ": a string without maxLength, an enum or a pattern of bounded length"}
	}
	return 2 + length*bytesPerChar, nil
}

// count returns the non-negative integer keyword key of s.
func count(s map[string]any, key string) (int, bool) {
	f, ok := s[key].(float64)
	if !ok || f < 0 || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// patternMaxLength returns the most characters a string matching pattern can have, if the
// pattern is anchored at both ends and has no unbounded repetition.
func patternMaxLength(pattern string) (int, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 ||
		re.Sub[0].Op != syntax.OpBeginText || re.Sub[len(re.Sub)-1].Op != syntax.OpEndText {
		return 0, false // unanchored: any string containing a match matches
	}
	return regexpMaxLength(re)
}

func regexpMaxLength(re *syntax.Regexp) (int, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0, true
	case syntax.OpLiteral:
		return len(re.Rune), true
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1, true
	case syntax.OpCapture, syntax.OpQuest:
		return regexpMaxLength(re.Sub[0])
	case syntax.OpRepeat:
		n, ok := regexpMaxLength(re.Sub[0])
		return n * re.Max, ok && re.Max >= 0
	case syntax.OpConcat, syntax.OpAlternate:
		total := 0
		for _, sub := range re.Sub {
			n, ok := regexpMaxLength(sub)
			if !ok {
				return 0, false
			}
			if re.Op == syntax.OpConcat {
				total += n
			} else {
				total = max(total, n)
			}
		}
		return total, true
	}
	return 0, false // star, plus
}

// loadSchema reads a chart's values.schema.json; a chart without one has the empty schema.
func loadSchema(t *testing.T, chartName string) map[string]any {
	t.Helper()
	c := loadChart(t, chartName)
	if c.Schema == nil {
		return map[string]any{}
	}
	var s map[string]any
	if err := json.Unmarshal(c.Schema, &s); err != nil {
		t.Fatalf("%s: values.schema.json: %v", chartName, err)
	}
	return s
}

// Every map, array and string of every house chart's values.schema.json is bounded, and so
// is the largest spec each admits: a new unbounded field fails here. Any other chart (make
// add-kind) passes, and the test logs what bounds its spec: with a values.schema.json, its
// unbounded fields (rarely none) are listed for review, and the largest write etcd admits
// bounds the spec; without one, its spec is inferred from its values files and open
// everywhere, so that write is its only bound.
func TestSchemasBounded(t *testing.T) {
	if maxSpecBytes >= maxWriteBytes {
		t.Errorf("the budget of a house chart's spec, %d bytes, is not below the largest write etcd admits, %d", maxSpecBytes, maxWriteBytes)
	}
	// Every chart, not only those in watches.yaml. status.schema.json is left out: the
	// sidecar writes status, tenants cannot.
	dirs, err := filepath.Glob(filepath.Join(root, "helm-charts", "*", "Chart.yaml"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no charts found: %v", err)
	}
	for _, f := range dirs {
		chartName := filepath.Base(filepath.Dir(f))
		t.Run(chartName, func(t *testing.T) {
			house := isHouseChart(chartName)
			if loadChart(t, chartName).Schema == nil {
				if house {
					t.Fatal("a house chart has no values.schema.json")
				}
				t.Logf("no values.schema.json: the spec is inferred from the values files and open; "+
					"the largest write etcd admits, %d bytes, bounds it", maxWriteBytes)
				return
			}
			size, problems := schemaBound("spec", loadSchema(t, chartName))
			if !house {
				for _, p := range problems {
					t.Logf("values.schema.json: %s", p)
				}
				if len(problems) > 0 {
					t.Logf("with %d unbounded fields, the largest write etcd admits, %d bytes, bounds the spec",
						len(problems), maxWriteBytes)
				} else {
					t.Logf("the largest spec admitted is %d bytes of JSON", size)
				}
				return
			}
			for _, p := range problems {
				t.Errorf("values.schema.json: %s", p)
			}
			t.Logf("the largest spec admitted is %d bytes of JSON", size)
			if size > maxSpecBytes {
				t.Errorf("the largest spec admitted is %d bytes, over the budget of %d", size, maxSpecBytes)
			}
		})
	}
}

// The checker finds each kind of unbounded field, and sizes bounded ones.
func TestSchemaBoundChecker(t *testing.T) {
	unbounded := map[string]string{
		"map":                  `{"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": {"type": "integer"}}`,
		"map with free keys":   `{"type": "object", "maxProperties": 3, "additionalProperties": {"type": "integer"}}`,
		"map of free strings":  `{"type": "object", "maxProperties": 3, "propertyNames": {"maxLength": 3}, "additionalProperties": {"type": "string"}}`,
		"array":                `{"type": "array", "items": {"type": "integer"}}`,
		"array of strings":     `{"type": "array", "maxItems": 3, "items": {"type": "string", "minLength": 1}}`,
		"string":               `{"type": "string"}`,
		"int-or-string":        `{"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+$"}`,
		"unanchored pattern":   `{"type": "string", "pattern": "^[a-z]{1,3}"}`,
		"unbounded repetition": `{"type": "string", "pattern": "^a(b|c+)$"}`,
		"nested":               `{"type": "object", "additionalProperties": false, "properties": {"a": {"type": "object", "additionalProperties": false, "properties": {"b": {"type": "string"}}}}}`,
		"open object":          `{"type": "object", "properties": {"a": {"type": "integer"}}}`,
		"a reference":          `{"$ref": "#/definitions/port"}`,
		"any type":             `{"description": "anything"}`,
	}
	for name, schema := range unbounded {
		var s map[string]any
		if err := json.Unmarshal([]byte(schema), &s); err != nil {
			t.Fatal(err)
		}
		if _, problems := schemaBound("spec", s); len(problems) == 0 {
			t.Errorf("%s: %s passed as bounded", name, schema)
		}
	}

	bounded := []struct {
		schema string
		size   int
	}{
		{`{"type": "string", "maxLength": 3}`, 2 + 3*6},
		{`{"type": "string", "pattern": "^[a-z]([-a-z0-9]{0,2}[a-z])?$"}`, 2 + 4*6},
		{`{"type": "string", "pattern": "^(ab|c)$", "maxLength": 9}`, 2 + 2*6},
		{`{"type": "string", "enum": ["Delete", "Retain"]}`, len(`"Delete"`)},
		{`{"anyOf": [{"type": "integer"}, {"type": "string"}], "maxLength": 1}`, 20},
		{`{"type": "array", "maxItems": 2, "items": {"type": "boolean"}}`, len(`[false,false]`)},
		{`{"type": "object", "additionalProperties": false, "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}}`,
			len(`{"a":,"b":false}`) + 20},
		{`{"type": "object", "maxProperties": 2, "propertyNames": {"maxLength": 1}, "additionalProperties": {"type": "boolean"}}`,
			len(`{"":false,"":false}`) + 2*6},
	}
	for _, tt := range bounded {
		var s map[string]any
		if err := json.Unmarshal([]byte(tt.schema), &s); err != nil {
			t.Fatal(err)
		}
		size, problems := schemaBound("spec", s)
		if len(problems) > 0 {
			t.Errorf("%s: %v", tt.schema, problems)
		}
		if size != tt.size {
			t.Errorf("%s: size %d, want %d", tt.schema, size, tt.size)
		}
	}
}
