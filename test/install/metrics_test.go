package install

import (
	"context"
	"crypto/tls"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/testenv"
)

// managerArgs is the manager container's args in a render.
func managerArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" || !strings.HasSuffix(obj.GetName(), "-manager") {
			continue
		}
		for _, c := range podTemplate(t, obj).Containers {
			if c.Name == "manager" {
				return c.Args
			}
		}
	}
	t.Fatal("the render has no manager Deployment")
	return nil
}

// TestShippedMetricsNeedAuthorization runs the manager with the args of the rendered
// kustomize Deployment (the addresses moved to free loopback ports, nothing else changed)
// and scrapes /metrics: anonymous → 401, a ServiceAccount not bound to
// trustplane-metrics-reader → 403, one bound to it → 200. The chart ships the same flags.
func TestShippedMetricsNeedAuthorization(t *testing.T) {
	root := testenv.RepoRoot()
	rendered := testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "k8s/kubectl"), "kustomize", filepath.Join(root, "config/default")))
	args := managerArgs(t, rendered)
	helmArgs := managerArgs(t, testenv.DecodeYAML(t, run(t, root, testenv.Tool(t, "helm"), "template", "trustplane", filepath.Join(root, "charts/trustplane"), "--namespace", "trustplane-system")))
	for name, a := range map[string][]string{"kustomize": args, "helm": helmArgs} {
		if !slices.Contains(a, "--metrics-secure") {
			t.Errorf("%s: the manager serves /metrics without --metrics-secure: %q", name, a)
		}
	}
	ctx := context.Background()
	for _, obj := range rendered {
		if obj.GetKind() == "ClusterRole" && obj.GetName() == "trustplane-metrics-reader" {
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("install-test"), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
		}
	}
	ns := env.Namespace(t, "scrape")
	token := func(name string, reader bool) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		if reader {
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "trustplane-metrics-reader"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}}
			if err := env.Client.Create(ctx, binding); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = env.Client.Delete(ctx, binding) })
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
		if err := env.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("scraper", true), token("stranger", false)

	metrics, probes := testenv.FreeAddr(t), testenv.FreeAddr(t)
	// Only one controller: the serving of /metrics does not depend on which run.
	proc := testenv.StartProcess(t, testenv.Binary(t), append(args,
		"--kubeconfig="+env.AdminKubeconfig(t), "--leader-elect=false", "--controllers=role-aggregation",
		"--metrics-bind-address="+metrics, "--health-probe-bind-address="+probes, "--jwks-server-bind-address=0")...)
	proc.WaitHTTP200(t, "http://"+probes+"/readyz", 60*time.Second)

	// The server's certificate is self-signed: what is checked is who may read, not it.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(token string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+metrics+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("scraping %s: %v\n%s", metrics, err, proc.Output())
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// The metrics server comes up beside the probes, not before them: wait until it answers.
	testenv.Eventually(t, "the metrics server to listen", 30*time.Second, func() bool {
		conn, err := tls.Dial("tcp", metrics, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})
	for _, tc := range []struct {
		who   string
		token string
		want  int
	}{{"anonymous", "", http.StatusUnauthorized}, {"not a metrics reader", stranger, http.StatusForbidden}, {"a metrics reader", scraper, http.StatusOK}} {
		if got := scrape(tc.token); got != tc.want {
			t.Errorf("%s: /metrics answered %d, want %d", tc.who, got, tc.want)
		}
	}
}
