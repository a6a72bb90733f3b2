package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// The apiserver's answers, as this test decides them: the token "reader" is the user reader,
// who may get /metrics; "stranger" is a user who may not; "down" makes the review fail.
type tokenReviews struct {
	authenticationclient.TokenReviewInterface
	calls int
}

func (t *tokenReviews) Create(_ context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	t.calls++
	switch tr.Spec.Token {
	case "down":
		return nil, errors.New("connection refused")
	case "reader", "stranger":
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
			User: authenticationv1.UserInfo{Username: tr.Spec.Token, Groups: []string{"system:authenticated"}}}
	}
	return tr, nil
}

type accessReviews struct {
	authorizationclient.SubjectAccessReviewInterface
	asked []authorizationv1.SubjectAccessReviewSpec
}

func (a *accessReviews) Create(_ context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	a.asked = append(a.asked, sar.Spec)
	na := sar.Spec.NonResourceAttributes
	sar.Status.Allowed = sar.Spec.User == "reader" && na != nil && na.Path == "/metrics" && na.Verb == "get"
	return sar, nil
}

func TestDecide(t *testing.T) {
	tokens, access := &tokenReviews{}, &accessReviews{}
	clock := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	g := &gate{tokens: tokens, access: access, decisions: map[decisionKey]decision{}, now: func() time.Time { return clock }}
	header := func(method, path, authorization string) int {
		r := httptest.NewRequest(method, path, nil)
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		code, _ := g.decide(r)
		return code
	}
	request := func(method, path, token string) int { return header(method, path, "Bearer "+token) }
	step := func(name string, got, want, wantTokenReviews int) {
		t.Helper()
		if got != want || tokens.calls != wantTokenReviews {
			t.Errorf("%s: %d after %d token reviews, want %d after %d", name, got, tokens.calls, want, wantTokenReviews)
		}
	}

	step("no Authorization header", header("GET", "/metrics", ""), http.StatusUnauthorized, 0)
	step("no token", request("GET", "/metrics", ""), http.StatusUnauthorized, 0)
	step("another scheme", header("GET", "/metrics", "Basic cmVhZGVyOg=="), http.StatusUnauthorized, 0)
	step("a token the apiserver does not know", request("GET", "/metrics", "forged"), http.StatusUnauthorized, 1)
	step("the reader", request("GET", "/metrics", "reader"), http.StatusOK, 2)
	if len(access.asked) != 1 || access.asked[0].User != "reader" || access.asked[0].NonResourceAttributes.Verb != "get" {
		t.Errorf("access reviews asked: %+v, want one for reader, get /metrics", access.asked)
	}
	step("the reader again, the scheme in lower case", header("GET", "/metrics", "bearer reader"), http.StatusOK, 2)
	step("the reader, another verb", request("POST", "/metrics", "reader"), http.StatusForbidden, 3)
	step("the reader, another path", request("GET", "/debug/pprof/heap", "reader"), http.StatusForbidden, 4)
	step("a user without the role", request("GET", "/metrics", "stranger"), http.StatusForbidden, 5)
	step("the apiserver unreachable", request("GET", "/metrics", "down"), http.StatusInternalServerError, 6)
	step("the apiserver unreachable, again: not remembered", request("GET", "/metrics", "down"), http.StatusInternalServerError, 7)

	clock = clock.Add(deniedFor + time.Second)
	step("a denial is asked again after deniedFor", request("GET", "/metrics", "stranger"), http.StatusForbidden, 8)
	step("an allowance is kept for allowedFor", request("GET", "/metrics", "reader"), http.StatusOK, 8)
	clock = clock.Add(allowedFor)
	step("and asked again after it", request("GET", "/metrics", "reader"), http.StatusOK, 9)
}
