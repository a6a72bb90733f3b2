package faults

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
)

// decodeRelease reads the release stored in a Helm release Secret: base64 of gzipped JSON
// (Helm's storage format), which the API's own base64 of Secret data wraps once more.
func decodeRelease(s corev1.Secret) (*release.Release, error) {
	b, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b, 0x08}) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		if b, err = io.ReadAll(r); err != nil {
			return nil, err
		}
	}
	rel := &release.Release{}
	return rel, json.Unmarshal(b, rel)
}
