package releasesign

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// RefusalFunc is told of each record hidden from Helm, and why.
type RefusalFunc func(secret string, reason error)

// SecretClient is the Secrets client of Helm's storage driver for one namespace: it signs
// what it writes and hides what does not verify.
type SecretClient struct {
	corev1client.SecretInterface
	namespace string
	key       Keys
	refused   RefusalFunc
}

// NewSecretClient wraps the Secrets client of namespace ns: it signs with key's current key and
// verifies with any of them. refused may be nil.
func NewSecretClient(c corev1client.SecretInterface, ns string, key Keys, refused RefusalFunc) *SecretClient {
	if refused == nil {
		refused = func(string, error) {}
	}
	return &SecretClient{SecretInterface: c, namespace: ns, key: key, refused: refused}
}

// Create signs and creates a record. Where a record the operator must not trust already has
// the name, it is moved aside first (displace), so that a release goes on from the operator's
// own records under the revision Helm numbers next instead of failing "already exists".
func (c *SecretClient) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	s = s.DeepCopy()
	c.key.Sign(c.namespace, s)
	out, err := c.SecretInterface.Create(ctx, s, opts)
	if !apierrors.IsAlreadyExists(err) || len(opts.DryRun) > 0 {
		return out, err
	}
	if derr := c.displace(ctx, s.Name); derr != nil {
		return out, fmt.Errorf("%w (%v)", err, derr)
	}
	return c.SecretInterface.Create(ctx, s, opts)
}

// DisplacedSuffix names, after a record's Secret, the copy of a Secret displace moved aside.
const DisplacedSuffix = ".refused"

// DisplacedLabelsAnnotation keeps, on a copy displace made, the labels of the Secret it was:
// the copy has none, so that Helm and the operator no longer take it for a record.
const DisplacedLabelsAnnotation = "warpdrive.transwarp.io/refused-record-labels"

// displace moves the Secret named name aside, to a copy of its data and type named with
// DisplacedSuffix, if it is a record this operator refuses as unsigned or changed: written
// by a person's `helm upgrade` or `helm rollback` (Helm rewrites the record it supersedes,
// unsigned), or edited by whoever may write the namespace's Secrets. Nothing is lost, and the
// release's own records stay what Helm numbers from. A record that verifies, or that is
// signed by a key the operator does not hold (a lost or rotated-out key: restoring the key
// makes it good again), is left where it is.
func (c *SecretClient) displace(ctx context.Context, name string) error {
	old, err := c.SecretInterface.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	verr := c.key.Verify(c.namespace, old)
	if verr == nil {
		return fmt.Errorf("the Secret %s is a record of this operator", name)
	}
	if r := Reason(verr); r != "unsigned" && r != "changed" {
		return fmt.Errorf("the Secret %s is not moved aside: %w", name, verr)
	}
	labels, err := json.Marshal(old.Labels)
	if err != nil {
		return err
	}
	kept := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: name + DisplacedSuffix,
			Annotations: map[string]string{DisplacedLabelsAnnotation: string(labels)}},
		Type: old.Type,
		Data: old.Data,
	}
	if _, err := c.SecretInterface.Create(ctx, kept, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = c.SecretInterface.Update(ctx, kept, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("moving Secret %s aside: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("moving Secret %s aside: %w", name, err)
	}
	err = c.SecretInterface.Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &old.UID, ResourceVersion: &old.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("moving Secret %s aside: %w", name, err)
	}
	c.refused(name, &DisplacedError{Reason: verr, To: kept.Name})
	return nil
}

// DisplacedError: a refused record was moved aside, to the Secret To, for the operator's own
// record of that revision.
type DisplacedError struct {
	Reason error
	To     string
}

func (e *DisplacedError) Error() string {
	return fmt.Sprintf("%v; moved aside to Secret %s, so that the release goes on from the operator's own records", e.Reason, e.To)
}

func (e *DisplacedError) Unwrap() error { return e.Reason }

// Update signs and updates a record. Helm updates a record it has just read, so the record
// it replaces verified. It is signed with the current key whatever key signed it before: a
// record is re-signed after a rotation the next time Helm writes it.
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

// Describe describes a refusal for people.
func Describe(secret string, reason error) string {
	return fmt.Sprintf("Secret %s: %v", secret, reason)
}
