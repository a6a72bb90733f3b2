package releasesign

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// keyField is the data field of the key Secret that holds the key.
const keyField = "key"

// LoadOrCreateKey reads the signing key from the Secret ns/name, creating it with a new
// random key if it does not exist. The Secret lives in the operator's own namespace, which
// namespace editors cannot read; whoever can read it (cluster admins) can sign records.
// Several replicas may race to create it: the loser reads the winner's. It also returns the
// Secret, whose annotations record the one-time take-over of unsigned records.
func LoadOrCreateKey(ctx context.Context, cs kubernetes.Interface, ns, name string) (Key, *corev1.Secret, error) {
	secrets := cs.CoreV1().Secrets(ns)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key := make([]byte, MinKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, nil, err
		}
		s, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
				"app.kubernetes.io/name": "warpdrive-operator", "app.kubernetes.io/component": "release-signing-key"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{keyField: key},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("release signing key %s/%s: %w", ns, name, err)
	}
	key := s.Data[keyField]
	if len(key) < MinKeySize {
		return nil, nil, fmt.Errorf("release signing key %s/%s: field %q holds %d bytes, want at least %d",
			ns, name, keyField, len(key), MinKeySize)
	}
	return Key(key), s, nil
}
