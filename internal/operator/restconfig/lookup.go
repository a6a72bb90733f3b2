package restconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"

	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// Lookup is the RESTClientGetter of a release's action configuration, as
// helm-operator-plugins made it, but for the REST config it hands out, which reads only what
// the release's templates may read (lookupTransport).
//
// That REST config is what Helm's `lookup` reads the cluster with: every render that talks to
// the cluster (install, upgrade, and the server-side dry-run upgrade the reconciler makes to
// decide whether to upgrade) builds its template engine from
// Configuration.RESTClientGetter.ToRESTConfig (pkg/action renderResources, engine.New), and
// `tpl` runs with the same functions. Nothing else Helm does with the operator goes through it:
// objects are built and applied by Configuration.KubeClient (trustedconfig's confinedKube), which was made from
// the unconfined getter; .Capabilities come from ToDiscoveryClient, passed on as it is. The only
// other user in Helm 3.21 is Upgrade's Recreate (deleting pods), which the operator never sets
// and which this config would refuse.
type Lookup struct {
	action.RESTClientGetter
	Namespace, Release string
	Owner              types.UID          // the CR's: the controller of every object of its release's namespace
	ClusterKinds       []schema.GroupKind // the cluster-scoped kinds the chart declares (KindPolicy)
}

func (g Lookup) ToRESTConfig() (*rest.Config, error) {
	return wrappedRESTConfig(g.RESTClientGetter, func(next http.RoundTripper) http.RoundTripper {
		return &lookupTransport{next: next, namespace: g.Namespace, release: g.Release, owner: g.Owner,
			clusterKinds: g.ClusterKinds, kinds: g.RESTClientGetter}
	})
}

// wrappedRESTConfig is a copy of getter's REST config whose transport is wrapped by wrap:
// the getter's own config, shared by every release, is left as it is.
func wrappedRESTConfig(getter interface{ ToRESTConfig() (*rest.Config, error) },
	wrap func(http.RoundTripper) http.RoundTripper) (*rest.Config, error) {
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(wrap)
	return cfg, nil
}

// lookupTransport lets through what Helm's `lookup` needs to read what a release's templates
// may read, and nothing else: a template runs with the operator's rights, and a namespace
// editor writes what `tpl` evaluates. Helm's lookup makes a discovery request (its kind's
// resource) and then a GET of one object or a LIST of a collection, in a namespace or not.
//
//   - Discovery (GET /api..., /apis...) passes.
//   - A GET or LIST of a namespaced resource in the release's namespace passes, but of Secrets
//     only those the release made and those labelled valuesfrom.ReadableLabel "true" are
//     kept: whoever may only edit the CR cannot send another Secret of the namespace into a
//     rendered object (the rule of spec.valuesFrom; labelling a Secret takes the right to
//     update it). The release made a Secret when the CR is its controller, as
//     helm-operator-plugins' post-renderer makes it of every namespaced object it renders:
//     proof by the CR's UID, which no other release's object carries. Helm's ownership
//     annotations are no proof, for they name the release by the CR's name, which its author
//     chose: a CR named like a release the helm CLI installed would read that release's
//     Secrets.
//   - A GET of a cluster-scoped object of a kind the chart declares passes, and the object is
//     kept only if the release owns it (the same annotations): a chart may keep the name of a
//     cluster-scoped object its release made (the pool chart keeps its StorageClass's name),
//     and learns nothing of anyone else's. A GET of any other cluster-scoped kind never
//     reaches the API server: a tenant's `tpl` value could otherwise make the operator GET any
//     cluster-scoped object by name, as often as a render calls lookup.
//   - Anything else read is absent, as the API server answers for an object that does not
//     exist: a GET is 404 Not Found (lookup returns an empty map), a LIST an empty list. That
//     covers other namespaces, all namespaces at once, subresources, every cluster-scoped
//     object of a kind the chart does not declare or that the release does not own, every
//     LIST of them (which would show other tenants' objects of the kind), and the release's
//     Namespace (a path under /namespaces/<ns>, hence named apart).
//   - Every other request (a write, a watch, any other path) is refused: 403 Forbidden.
//
// Requests are parsed by the API server's own parser (RequestInfoFactory), so that the
// namespace, resource and verb decided on here are those the server would authorize.
type lookupTransport struct {
	next               http.RoundTripper
	namespace, release string
	owner              types.UID          // the CR's UID: see madeByRelease
	clusterKinds       []schema.GroupKind // the only cluster-scoped kinds a GET reads
	kinds              interface {
		ToRESTMapper() (meta.RESTMapper, error)
	} // names the kind of an empty list, and the resources of clusterKinds
}

// requestInfos parses request paths as the API server does with its default API prefixes.
var requestInfos = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

func (t *lookupTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	info, err := requestInfos.NewRequestInfo(req)
	if err != nil {
		return refused(req, err.Error())
	}
	if !info.IsResourceRequest {
		if req.Method == http.MethodGet && isDiscovery(info.Path) {
			return t.next.RoundTrip(req)
		}
		return refused(req, fmt.Sprintf("%s %s is not a read a template may make", req.Method, info.Path))
	}
	if req.Method != http.MethodGet || (info.Verb != "get" && info.Verb != "list") {
		return refused(req, fmt.Sprintf("%s of %s is not a read a template may make", info.Verb, info.Resource))
	}
	core := info.APIGroup == ""
	if info.Namespace == "" && info.Verb == "get" && info.Subresource == "" && !(core && info.Resource == "namespaces") {
		declared, err := t.declared(info)
		if err != nil {
			return nil, err
		}
		if !declared {
			return t.absent(req, info)
		}
		return t.kept(req, info, t.owned)
	}
	if info.Namespace != t.namespace || info.Subresource != "" || (core && info.Resource == "namespaces") {
		return t.absent(req, info)
	}
	if core && info.Resource == "secrets" {
		return t.kept(req, info, t.readable)
	}
	return t.next.RoundTrip(req)
}

// declared reports whether the cluster-scoped resource info asks for is of a kind the chart
// declares. Only the declared kinds are mapped, at the version asked for, so that a lookup of
// any other kind asks nothing of the REST mapper either, which may ask the API server about a
// group or version it has not seen.
func (t *lookupTransport) declared(info *apirequest.RequestInfo) (bool, error) {
	for _, gk := range t.clusterKinds {
		if gk.Group != info.APIGroup {
			continue
		}
		mapper, err := t.kinds.ToRESTMapper()
		if err != nil {
			return false, err
		}
		m, err := mapper.RESTMapping(gk, info.APIVersion)
		if meta.IsNoMatchError(err) {
			continue // not served at that version: nothing of it to read
		}
		if err != nil {
			return false, err
		}
		if m.Resource.Resource == info.Resource && m.Scope.Name() == meta.RESTScopeNameRoot {
			return true, nil
		}
	}
	return false, nil
}

// isDiscovery reports whether a non-resource path is the API server's discovery or version.
func isDiscovery(path string) bool {
	return path == "/api" || path == "/apis" || path == "/version" ||
		strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/apis/")
}

// absent answers a read of something the templates may not see as the API server answers
// for what does not exist.
func (t *lookupTransport) absent(req *http.Request, info *apirequest.RequestInfo) (*http.Response, error) {
	gr := schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
	if info.Verb == "get" {
		return statusResponse(req, apierrors.NewNotFound(gr, info.Name))
	}
	// An empty list needs its kind, which only the REST mapper knows; a resource it does not
	// know does not exist.
	mapper, err := t.kinds.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	gvk, err := mapper.KindFor(gr.WithVersion(info.APIVersion))
	if err != nil {
		return statusResponse(req, apierrors.NewNotFound(gr, ""))
	}
	list := map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind + "List",
		"metadata": map[string]any{}, "items": []any{}}
	body, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	return response(req, http.StatusOK, body), nil
}

// kept reads what req asks for and keeps the objects the templates may read (keep): one
// object, or a list's items. The request asks for JSON, whatever its caller asked for, so
// that the answer is one the filter understands (a Table or protobuf would otherwise pass
// unread). A GET the API server does not answer with the object (the operator may not read
// the kind) reads as absent, like an object that is not kept.
func (t *lookupTransport) kept(req *http.Request, info *apirequest.RequestInfo, keep func(metav1.Object) bool) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Accept", "application/json")
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode != http.StatusOK {
		if info.Verb == "get" {
			resp.Body.Close()
			return t.absent(req, info)
		}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if info.Verb == "get" {
		var obj metav1.PartialObjectMetadata
		if err := json.Unmarshal(body, &obj); err != nil {
			return nil, fmt.Errorf("reading %s %s for a template: %w", info.Resource, info.Name, err)
		}
		if !keep(&obj) {
			return t.absent(req, info)
		}
		return response(req, http.StatusOK, body), nil
	}
	var list unstructured.UnstructuredList
	if err := list.UnmarshalJSON(body); err != nil {
		return nil, fmt.Errorf("reading the %s of %s for a template: %w", info.Resource, info.Namespace, err)
	}
	kept := list.Items[:0]
	for _, s := range list.Items {
		if keep(&s) {
			kept = append(kept, s)
		}
	}
	list.Items = kept
	if body, err = list.MarshalJSON(); err != nil {
		return nil, err
	}
	return response(req, http.StatusOK, body), nil
}

// owned reports whether the release owns obj: Helm's ownership annotations name it.
func (t *lookupTransport) owned(obj metav1.Object) bool {
	a := obj.GetAnnotations()
	return a[ownership.HelmReleaseNameAnnotation] == t.release && a[ownership.HelmReleaseNamespaceAnnotation] == t.namespace
}

// madeByRelease reports whether the release's templates made obj, an object of its
// namespace: the CR is its controller. The release's records (Helm's storage labels them
// owner=helm) have the CR as their controller too, but hold the whole release, the values
// read from spec.valuesFrom's Secrets among them: never a template's to read.
func (t *lookupTransport) madeByRelease(obj metav1.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return t.owner != "" && ref != nil && ref.UID == t.owner && obj.GetLabels()["owner"] != "helm"
}

// readable reports whether the release's templates may read the Secret s of its namespace.
func (t *lookupTransport) readable(s metav1.Object) bool {
	return t.madeByRelease(s) || valuesfrom.Readable(s)
}

// refused answers 403 Forbidden, saying why.
func refused(req *http.Request, why string) (*http.Response, error) {
	return statusResponse(req, apierrors.NewForbidden(schema.GroupResource{}, "",
		fmt.Errorf("a template may only read objects of its release's namespace: %s", why)))
}

// statusResponse is the API server's answer for err: its Status, as JSON.
func statusResponse(req *http.Request, err *apierrors.StatusError) (*http.Response, error) {
	status := err.Status()
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, mErr := json.Marshal(status)
	if mErr != nil {
		return nil, mErr
	}
	return response(req, int(status.Code), body), nil
}

func response(req *http.Request, code int, body []byte) *http.Response {
	return &http.Response{
		Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {strconv.Itoa(len(body))}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
