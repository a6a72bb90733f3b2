package crdgen

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// Every kind's spec (and status) has the field valuesfrom.Field, which lists Secrets and
// ConfigMaps to take values from. The operator reads and strips it: it never reaches the
// chart, so a chart may not use the name for a value of its own. Its names and bounds are
// those of internal/valuesfrom, the code that reads it, so that the CRD states what the
// operator enforces.

// dnsSubdomain is the pattern of a Secret's or ConfigMap's name (253 characters at most).
const dnsSubdomain = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

// valuesFromSchema is the schema of spec.valuesFrom. Every field is bounded, as the
// operator holds each resource's spec in memory.
func valuesFromSchema() apiextv1.JSONSchemaProps {
	return apiextv1.JSONSchemaProps{
		Type: "array",
		Description: "Secrets and ConfigMaps of the resource's namespace to take values from. Their values are merged " +
			"in order, each over the ones before, and the resource's own spec is merged over them all. A Secret " +
			"must carry the label " + valuesfrom.ReadableLabel + `: "true". Not passed to the chart.`,
		MaxItems:  ptr(int64(valuesfrom.MaxRefs)),
		XListType: ptr("atomic"),
		Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{
			Type:     "object",
			Required: []string{statuscontract.FieldSourceKind, statuscontract.FieldSourceName},
			Properties: map[string]apiextv1.JSONSchemaProps{
				"kind": {Type: "string", Enum: enumJSON(valuesfrom.KindSecret, valuesfrom.KindConfigMap),
					Description: "Kind of the source: Secret or ConfigMap."},
				"name": {Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(253)), Pattern: dnsSubdomain,
					Description: "Name of the source, in the resource's namespace."},
				"valuesKey": {Type: "string", MaxLength: ptr(int64(253)), Pattern: `^[-._a-zA-Z0-9]+$`,
					Description: "Key of the source's data that holds the values; " + valuesfrom.DefaultValuesKey + " if unset."},
				"targetPath": {Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(250)),
					Description: "Path of a single value, in Helm's --set syntax (such as a.b[0].c), that the key's " +
						"text is set at, rather than merging the key as a YAML document of values."},
				"optional": {Type: "boolean",
					Description: "Whether a missing source is skipped rather than an error."},
			},
		}},
	}
}

// valuesFromStatusSchema is the schema of status.valuesFrom, which the manager writes.
func valuesFromStatusSchema() apiextv1.JSONSchemaProps {
	return apiextv1.JSONSchemaProps{
		Type:        "array",
		Description: "The version of each source of spec.valuesFrom that the deployed release was rendered from.",
		MaxItems:    ptr(int64(valuesfrom.MaxRefs)),
		XListType:   ptr("atomic"),
		Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{
			Type:     "object",
			Required: []string{statuscontract.FieldSourceKind, statuscontract.FieldSourceName},
			Properties: map[string]apiextv1.JSONSchemaProps{
				statuscontract.FieldSourceKind:            {Type: "string", MaxLength: ptr(int64(16)), Description: "Kind of the source."},
				statuscontract.FieldSourceName:            {Type: "string", MaxLength: ptr(int64(253)), Description: "Name of the source."},
				statuscontract.FieldSourceResourceVersion: {Type: "string", MaxLength: ptr(int64(64)), Description: "resourceVersion of the source that was read."},
			},
		}},
	}
}
