package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestMetricsNeedAuthorization: both containers serve their metrics over HTTPS to scrapers
// whose token the apiserver authenticates and who may GET /metrics, as the
// metrics-reader ClusterRole of config/rbac allows; anyone else is turned away.
func TestMetricsNeedAuthorization(t *testing.T) {
	ns := env.Namespace(t)
	sidecarAddr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// A standby: it serves metrics but writes nothing while the suite's sidecar leads.
	standby, err := startSidecar("sidecar-secure-metrics", sidecarAddr, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Stop)

	reader := scraperToken(t, ns, "reader", true)
	stranger := scraperToken(t, ns, "stranger", false)
	for _, ep := range []struct{ name, addr, metric string }{
		{"manager", managerMetricsAddr, "controller_runtime_reconcile_total"},
		{"sidecar", sidecarAddr, "leader_election_master_status"},
	} {
		t.Run(ep.name, func(t *testing.T) {
			var body string
			framework.Eventually(t, converge, func(context.Context) error {
				code, b, err := scrape(ep.addr, reader)
				if err != nil {
					return err
				}
				if code != http.StatusOK {
					return fmt.Errorf("GET /metrics with the reader's token: %d %s", code, b)
				}
				body = b
				return nil
			})
			if !strings.Contains(body, ep.metric) {
				t.Errorf("metrics of the %s lack %s", ep.name, ep.metric)
			}
			for _, c := range []struct {
				who   string
				token string
				want  []int
			}{
				{"no token", "", []int{http.StatusUnauthorized}},
				// The TokenReview reports an error for it, which controller-runtime's filter
				// answers with 500 rather than 401: refused either way.
				{"a token the apiserver does not know", "not-a-token", []int{http.StatusUnauthorized, http.StatusInternalServerError}},
				{"a token without the metrics-reader role", stranger, []int{http.StatusForbidden}},
			} {
				code, b, err := scrape(ep.addr, c.token)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(c.want, code) || strings.Contains(b, ep.metric) {
					t.Errorf("GET /metrics with %s: %d, want one of %v and no metrics", c.who, code, c.want)
				}
			}
		})
	}
}

// scraperToken creates a ServiceAccount in ns, bound to a copy of config/rbac's
// metrics-reader ClusterRole when reader is set, and returns a token of it.
func scraperToken(t testing.TB, ns, name string, reader bool) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	env.Create(t, sa)
	if reader {
		data, err := os.ReadFile(filepath.Join(env.Root, "config", "rbac", "metrics_reader_role.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict(data, role); err != nil {
			t.Fatal(err)
		}
		role.ObjectMeta = metav1.ObjectMeta{Name: ns + "-metrics-reader"}
		env.Create(t, role)
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		env.Create(t, binding)
		t.Cleanup(func() {
			_ = env.Client.Delete(context.Background(), binding)
			_ = env.Client.Delete(context.Background(), role)
		})
	}
	tr, err := env.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// scrape GETs https://addr/metrics with token as bearer token ("": none). The certificate is
// the binary's self-signed one, so it is not verified.
func scrape(addr, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
