// Package releasechunks gives Helm's release storage a Secrets client that stores a release
// record larger than one Secret holds over several Secrets.
//
// A Secret holds at most 1 MiB of data, and Helm keeps a release, chart and manifest included,
// gzipped in one Secret: charts such as kube-prometheus-stack outgrow it, and Helm's own
// proposal for chunked storage has been open for years. Below the signed storage
// (internal/releasesign), which signs and verifies the record whole, this client writes a
// record's release in parts of ChunkSize: the record's own Secret, which Helm and the
// manager's cache find by its labels, keeps the first part and says in ChunksAnnotation how many
// there are; the others are Secrets named after it (ChunkName), of type ChunkType and without
// Helm's labels, so that nothing that lists records takes them for one. A read puts the parts
// back together before the record is verified: a part that is missing, changed or out of
// bounds makes the record fail its signature's digest, and it is refused like any record that
// changed.
//
// A record that fits in one Secret is written as Helm writes it, so the helm CLI reads it; it
// cannot read a record in parts (docs/security.md, "Releases over 1 MiB").
package releasechunks

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

const (
	// ChunkSize is the most of a release one Secret holds: a Secret's data may be 1 MiB, and
	// its request, base64 and metadata included, must stay under the API server's 1.5 MiB.
	ChunkSize = 768 << 10
	// MaxChunks bounds a record to 6 MiB of encoded release, and what a read holds at once.
	MaxChunks = 8
	// ChunksAnnotation, on a record's own Secret, is how many parts its release is in.
	ChunksAnnotation = "warpdrive.transwarp.io/release-chunks"
	// ChunkType is the type of the Secrets holding the parts after the first.
	ChunkType corev1.SecretType = "warpdrive.transwarp.io/release-chunk"
)

// ChunkName is the Secret of the part i (from 1) of the record in the Secret named record.
func ChunkName(record string, i int) string { return fmt.Sprintf("%s.part%d", record, i) }

// Client stores records whose release is larger than ChunkSize in parts.
type Client struct {
	corev1client.SecretInterface

	// seen is how many parts each record this client read or wrote was in, by name: an
	// Update or Delete deletes parts only after a record that had some. Helm reads a record
	// before it updates or deletes it, so the client knows it; probing for a first part after
	// every write would cost a request (answered 404) per record written, nearly all of which
	// fit in one Secret.
	mu   sync.Mutex
	seen map[string]int
}

// New wraps c, the Secrets of one namespace.
func New(c corev1client.SecretInterface) *Client { return &Client{SecretInterface: c} }

// Create writes the parts after the first, then the record with the first.
func (c *Client) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	head, err := c.writeParts(ctx, s, opts.DryRun)
	if err != nil {
		return nil, err
	}
	out, err := c.SecretInterface.Create(ctx, head, opts)
	if err == nil && len(opts.DryRun) == 0 {
		c.see(head)
	}
	return whole(out, s), err
}

// Update writes the parts after the first, then the record with the first, then deletes the
// parts a larger release had before, if the record it replaced was in parts.
func (c *Client) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	head, err := c.writeParts(ctx, s, opts.DryRun)
	if err != nil {
		return nil, err
	}
	out, err := c.SecretInterface.Update(ctx, head, opts)
	if err != nil {
		return nil, err
	}
	hadParts := c.hadParts(s.Name)
	if len(opts.DryRun) == 0 {
		c.see(head)
	}
	if !hadParts {
		return whole(out, s), nil
	}
	return whole(out, s), c.deleteParts(ctx, s.Name, parts(head))
}

// Get reads a record and its parts.
func (c *Client) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	s, err := c.SecretInterface.Get(ctx, name, opts)
	if err != nil {
		return s, err
	}
	c.see(s)
	return c.assemble(ctx, s)
}

// List reads the records and their parts.
func (c *Client) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	l, err := c.SecretInterface.List(ctx, opts)
	if err != nil {
		return l, err
	}
	for i := range l.Items {
		c.see(&l.Items[i])
		s, err := c.assemble(ctx, &l.Items[i])
		if err != nil {
			return nil, err
		}
		l.Items[i] = *s
	}
	return l, nil
}

// Delete deletes a record, then its parts if it was in parts.
func (c *Client) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if err := c.SecretInterface.Delete(ctx, name, opts); err != nil {
		return err
	}
	if !c.hadParts(name) {
		return nil
	}
	return c.deleteParts(ctx, name, 1)
}

// see notes how many parts the record s, as read or written, is in.
func (c *Client) see(s *corev1.Secret) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	c.seen[s.Name] = parts(s)
}

// hadParts reports whether the record named name may have parts to delete: it was in parts
// when this client last read or wrote it, or this client has not seen it.
func (c *Client) hadParts(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.seen[name]
	return !ok || n > 1
}

// writeParts writes the parts of s's release after the first, and returns the record's own
// Secret: s with the first part, and the count of parts if there are more.
func (c *Client) writeParts(ctx context.Context, s *corev1.Secret, dryRun []string) (*corev1.Secret, error) {
	release := s.Data["release"]
	head := s.DeepCopy()
	delete(head.Annotations, ChunksAnnotation)
	if len(release) <= ChunkSize {
		return head, nil
	}
	n := (len(release) + ChunkSize - 1) / ChunkSize
	if n > MaxChunks {
		return nil, fmt.Errorf("release record %s is %d KiB encoded, more than the %d MiB this operator stores",
			s.Name, len(release)>>10, MaxChunks*ChunkSize>>20)
	}
	for i := 1; i < n; i++ {
		part := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ChunkName(s.Name, i), Namespace: s.Namespace,
				OwnerReferences: s.OwnerReferences},
			Type: ChunkType,
			Data: map[string][]byte{"release": release[i*ChunkSize : min((i+1)*ChunkSize, len(release))]},
		}
		_, err := c.SecretInterface.Create(ctx, part, metav1.CreateOptions{DryRun: dryRun})
		if apierrors.IsAlreadyExists(err) {
			_, err = c.SecretInterface.Update(ctx, part, metav1.UpdateOptions{DryRun: dryRun})
		}
		if err != nil {
			return nil, fmt.Errorf("writing part %d of release record %s: %w", i, s.Name, err)
		}
	}
	if head.Annotations == nil {
		head.Annotations = map[string]string{}
	}
	head.Annotations[ChunksAnnotation] = strconv.Itoa(n)
	head.Data = map[string][]byte{"release": release[:ChunkSize]}
	return head, nil
}

// deleteParts deletes the parts of record from the part from on, until one is missing.
func (c *Client) deleteParts(ctx context.Context, record string, from int) error {
	for i := max(from, 1); i < MaxChunks; i++ {
		err := c.SecretInterface.Delete(ctx, ChunkName(record, i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("deleting part %d of release record %s: %w", i, record, err)
		}
	}
	return nil
}

// parts is how many parts s's release is in, by its annotation; 1 if it does not say or says
// what no record of this operator says.
func parts(s *corev1.Secret) int {
	n, err := strconv.Atoi(s.Annotations[ChunksAnnotation])
	if err != nil || n < 2 || n > MaxChunks {
		return 1
	}
	return n
}

// assemble returns s with the parts of its release after the first appended. A part that is
// missing or larger than a part is left out: the record then fails its digest above, and is
// refused as changed.
func (c *Client) assemble(ctx context.Context, s *corev1.Secret) (*corev1.Secret, error) {
	n := parts(s)
	if n == 1 {
		return s, nil
	}
	release := append([]byte(nil), s.Data["release"]...)
	for i := 1; i < n; i++ {
		part, err := c.SecretInterface.Get(ctx, ChunkName(s.Name, i), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading part %d of release record %s: %w", i, s.Name, err)
		}
		if part.Type != ChunkType || len(part.Data["release"]) > ChunkSize {
			break
		}
		release = append(release, part.Data["release"]...)
	}
	s = s.DeepCopy()
	s.Data["release"] = release
	return s, nil
}

// whole is out, the record as the API server stored it, with the release of s it was written
// from, as a caller that wrote s expects to read it back.
func whole(out, s *corev1.Secret) *corev1.Secret {
	if out == nil {
		return nil
	}
	out = out.DeepCopy()
	if out.Data == nil {
		out.Data = map[string][]byte{}
	}
	out.Data["release"] = s.Data["release"]
	return out
}
