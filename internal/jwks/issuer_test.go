package jwks

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

func withIssuer(issuer string) func(*jwksv1alpha1.JWKSConfig) {
	return func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.Issuer = issuer
		c.Spec.Nginx.Enabled = ptrTo(false)
	}
}

// waitReason waits for Ready's reason, whatever the generation bookkeeping (a waiting
// JWKSConfig does not move observedGeneration).
func waitReason(t *testing.T, ns, name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	testenv.Eventually(t, ns+"/"+name+" Ready="+string(status)+" "+reason, 30*time.Second, func() bool {
		c = readyCondition(getConfig(t, ns, name))
		return c != nil && c.Status == status && c.Reason == reason
	})
	return c
}

// servedKid asks the server for the issuer's set by host and path and says whether kid
// is in the answer.
func servedKid(t *testing.T, mgr *runningManager, host, path, kid string) bool {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+mgr.serverAddr+path+"/jwks.json", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = io.Copy(&body, resp.Body)
	return resp.StatusCode == 200 && strings.Contains(body.String(), kid)
}

// TestAnIssuerIsServedByOneJWKSConfig: bob's JWKSConfig serves an issuer; alice's, naming
// the same issuer (another case, the default port, a trailing slash), stalls with
// IssuerInUse and publishes nothing. When bob's is deleted and recreated, the issuer
// stays with bob's namespace although alice's JWKSConfig is now the older one.
func TestAnIssuerIsServedByOneJWKSConfig(t *testing.T) {
	mgr := startManager(t)
	bob, alice := newNamespace(t), newNamespace(t)
	host := strings.TrimPrefix(bob, "jwks-") + ".idp.example" // unique, without bob's namespace
	bobChain, aliceChain := newChain(t, testcerts.P256), newChain(t, testcerts.P256)
	putSecret(t, bob, "tls", tlsData(bobChain))
	putSecret(t, alice, "tls", tlsData(aliceChain))
	bobKid, _ := expectedDoc(t, bobChain)
	aliceKid, _ := expectedDoc(t, aliceChain)

	newJWKSConfig(t, bob, "idp", "tls", withIssuer("https://"+host+"/bob"))
	waitReady(t, bob, "idp", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	newJWKSConfig(t, alice, "idp", "tls", withIssuer("https://"+strings.ToUpper(host)+":443/bob/"))
	c := waitReason(t, alice, "idp", metav1.ConditionFalse, jwksv1alpha1.ReasonIssuerInUse)
	if strings.Contains(c.Message, bob) {
		t.Errorf("the message names the other tenant's namespace: %s", c.Message)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: alice, Name: "idp-jwks"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("alice's set was published: %v", err)
	}
	if !servedKid(t, mgr, host, "/bob", bobKid) || servedKid(t, mgr, host, "/bob", aliceKid) {
		t.Fatal("the issuer does not answer with bob's set only")
	}

	// Bob's JWKSConfig is deleted and made again: alice's is older now, and still waits.
	if err := env.Client.Delete(context.Background(), getConfig(t, bob, "idp")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "bob's JWKSConfig to go", 30*time.Second, func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Namespace: bob, Name: "idp"}, &jwksv1alpha1.JWKSConfig{}))
	})
	waitReason(t, alice, "idp", metav1.ConditionFalse, jwksv1alpha1.ReasonIssuerInUse)
	newJWKSConfig(t, bob, "idp", "tls", withIssuer("https://"+host+"/bob"))
	waitReady(t, bob, "idp", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	testenv.Eventually(t, "bob's set to be served again", 30*time.Second, func() bool { return servedKid(t, mgr, host, "/bob", bobKid) })
	if servedKid(t, mgr, host, "/bob", aliceKid) || servedKid(t, mgr, "other.example", "/"+alice+"/idp", aliceKid) {
		t.Error("alice's set is served")
	}
	waitReason(t, alice, "idp", metav1.ConditionFalse, jwksv1alpha1.ReasonIssuerInUse)
}

// TestAReleasedIssuerGoesToAnotherNamespaceAfterTheHold: once bob's JWKSConfig is gone
// for longer than the hold time (--jwks-max-cache-max-age), alice's gets the issuer.
func TestAReleasedIssuerGoesToAnotherNamespaceAfterTheHold(t *testing.T) {
	mgr := startManager(t, func(o *Options) { o.MaxCacheMaxAge = 3 * time.Second })
	bob, alice := newNamespace(t), newNamespace(t)
	host := bob + ".idp.example"
	aliceChain := newChain(t, testcerts.P256)
	putSecret(t, bob, "tls", tlsData(newChain(t, testcerts.P256)))
	putSecret(t, alice, "tls", tlsData(aliceChain))
	aliceKid, _ := expectedDoc(t, aliceChain)
	newJWKSConfig(t, bob, "idp", "tls", withIssuer("https://"+host), func(c *jwksv1alpha1.JWKSConfig) { c.Spec.CacheMaxAge = jwksv1alpha1.DurationOf(time.Second) })
	waitReady(t, bob, "idp", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	newJWKSConfig(t, alice, "idp", "tls", withIssuer("https://"+host), func(c *jwksv1alpha1.JWKSConfig) { c.Spec.CacheMaxAge = jwksv1alpha1.DurationOf(time.Second) })
	waitReason(t, alice, "idp", metav1.ConditionFalse, jwksv1alpha1.ReasonIssuerInUse)
	if err := env.Client.Delete(context.Background(), getConfig(t, bob, "idp")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, alice, "idp", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	testenv.Eventually(t, "alice's set to be served under the issuer", 30*time.Second, func() bool { return servedKid(t, mgr, host, "", aliceKid) })
}

// TestOperatorBindsIssuersToNamespaces: an issuer under a bound prefix is served only from
// the bound namespace, whoever claims first.
func TestOperatorBindsIssuersToNamespaces(t *testing.T) {
	bob, alice := newNamespace(t), newNamespace(t)
	host := bob + ".bound.example"
	startManager(t, func(o *Options) { o.IssuerNamespaces = []string{host + "/teams/bob=" + bob} })
	putSecret(t, alice, "tls", tlsData(newChain(t, testcerts.P256)))
	putSecret(t, bob, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, alice, "first", "tls", withIssuer("https://"+host+"/teams/bob/api"))
	c := waitReason(t, alice, "first", metav1.ConditionFalse, jwksv1alpha1.ReasonIssuerNotAllowed)
	if !strings.Contains(c.Message, "--jwks-issuer-namespaces") {
		t.Errorf("message %q does not name the setting", c.Message)
	}
	newJWKSConfig(t, bob, "second", "tls", withIssuer("https://"+host+"/teams/bob/api"))
	waitReady(t, bob, "second", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
	// Not a prefix at a segment boundary: not bound.
	newJWKSConfig(t, alice, "beside", "tls", withIssuer("https://"+host+"/teams/bobby/api"))
	waitReady(t, alice, "beside", metav1.ConditionTrue, jwksv1alpha1.ReasonPublished)
}

// TestLimitsOfTheOperator: cacheMaxAge, nginx replicas and resources over the operator's
// limits stall with OverLimit naming each field, and nothing is published.
func TestLimitsOfTheOperator(t *testing.T) {
	startManager(t)
	ns := newNamespace(t)
	putSecret(t, ns, "tls", tlsData(newChain(t, testcerts.P256)))
	newJWKSConfig(t, ns, "big", "tls", func(c *jwksv1alpha1.JWKSConfig) {
		c.Spec.CacheMaxAge = ptrTo(jwksv1alpha1.Duration("99999h"))
		c.Spec.Nginx.Replicas = ptrTo(int32(20))
		c.Spec.Nginx.Resources.Requests = map[corev1.ResourceName]jwksv1alpha1.Quantity{"cpu": "64", "memory": "512Gi"}
	})
	c := readyCondition(waitReady(t, ns, "big", metav1.ConditionFalse, jwksv1alpha1.ReasonOverLimit))
	for _, field := range []string{"spec.cacheMaxAge", "spec.nginx.replicas", "spec.nginx.resources.requests[cpu]", "spec.nginx.resources.requests[memory]"} {
		if !strings.Contains(c.Message, field) {
			t.Errorf("message %q does not name %s", c.Message, field)
		}
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "big"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment was made: %v", err)
	}
}
