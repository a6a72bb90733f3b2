package crdgen

import (
	"errors"
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// openSchema admits any value, null included, and prunes nothing under it.
func openSchema() *apiextv1.JSONSchemaProps {
	return &apiextv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true), Nullable: true}
}

// isOpen tells whether s admits anything (openSchema, perhaps described).
func isOpen(s *apiextv1.JSONSchemaProps) bool {
	return s.Type == "" && !s.XIntOrString && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields &&
		s.Properties == nil && s.AdditionalProperties == nil
}

// checkStructural reports what the apiserver would refuse in a CRD, or what would give a
// field a different meaning there than in the chart.
func checkStructural(s *apiextv1.JSONSchemaProps) error {
	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	switch {
	case s.XIntOrString && s.Type != "":
		return errors.New(`"type" cannot stand beside an int-or-string "anyOf"`)
	case s.XIntOrString && preserve:
		return errors.New("an int-or-string cannot keep unknown fields")
	case !s.XIntOrString && s.Type == "" && !preserve:
		return errors.New(`"type" is required: a CRD schema must be structural`)
	case s.Type != "object" && s.Type != "" && (s.Properties != nil || s.AdditionalProperties != nil || s.Required != nil || preserve):
		return errors.New(`"properties", "additionalProperties" and "required" need "type": "object"`)
	case s.Type != "array" && s.Items != nil:
		return errors.New(`"items" needs "type": "array"`)
	case s.Type == "array" && s.Items == nil:
		return errors.New(`"type": "array" needs "items": a CRD schema must be structural`)
	case s.Properties != nil && s.AdditionalProperties != nil:
		return errors.New(`"properties" and an "additionalProperties" schema cannot be combined in a CRD`)
	}
	for _, name := range s.Required {
		if _, ok := s.Properties[name]; !ok && !preserve && s.AdditionalProperties == nil {
			return fmt.Errorf("required property %q is not declared in \"properties\"", name)
		}
	}
	return nil
}
