package crdgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// asExclusive reads exclusiveMinimum or exclusiveMaximum: a number, or draft-04's flag
// (returned as flag, the bound being minimum or maximum).
func asExclusive(v any) (bound *float64, flag bool, err error) {
	if b, ok := v.(bool); ok {
		return nil, b, nil
	}
	bound, err = asFloat(v)
	return bound, false, err
}

func asString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", errors.New("must be a string")
	}
	return s, nil
}

func asStrings(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("must be a list of strings")
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, errors.New("must be a list of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

func asFloat(v any) (*float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, errors.New("must be a number")
	}
	f, err := n.Float64()
	if err != nil {
		return nil, err
	}
	return &f, nil
}

func asCount(v any) (*int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, errors.New("must be a non-negative integer")
	}
	i, err := n.Int64()
	if err != nil || i < 0 {
		return nil, errors.New("must be a non-negative integer")
	}
	return &i, nil
}

func asJSON(v any) (*apiextv1.JSON, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &apiextv1.JSON{Raw: raw}, nil
}

func asValidationRules(v any) (apiextv1.ValidationRules, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields() // a misspelt "mesage" must not vanish
	var rules apiextv1.ValidationRules
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("must be a list of validation rules: %w", err)
	}
	for i, r := range rules {
		if r.Rule == "" {
			return nil, fmt.Errorf("rule %d has no \"rule\"", i)
		}
	}
	return rules, nil
}
