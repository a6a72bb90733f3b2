package conversionwebhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// MaxRequestBytes bounds a review's body. The API server sends a list's objects in one
// review, a page of them as a client asked (kubectl asks 500 at a time), each at most the
// API server's 3 MiB request limit; 32 MiB holds pages of CRs far larger than any chart's
// values, while a body without a bound could take the sidecar's memory, which every replica
// shares with its status controllers.
const MaxRequestBytes = 32 << 20

// Path is where Server serves Handler, the path of the CRDs' clientConfig.service.
const Path = "/convert"

// Handler answers ConversionReviews for Kinds. It never calls the API server.
type Handler struct {
	Kinds Kinds
	Log   logr.Logger
}

// ServeHTTP decodes a ConversionReview from a POST body of at most MaxRequestBytes and
// answers it, the response's uid the request's. A body that is too large is refused with
// 413, one that is not a review with 400: the API server sends neither.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "a ConversionReview is POSTed", http.StatusMethodNotAllowed)
		return
	}
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxRequestBytes)).Decode(&review); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("ConversionReview larger than %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "malformed ConversionReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	if review.Request == nil {
		http.Error(w, "ConversionReview without a request", http.StatusBadRequest)
		return
	}

	resp := h.review(review.Request)
	if resp.Result.Status != metav1.StatusSuccess {
		h.Log.Info("Conversion refused", "uid", resp.UID, "desiredAPIVersion", review.Request.DesiredAPIVersion,
			"message", resp.Result.Message)
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "ConversionReview"}
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		h.Log.Error(err, "Writing the ConversionReview response", "uid", resp.UID)
	}
}

// review converts every object of req to req.DesiredAPIVersion, in the request's order, as
// the API server requires: one failure fails the review.
func (h *Handler) review(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	desired, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil || desired.Version == "" {
		resp.Result = failure(fmt.Sprintf("desiredAPIVersion %q is not group/version", req.DesiredAPIVersion))
		return resp
	}
	converted := make([]runtime.RawExtension, len(req.Objects))
	for i, raw := range req.Objects {
		out, err := h.convert(raw.Raw, desired)
		if err != nil {
			resp.Result = failure(fmt.Sprintf("object %d of %d: %v", i+1, len(req.Objects), err))
			return resp
		}
		converted[i] = runtime.RawExtension{Raw: out}
	}
	resp.ConvertedObjects = converted
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// convert returns the object raw converted to desired. An object it cannot read, or of a
// kind it does not serve, comes back with only its apiVersion changed: failing would fail
// every list that holds it. It fails where that would lose values: a version the kind's
// conversions.yaml does not list (the values would be stored in another version's places,
// and pruned from them), or an error of the conversion itself (values it must keep that
// the annotation cannot hold).
func (h *Handler) convert(raw []byte, desired schema.GroupVersion) ([]byte, error) {
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil || obj == nil {
		// Not an object: nothing to set an apiVersion in.
		return raw, nil
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	chain := h.Kinds[schema.GroupKind{Group: gv.Group, Kind: kind}]
	if err != nil || chain == nil || gv.Group != desired.Group || !wellFormedMetadata(obj) {
		obj["apiVersion"] = desired.String()
		return json.Marshal(obj)
	}
	versions := chain.Versions()
	for _, v := range []string{gv.Version, desired.Version} {
		if !slices.Contains(versions, v) {
			return nil, fmt.Errorf("%s %s: version %s is not in its chart's conversions.yaml (versions %s): the sidecar's charts do not match the CRD",
				kind, name(obj), v, strings.Join(versions, ", "))
		}
	}
	out, err := chain.ConvertMap(obj, desired.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s from %s to %s: %w", kind, name(obj), gv.Version, desired.Version, err)
	}
	return json.Marshal(out)
}

// wellFormedMetadata reports whether obj's metadata and annotations, where present, are
// objects, as the conversion needs to keep values in the annotation; the API server never
// sends others.
func wellFormedMetadata(obj map[string]any) bool {
	meta, ok := obj["metadata"]
	if !ok || meta == nil {
		return true
	}
	m, ok := meta.(map[string]any)
	if !ok {
		return false
	}
	a, ok := m["annotations"]
	if !ok || a == nil {
		return true
	}
	_, ok = a.(map[string]any)
	return ok
}

// name is obj's namespace/name for a message.
func name(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	if ns, _ := meta["namespace"].(string); ns != "" {
		return ns + "/" + n
	}
	return n
}

// failure is the result of a review that failed, with the message the API server returns
// to the client.
func failure(msg string) metav1.Status {
	return metav1.Status{Status: metav1.StatusFailure, Message: msg}
}
