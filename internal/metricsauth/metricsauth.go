// Package metricsauth lets a request to the metrics endpoint through only when the apiserver
// authenticates its bearer token (a TokenReview) and authorizes that user for the request's
// path and verb (a SubjectAccessReview), as a client of the apiserver would be: the
// metrics-reader ClusterRole of config/rbac grants GET /metrics.
//
// controller-runtime's filters.WithAuthenticationAndAuthorization does the same through
// k8s.io/apiserver's delegating authenticator and authorizer, which link the apiserver's
// authentication and authorization configuration (CEL, OpenTelemetry): 9.5 MiB of code and
// tables in the binary (measured with size(1): text, rodata and pclntab 68.8 -> 59.3 MiB).
// On this kernel a binary's text is mapped in large folios and resident in full, in both
// containers of the pod, so that code costs memory whether it runs or not
// (docs/bench/findings.md, "The metrics filter without k8s.io/apiserver"). What is done here
// needs two typed clients.
package metricsauth

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long a decision is reused. A scraper comes back every 15-60 s with the same token, and
// each decision costs two requests to the apiserver; a denial is kept shorter, so that a
// role just granted takes effect soon. A revoked token or role still gets through for up to
// allowedFor, as with the apiserver's own webhook caches.
const (
	allowedFor = time.Minute
	deniedFor  = 10 * time.Second
	// maxDecisions bounds the cache against a client that sends a new token with every
	// request: when full, it is emptied.
	maxDecisions = 1024
)

// Filter is a metricsserver.FilterProvider: set it as metricsserver.Options.FilterProvider.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	g := &gate{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(),
		decisions: map[decisionKey]decision{}, now: time.Now}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, msg := g.decide(r)
			if code != http.StatusOK {
				if code == http.StatusInternalServerError {
					log.Error(nil, "metrics request not authorized", "reason", msg)
				}
				http.Error(w, msg, code)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// gate decides requests and remembers its decisions for a while.
type gate struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	now    func() time.Time

	mu        sync.Mutex
	decisions map[decisionKey]decision
}

// decisionKey is a request as far as its decision goes. The token is kept as its hash only.
type decisionKey struct {
	token      [sha256.Size]byte
	path, verb string
}

type decision struct {
	code    int
	msg     string
	expires time.Time
}

// decide returns the HTTP status for r: 200 to let it through, 401 without a token the
// apiserver authenticates, 403 when that user may not do it, 500 when the apiserver could not
// be asked (not remembered).
func (g *gate) decide(r *http.Request) (int, string) {
	// "Bearer <token>", the scheme in any case, as the apiserver reads it.
	scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return http.StatusUnauthorized, "Unauthorized: a bearer token is required"
	}
	// The apiserver's verb for a non-resource request is the lowercase method.
	key := decisionKey{token: sha256.Sum256([]byte(token)), path: r.URL.Path, verb: strings.ToLower(r.Method)}
	now := g.now()
	g.mu.Lock()
	d, ok := g.decisions[key]
	g.mu.Unlock()
	if ok && now.Before(d.expires) {
		return d.code, d.msg
	}
	d = g.review(r, token, key)
	if d.code == http.StatusInternalServerError {
		return d.code, d.msg
	}
	d.expires = now.Add(deniedFor)
	if d.code == http.StatusOK {
		d.expires = now.Add(allowedFor)
	}
	g.mu.Lock()
	if len(g.decisions) >= maxDecisions {
		clear(g.decisions)
	}
	g.decisions[key] = d
	g.mu.Unlock()
	return d.code, d.msg
}

// review asks the apiserver who the token is and whether that user may make the request.
func (g *gate) review(r *http.Request, token string, key decisionKey) decision {
	tr, err := g.tokens.Create(r.Context(), &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return decision{code: http.StatusInternalServerError, msg: "authenticating the token: " + err.Error()}
	}
	if !tr.Status.Authenticated {
		return decision{code: http.StatusUnauthorized, msg: "Unauthorized"}
	}
	user := tr.Status.User
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := g.access.Create(r.Context(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: key.path, Verb: key.verb},
		}}, metav1.CreateOptions{})
	if err != nil {
		return decision{code: http.StatusInternalServerError, msg: "authorizing the request: " + err.Error()}
	}
	if !sar.Status.Allowed {
		return decision{code: http.StatusForbidden,
			msg: "Forbidden: user " + user.Username + " may not " + key.verb + " " + key.path}
	}
	return decision{code: http.StatusOK}
}
