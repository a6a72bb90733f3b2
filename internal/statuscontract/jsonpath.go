package statuscontract

import (
	"strconv"
	"strings"
)

// FieldJSONPath is the JSONPath of the status field at path, as the CRDs' printer columns
// and scale subresource and `kubectl wait --for=jsonpath` name it: .status.chart.version for
// FieldChart, FieldChartVersion.
func FieldJSONPath(path ...string) string {
	return ".status." + strings.Join(path, ".")
}

// ConditionJSONPath is the JSONPath of key ("status", "reason", "message") of the condition
// of type typ: .status.conditions[?(@.type=="Ready")].status for Ready, "status".
func ConditionJSONPath(typ, key string) string {
	return FieldJSONPath(FieldConditions) + "[?(@.type==" + strconv.Quote(typ) + ")]." + key
}
