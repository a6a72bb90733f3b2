// Package releasesign makes Helm's release records trustworthy when they live where a
// namespace editor can write: in the release's own namespace, as Secrets of type
// helm.sh/release.v1.
//
// Helm acts on whatever its storage returns: a record's manifest says which objects an
// upgrade or uninstall deletes, its hooks are applied as they are. A namespace editor may
// create Secrets in their namespace, so without this package they could forge a record that
// makes the operator, with its cluster-wide rights, delete or create objects anywhere.
//
// Every record the operator writes is signed: an HMAC-SHA256, under a key only the operator
// can read, of the Secret's namespace, name, type, Helm's labels and the encoded release. The
// signature is an annotation of the Secret, so the record stays an ordinary Helm record that
// the helm CLI reads. Records whose signature is missing or wrong are hidden from Helm: a Get
// finds nothing, a List leaves them out, and the caller is told which were refused.
package releasesign

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// SignatureAnnotation holds a record's signature.
const SignatureAnnotation = "warpdrive.transwarp.io/release-signature"

// signatureVersion prefixes the signed bytes, so that a change of what is signed can never
// make an old signature valid for a new layout.
const signatureVersion = "warpdrive.transwarp.io/release-signature/v1"

// helmLabels are the labels Helm queries records by (name, status) and derives from the
// record (owner, version): a record with a signed body but a relabelled status would
// otherwise be found as "deployed" while it says "superseded".
var helmLabels = []string{"owner", "name", "status", "version"}

// MinKeySize is the shortest key accepted: an HMAC-SHA256 key of 32 bytes.
const MinKeySize = 32

// Key signs and verifies release records.
type Key []byte

// ErrUnsigned and ErrBadSignature say why a record was refused.
var (
	ErrUnsigned     = errors.New("not signed by this operator")
	ErrBadSignature = errors.New("signature does not match its content (changed after the operator wrote it, or signed with another key)")
)

// signature computes the signature of s as if it were stored in namespace ns.
func (k Key) signature(ns string, s *corev1.Secret) string {
	mac := hmac.New(sha256.New, k)
	field := func(h hash.Hash, b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(mac, []byte(signatureVersion))
	field(mac, []byte(ns))
	field(mac, []byte(s.Name))
	field(mac, []byte(s.Type))
	for _, l := range helmLabels {
		field(mac, []byte(s.Labels[l]))
	}
	field(mac, s.Data["release"])
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Sign sets the signature of s, a record about to be written to namespace ns.
func (k Key) Sign(ns string, s *corev1.Secret) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[SignatureAnnotation] = k.signature(ns, s)
}

// Verify returns nil if s, read from namespace ns, carries a valid signature.
func (k Key) Verify(ns string, s *corev1.Secret) error {
	got, ok := s.Annotations[SignatureAnnotation]
	if !ok {
		return ErrUnsigned
	}
	if !hmac.Equal([]byte(got), []byte(k.signature(ns, s))) {
		return ErrBadSignature
	}
	return nil
}

// RefusalFunc is told of each record hidden from Helm, and why.
type RefusalFunc func(secret string, reason error)

// SecretClient is the Secrets client of Helm's storage driver for one namespace: it signs
// what it writes and hides what does not verify.
type SecretClient struct {
	corev1client.SecretInterface
	namespace string
	key       Key
	refused   RefusalFunc
}

// NewSecretClient wraps the Secrets client of namespace ns. refused may be nil.
func NewSecretClient(c corev1client.SecretInterface, ns string, key Key, refused RefusalFunc) *SecretClient {
	if refused == nil {
		refused = func(string, error) {}
	}
	return &SecretClient{SecretInterface: c, namespace: ns, key: key, refused: refused}
}

// Create signs and creates a record.
func (c *SecretClient) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	s = s.DeepCopy()
	c.key.Sign(c.namespace, s)
	return c.SecretInterface.Create(ctx, s, opts)
}

// Update signs and updates a record. Helm updates a record it has just read, so the record
// it replaces verified.
func (c *SecretClient) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	s = s.DeepCopy()
	c.key.Sign(c.namespace, s)
	return c.SecretInterface.Update(ctx, s, opts)
}

// Get returns a record that verifies; any other is reported and not found.
func (c *SecretClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	s, err := c.SecretInterface.Get(ctx, name, opts)
	if err != nil {
		return s, err
	}
	if err := c.key.Verify(c.namespace, s); err != nil {
		c.refused(name, err)
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return s, nil
}

// ListPage is how many Secrets a List reads at a time. A namespace editor can label Secrets
// of up to 1 MiB each as records of their own release; a page is held whole only while it is
// verified, so what a List holds at once is the records it keeps and one page, however many
// such Secrets there are. Four holds a release's usual records (one or two) in one request.
const ListPage = 4

// List returns the records that verify; the others are reported. It reads them ListPage at a
// time, unless the caller pages itself.
func (c *SecretClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	paging := opts.Limit == 0 && opts.Continue == ""
	if paging {
		opts.Limit = ListPage
	}
	out := &corev1.SecretList{}
	for {
		page, err := c.SecretInterface.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range page.Items {
			if err := c.key.Verify(c.namespace, &page.Items[i]); err != nil {
				c.refused(page.Items[i].Name, err)
				continue
			}
			out.Items = append(out.Items, page.Items[i])
		}
		out.TypeMeta, out.ResourceVersion = page.TypeMeta, page.ResourceVersion
		if !paging || page.Continue == "" {
			out.Continue, out.RemainingItemCount = page.Continue, page.RemainingItemCount
			return out, nil
		}
		opts.Continue = page.Continue
	}
}

// Delete deletes a record only if it verifies (Helm reads a record before it deletes it, so
// this only closes the window between the two).
func (c *SecretClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	s, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if opts.Preconditions == nil {
		opts.Preconditions = &metav1.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion}
	}
	return c.SecretInterface.Delete(ctx, name, opts)
}

// String describes a refusal for people.
func Describe(secret string, reason error) string {
	return fmt.Sprintf("Secret %s: %v", secret, reason)
}
