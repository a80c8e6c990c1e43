package security

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("serve her keys under another tenant's issuer", takeOverIssuer)
	register("make trustplane run pods in her namespace beyond the operator's limits", oversizedNginx)
}

// jwksConfigIn creates a JWKSConfig (without nginx) publishing a fresh key of the
// namespace's own, as c's user.
func jwksConfigIn(t *testing.T, c client.Client, namespace, name, issuer string, mutate ...func(*jwksv1alpha1.JWKSConfig)) {
	t.Helper()
	tlsSecretIn(t, c, namespace, name+"-tls")
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: name + "-tls", Issuer: issuer, Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	for _, m := range mutate {
		m(cfg)
	}
	mustCreate(t, c, cfg)
}

// readyReason waits for the JWKSConfig's Ready reason and returns it with its kid.
func readyReason(t *testing.T, c client.Client, namespace, name, reason string) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	got := &jwksv1alpha1.JWKSConfig{}
	testenv.Eventually(t, namespace+"/"+name+" to be "+reason, 30*time.Second, func() bool {
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, got); err != nil {
			return false
		}
		r := meta.FindStatusCondition(got.Status.Conditions, "Ready")
		return r != nil && r.Reason == reason
	})
	return got
}

// fetchSet asks the shipped manager's JWKS server for path, as a client sending the
// given headers ("Host" sets the host).
func fetchSet(t *testing.T, path string, header ...string) (string, http.Header) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+shipped.jwksServer+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", resp.Header
	}
	return string(body), resp.Header
}

// takeOverIssuer: bob serves https://idp.<x>/bob. alice's JWKSConfig with the same issuer
// stalls with IssuerInUse and is never served, also after bob's is deleted and made
// again (when hers is the older); her issuer on another host with the same path is not
// reached by a client's X-Forwarded-Host, and her cacheMaxAge of 99999h is refused.
func takeOverIssuer(t *testing.T, alice *tenant) {
	host := "idp-" + alice.namespace + ".example"
	bobsIssuer := "https://" + host + "/bob"
	jwksConfigIn(t, env.Client, bobNamespace, "idp", bobsIssuer)
	bobKid := readyReason(t, env.Client, bobNamespace, "idp", jwksv1alpha1.ReasonPublished).Status.LastKeyID

	jwksConfigIn(t, alice.client, alice.namespace, "same", bobsIssuer+"/")
	readyReason(t, alice.client, alice.namespace, "same", jwksv1alpha1.ReasonIssuerInUse)
	jwksConfigIn(t, alice.client, alice.namespace, "forever", "https://attacker.example/bob", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.CacheMaxAge = ptr.To(jwksv1alpha1.Duration("99999h"))
	})
	readyReason(t, alice.client, alice.namespace, "forever", jwksv1alpha1.ReasonOverLimit)
	jwksConfigIn(t, alice.client, alice.namespace, "beside", "https://attacker.example/bob")
	aliceKid := readyReason(t, alice.client, alice.namespace, "beside", jwksv1alpha1.ReasonPublished).Status.LastKeyID

	onlyBobs := func(when string) {
		t.Helper()
		var set string
		var header http.Header
		testenv.Eventually(t, "bob's set on his issuer "+when, 30*time.Second, func() bool {
			set, header = fetchSet(t, "/bob/jwks.json", "Host", host, "X-Forwarded-Host", "attacker.example")
			return strings.Contains(set, bobKid)
		})
		if strings.Contains(set, aliceKid) || header.Get("Vary") == "" {
			t.Errorf("%s: alice's key served, or no Vary (%q)", when, header.Get("Vary"))
		}
		if set, _ := fetchSet(t, "/"+alice.namespace+"/same/jwks.json"); set != "" {
			t.Errorf("%s: alice's JWKSConfig naming bob's issuer is served on its own route", when)
		}
	}
	onlyBobs("before")

	bobs := &jwksv1alpha1.JWKSConfig{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: bobNamespace, Name: "idp"}, bobs); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, bobs); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "bob's JWKSConfig to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(bobs), &jwksv1alpha1.JWKSConfig{}))
	})
	bobs = &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: bobNamespace, Name: "idp"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "idp-tls", Issuer: bobsIssuer, Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	mustCreate(t, env.Client, bobs)
	readyReason(t, env.Client, bobNamespace, "idp", jwksv1alpha1.ReasonPublished)
	readyReason(t, alice.client, alice.namespace, "same", jwksv1alpha1.ReasonIssuerInUse)
	onlyBobs("after bob's JWKSConfig was made again")
}

// oversizedNginx: 5,000 nginx replicas are refused at admission; 20 with 64 CPUs each
// stall with OverLimit, and no Deployment is made in her namespace.
func oversizedNginx(t *testing.T, alice *tenant) {
	tlsSecretIn(t, alice.client, alice.namespace, "farm-tls")
	huge := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "farm"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "farm-tls", Nginx: jwksv1alpha1.NginxSpec{Replicas: ptr.To(int32(5000))}}}
	if err := alice.client.Create(ctx, huge); err == nil || !strings.Contains(err.Error(), "spec.nginx.replicas") {
		t.Fatalf("5000 replicas: %v, want refused naming spec.nginx.replicas", err)
	}
	huge.Spec.Nginx.Replicas = ptr.To(int32(20))
	huge.Spec.Nginx.Resources.Requests = map[corev1.ResourceName]jwksv1alpha1.Quantity{"cpu": "64", "memory": "512Gi"}
	mustCreate(t, alice.client, huge)
	got := readyReason(t, alice.client, alice.namespace, "farm", jwksv1alpha1.ReasonOverLimit)
	msg := meta.FindStatusCondition(got.Status.Conditions, "Ready").Message
	for _, field := range []string{"spec.nginx.replicas", "--jwks-nginx-max-replicas", "spec.nginx.resources.requests[cpu]", "--jwks-nginx-max-resources"} {
		if !strings.Contains(msg, field) {
			t.Errorf("message %q does not name %s", msg, field)
		}
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: "farm"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment was made in her namespace: %v", err)
	}
}
