package main

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"transwarp.io/tos/warpdrive-operator/internal/renderbound"
)

// byteSize is a flag of a size in bytes, written as a Kubernetes quantity (160Mi, 16Mi, 1G),
// as the pod's own limits are.
type byteSize struct{ n *int64 }

func (b byteSize) String() string {
	if b.n == nil {
		return ""
	}
	return renderbound.ByteSize(*b.n)
}

func (b byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return err
	}
	*b.n = q.Value()
	return nil
}
