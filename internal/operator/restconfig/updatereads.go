package restconfig

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// UpdateReads answers Helm's repeated reads of one object within an update from the first.
//
// Helm's kube.Client.Update (3.21) reads each object of the release two or three times in a
// row: a GET to see whether it exists, another in createPatch for the three-way merge, and,
// where the patch is empty, a third to refresh it. An AppService upgrade, whose Deployment
// changes and whose Service does not, makes five GETs before the Deployment's patch, three of
// them repeating the one before, each a round trip to an API server that an edit wave
// saturates. While an update runs (during), the last GET's answer is given again to
// the same GET asked next; any other request forgets it, so a read after a write, or after
// another object's, goes to the API server. What it holds is one object's answer.
//
// Only within an update: Helm's wait polls the same object with GETs, which must each read
// the API server, and nothing else of the release's operations repeats a read back to back.
type UpdateReads struct {
	mu   sync.Mutex
	on   bool
	seq  uint64     // counts the requests sent on, so that an answer is kept only if none came since
	last *keptReply // the last GET's answer while on; nil if the last request was anything else
}

// keptReply is a GET's answer, kept whole.
type keptReply struct {
	key    string
	header http.Header
	body   []byte
}

// during runs update with the repeated reads answered, and forgets the answer kept after.
func (r *UpdateReads) During(update func()) {
	r.mu.Lock()
	r.on, r.last = true, nil
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.on, r.last = false, nil
		r.mu.Unlock()
	}()
	update()
}

// Wrap is a rest.Config's transport wrapper.
func (r *UpdateReads) Wrap(next http.RoundTripper) http.RoundTripper {
	return &updateReadsTransport{reads: r, next: next}
}

type updateReadsTransport struct {
	reads *UpdateReads
	next  http.RoundTripper
}

func (t *updateReadsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := t.reads
	r.mu.Lock()
	if !r.on {
		// Counted all the same: an answer of an earlier update still on its way must not be
		// kept past this request by the next update.
		r.seq++
		r.mu.Unlock()
		return t.next.RoundTrip(req)
	}
	// The content type asked for is part of the question: Helm's clients ask for JSON or
	// protobuf by the object's kind.
	key := req.Method + " " + req.URL.String() + " " + req.Header.Get("Accept")
	if req.Method == http.MethodGet && r.last != nil && r.last.key == key {
		kept := r.last
		r.mu.Unlock()
		return kept.response(req), nil
	}
	r.last = nil
	r.seq++
	seq, keep := r.seq, req.Method == http.MethodGet && !req.URL.Query().Has("watch")
	r.mu.Unlock()

	resp, err := t.next.RoundTrip(req)
	if err != nil || !keep || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	kept := &keptReply{key: key, header: resp.Header.Clone(), body: body}
	r.mu.Lock()
	if r.on && r.seq == seq {
		r.last = kept
	}
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// response is the kept answer, for req: a 200, the only status kept.
func (k *keptReply) response(req *http.Request) *http.Response {
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        k.header.Clone(),
		Body:          io.NopCloser(bytes.NewReader(k.body)),
		ContentLength: int64(len(k.body)),
		Request:       req,
	}
}

// UpdateReadsGetter is the RESTClientGetter of a release's Helm Kubernetes client (the
// confinedKube's), whose REST configs answer the repeated reads of an update (UpdateReads).
type UpdateReadsGetter struct {
	genericclioptions.RESTClientGetter
	Reads *UpdateReads
}

func (g UpdateReadsGetter) ToRESTConfig() (*rest.Config, error) {
	return wrappedRESTConfig(g.RESTClientGetter, g.Reads.Wrap)
}
