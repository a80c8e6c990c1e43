package oidc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestPromotionOnProof: kube-apiserver v1.37.1 says which set it fetched for an issuer
// (its JWKS fetch metrics). A JWKSConfig whose spec.promotion names it has a rotated key
// promoted as soon as kube-apiserver holds it, before the timer, and a signer signing a
// token every 250 ms with the signing Secret's key has none refused. With its metrics
// unreadable (a token that may not get /metrics), the key waits for its timer, and the
// RelyingParties condition and a Warning event name the relying party and why.
func TestPromotionOnProof(t *testing.T) {
	ns := env.Namespace(t, "proof")
	proxyTLS := testenv.NewProxyTLS(t)
	proxy, server := testenv.FreeAddr(t), testenv.FreeAddr(t)
	maxAge, margin, scrapeInterval := proofTimes(t)
	startManagerAt(t, server, fmt.Sprintf("--jwks-promotion-margin=%v", margin), "--jwks-relying-party-hosts=127.0.0.1",
		fmt.Sprintf("--jwks-relying-party-scrape-interval=%v", scrapeInterval))
	issuers := map[string]string{"proof": "https://" + proxy + "/proof", "timer": "https://" + proxy + "/timer"}
	testenv.StartNginx(t, proxyTLS.Conf+testenv.PathPreservingProxy(proxy, server))
	relyingParty := startKubeAPIServer(t, proxyTLS.CAPEM, issuers["proof"], issuers["timer"])
	reader, stranger := metricsTokens(t, relyingParty)
	metricsURL := strings.TrimSuffix(relyingParty.Host, "/") + "/metrics"
	for name, token := range map[string]string{"apiserver-metrics": reader, "apiserver-stranger": stranger} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Data: map[string][]byte{"token": []byte(token), "ca.crt": relyingParty.CAData}}
		if err := env.Client.Create(context.Background(), secret); err != nil {
			t.Fatal(err)
		}
	}
	for name, credentials := range map[string]string{"proof": "apiserver-metrics", "timer": "apiserver-stranger"} {
		first := newSigningKey(t, ns, name+"-tls")
		cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: name + "-tls", SigningSecret: name + "-signing", Issuer: issuers[name],
				CacheMaxAge: jwksv1alpha1.DurationOf(maxAge), Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)},
				Promotion: &jwksv1alpha1.PromotionSpec{RelyingParties: []jwksv1alpha1.RelyingParty{{
					Name: "apiserver", MetricsURL: metricsURL, CredentialsSecretName: credentials, Audience: audience,
				}}}}}
		if err := env.Client.Create(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		waitServed(t, server, ns, name, first.kid)
		testenv.Eventually(t, "the first key in the signing Secret", 30*time.Second, func() bool { return currentKid(t, ns, name+"-signing") == first.kid })
	}

	t.Run("kube-apiserver's word promotes before the timer", func(t *testing.T) {
		s := startSigner(t, relyingParty, issuers["proof"], ns, "proof-signing")
		refreshKeySet(t, relyingParty, issuers["proof"])
		rotated := time.Now()
		rotate(t, ns, "proof-tls")
		timer, promoted := awaitPromotion(t, ns, "proof")
		sent, refused, window := s.stop()
		// The status is written after the signing Secret (awaitPromotion saw that one).
		var cfg *jwksv1alpha1.JWKSConfig
		var c *metav1.Condition
		deadline := time.Now().Add(10 * time.Second)
		for c == nil || c.Reason != jwksv1alpha1.ReasonRelyingPartiesHoldKey {
			if time.Now().After(deadline) {
				t.Fatalf("after 10s the RelyingParties condition is %+v, want %s; status %+v", c, jwksv1alpha1.ReasonRelyingPartiesHoldKey, cfg.Status)
			}
			time.Sleep(20 * time.Millisecond)
			cfg = getJWKSConfig(t, ns, "proof")
			c = meta.FindStatusCondition(cfg.Status.Conditions, jwksv1alpha1.ConditionRelyingParties)
		}
		rp := cfg.Status.Promotion.RelyingParties[0]
		t.Logf("rotated at %s; kube-apiserver last fetched at %s; promoted %v after the rotation, %v before the timer (%v after the rotation); %d tokens, %d refused (%v)",
			rotated.Format(time.RFC3339Nano), rp.LastFetchTime, promoted.Sub(rotated).Round(time.Millisecond), timer.Sub(promoted).Round(time.Millisecond),
			timer.Sub(rotated).Round(time.Second), sent, refused, window)
		if !promoted.Before(timer) {
			t.Errorf("promoted at %s, not before the timer %s", promoted, timer)
		}
		if rp.LastFetchTime == nil || promoted.Sub(rp.LastFetchTime.Time) > scrapeInterval+2*time.Second {
			t.Errorf("promoted at %s, more than one scrape interval after kube-apiserver's fetch (%v)", promoted, rp.LastFetchTime)
		}
		if !hasEvent(t, ns, "proof", jwksv1alpha1.ReasonKeyPromoted, "before its timer") {
			t.Error("no KeyPromoted event saying the relying parties promoted it")
		}
		if sent < 20 || refused > 0 {
			t.Errorf("%d of %d tokens refused", refused, sent)
		}
	})

	t.Run("unreadable metrics: the timer promotes", func(t *testing.T) {
		s := startSigner(t, relyingParty, issuers["timer"], ns, "timer-signing")
		refreshKeySet(t, relyingParty, issuers["timer"])
		rotate(t, ns, "timer-tls")
		timer, promoted := awaitPromotion(t, ns, "timer")
		sent, refused, window := s.stop()
		t.Logf("timer: promoted %v after the timer; %d tokens, %d refused (%v)", promoted.Sub(timer).Round(time.Millisecond), sent, refused, window)
		if promoted.Before(timer) {
			t.Errorf("promoted at %s, before the timer %s, with the relying party unreadable", promoted, timer)
		}
		c := meta.FindStatusCondition(getJWKSConfig(t, ns, "timer").Status.Conditions, jwksv1alpha1.ConditionRelyingParties)
		says := "apiserver: " + metricsURL + " answers 403 Forbidden"
		if c == nil || c.Reason != jwksv1alpha1.ReasonRelyingPartyUnreadable || !strings.Contains(c.Message, says) {
			t.Errorf("RelyingParties condition %+v, want %s saying %q", c, jwksv1alpha1.ReasonRelyingPartyUnreadable, says)
		}
		if !hasEvent(t, ns, "timer", jwksv1alpha1.ReasonRelyingPartyUnreadable, says) {
			t.Error("no Warning event naming the relying party and why")
		}
		if sent < 20 || refused > 0 {
			t.Errorf("%d of %d tokens refused", refused, sent)
		}
	})
}

// proofTimes are the JWKSConfigs' cacheMaxAge, the promotion margin and the scrape
// interval: 40s, 2s and 1s, so that the test takes a minute and a half. To measure the
// delays with trustplane's defaults instead (5m, 1m, 10s: about 11 minutes), set
// TRUSTPLANE_PROOF_TIMES=5m,1m,10s.
func proofTimes(t *testing.T) (maxAge, margin, scrapeInterval time.Duration) {
	t.Helper()
	maxAge, margin, scrapeInterval = cacheMaxAge, 2*time.Second, time.Second
	if v := os.Getenv("TRUSTPLANE_PROOF_TIMES"); v != "" {
		var err error
		parts := strings.Split(v, ",")
		if len(parts) != 3 {
			t.Fatalf("TRUSTPLANE_PROOF_TIMES=%q: want cacheMaxAge,margin,scrapeInterval such as 5m,1m,10s", v)
		}
		for i, d := range []*time.Duration{&maxAge, &margin, &scrapeInterval} {
			if *d, err = time.ParseDuration(parts[i]); err != nil {
				t.Fatalf("TRUSTPLANE_PROOF_TIMES: %v", err)
			}
		}
	}
	return maxAge, margin, scrapeInterval
}

// awaitPromotion waits for the rotated key of name's certificate Secret to be pending,
// then promoted: the promotion timer it was given, and when the signing Secret got it.
func awaitPromotion(t *testing.T, ns, name string) (timer, promoted time.Time) {
	t.Helper()
	kid := currentKid(t, ns, name+"-tls")
	testenv.Eventually(t, "the key pending with its timer", time.Minute, func() bool {
		st := getJWKSConfig(t, ns, name).Status
		if st.PendingKeyID == kid && st.PendingPromotionTime != nil {
			timer = st.PendingPromotionTime.Time
			return true
		}
		return false
	})
	deadline := timer.Add(time.Minute)
	for currentKid(t, ns, name+"-signing") != kid {
		if time.Now().After(deadline) {
			t.Fatalf("key %s not promoted within a minute of its timer; status %+v", kid, getJWKSConfig(t, ns, name).Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return timer, time.Now()
}

func getJWKSConfig(t *testing.T, ns, name string) *jwksv1alpha1.JWKSConfig {
	t.Helper()
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// hasEvent says whether an event of reason about name says says, within 10 s.
func hasEvent(t *testing.T, ns, name, reason, says string) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, e := range testenv.Events(t, env.Client, ns, name, reason) {
			if strings.Contains(e.Note, says) {
				return true
			}
		}
	}
	return false
}

// metricsTokens are tokens of two ServiceAccounts of the relying party's cluster: one
// bound to get /metrics, as docs/jwks.md ("Promotion on proof") has it, and one not.
func metricsTokens(t *testing.T, cfg *rest.Config) (reader, stranger string) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trustplane-jwks-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trustplane-jwks-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "trustplane-jwks"}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	return token("trustplane-jwks"), token("stranger")
}
