package releasesign

import (
	"context"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The data fields of the key Secret: keyField holds the current key, which signs; each
// previousPrefix+<any name> field a previous one, which only verifies (rotation: see
// docs/security.md, "Key lifecycle: rotation, loss, restore").
const (
	keyField       = "key"
	previousPrefix = "previous-"
)

// LoadOrCreateKeys reads the signing keys from the Secret ns/name, creating it with a new
// random key if it does not exist and mayCreate (if not nil) returns nil; created says it did.
// The Secret lives in the operator's own namespace, which namespace editors cannot read;
// whoever can read it (cluster admins) can sign records. Several replicas may race to create
// it: the loser reads the winner's (and created is false for it). It also returns the Secret,
// whose annotations record the take-overs.
//
// A key created where the operator signed records before would refuse every one of them:
// mayCreate refuses to create it then (trustedconfig), and its error is returned as it is.
func LoadOrCreateKeys(ctx context.Context, cs kubernetes.Interface, ns, name string,
	mayCreate func(context.Context) error) (keys Keys, s *corev1.Secret, created bool, err error) {
	secrets := cs.CoreV1().Secrets(ns)
	s, err = secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && mayCreate != nil {
		if err := mayCreate(ctx); err != nil {
			return Keys{}, nil, false, err
		}
	}
	if apierrors.IsNotFound(err) {
		key := make([]byte, MinKeySize)
		if _, err := rand.Read(key); err != nil {
			return Keys{}, nil, false, err
		}
		s, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
				"app.kubernetes.io/name": "warpdrive-operator", "app.kubernetes.io/component": "release-signing-key"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{keyField: key},
		}, metav1.CreateOptions{})
		created = err == nil
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return Keys{}, nil, false, fmt.Errorf("release signing key %s/%s: %w", ns, name, err)
	}
	keys, err = ParseKeys(s.Data)
	if err != nil {
		return Keys{}, nil, false, fmt.Errorf("release signing key %s/%s: %w", ns, name, err)
	}
	return keys, s, created, nil
}

// ParseKeys reads the keys of the key Secret's data. A field it does not know, or a key
// shorter than MinKeySize, is an error rather than ignored: a mistyped "previous-" field would
// otherwise silently leave records of that key unverifiable.
func ParseKeys(data map[string][]byte) (Keys, error) {
	var ks Keys
	current := data[keyField]
	if len(current) < MinKeySize {
		return Keys{}, fmt.Errorf("field %q holds %d bytes, want at least %d", keyField, len(current), MinKeySize)
	}
	ks.Current = Key(current)
	names := make([]string, 0, len(data))
	for f := range data {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		if f == keyField {
			continue
		}
		if !strings.HasPrefix(f, previousPrefix) {
			return Keys{}, fmt.Errorf("field %q is neither %q (the current key) nor %q<name> (a previous key)", f, keyField, previousPrefix)
		}
		if len(data[f]) < MinKeySize {
			return Keys{}, fmt.Errorf("field %q holds %d bytes, want at least %d", f, len(data[f]), MinKeySize)
		}
		if k := Key(data[f]); !ks.Holds(k.ID()) {
			ks.Previous = append(ks.Previous, k)
		}
	}
	return ks, nil
}

// PreviousFields are the fields of the key Secret's data that hold previous keys, by key id:
// what the administrator drops once no record names that key.
func PreviousFields(data map[string][]byte) map[string]string {
	out := map[string]string{}
	for f, k := range data {
		if strings.HasPrefix(f, previousPrefix) {
			out[Key(k).ID()] = f
		}
	}
	return out
}

// IDs are the ids of the current key and of the previous ones, for the log.
func (ks Keys) IDs() (current string, previous []string) {
	for _, k := range ks.Previous {
		previous = append(previous, k.ID())
	}
	return ks.Current.ID(), previous
}
