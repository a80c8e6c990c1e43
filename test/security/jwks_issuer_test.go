package security

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
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

func init() {
	register("serve her keys on another tenant's canonical route", canonicalRouteTakeover)
	register("have her keys answer a host no issuer of hers names", hostBlindFallback)
	register("claim another tenant's issuer in another spelling", issuerSpellings)
	register("fill the manager's private cache with labelled ConfigMaps", ownerLabelledConfigMaps)
}

// servedKids asks the shipped manager's JWKS server for path on host and returns the
// body (empty unless 200).
func servedKids(t *testing.T, host, path string) string {
	t.Helper()
	set, _ := fetchSet(t, path, "Host", host)
	return set
}

// awaitServed waits until the manager's JWKS server answers kid for path on host.
// Published says the ConfigMap holds the key; the server learns it from its own watch of
// that ConfigMap, a moment later.
func awaitServed(t *testing.T, host, path, kid string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%s%s to serve %s", host, path, kid), 30*time.Second, func() bool {
		return strings.Contains(servedKids(t, host, path), kid)
	})
}

// canonicalRouteTakeover: bob's JWKSConfig bob/route-<alice> is healthy and Published;
// alice names its canonical route, on the host bob's relying parties use, as her issuer.
// It stalls with IssuerNotAllowed naming the route's owner; every one of bob's routes
// still answers bob's key only, and bob's JWKSConfig stays Published.
func canonicalRouteTakeover(t *testing.T, alice *tenant) {
	host := "route-" + alice.namespace + ".example"
	name := "route-" + alice.namespace
	jwksConfigIn(t, env.Client, bobNamespace, name, "https://"+host+"/team")
	bobKid := readyReason(t, env.Client, bobNamespace, name, jwksv1alpha1.ReasonPublished).Status.LastKeyID

	awaitServed(t, host, "/team/jwks.json", bobKid)

	jwksConfigIn(t, alice.client, alice.namespace, "on-bobs-route", "https://"+host+"/"+bobNamespace+"/"+name)
	got := readyReason(t, alice.client, alice.namespace, "on-bobs-route", jwksv1alpha1.ReasonIssuerNotAllowed)
	if msg := meta.FindStatusCondition(got.Status.Conditions, "Ready").Message; !strings.Contains(msg, fmt.Sprintf("JWKSConfig %q in namespace %q", name, bobNamespace)) {
		t.Errorf("IssuerNotAllowed %q does not name the route's owner", msg)
	}
	for _, path := range []string{"/" + bobNamespace + "/" + name + "/jwks.json", "/team/jwks.json"} {
		for _, h := range []string{host, "other.example"} {
			set := servedKids(t, h, path)
			if path == "/team/jwks.json" && h != host {
				if set != "" {
					t.Errorf("%s%s: served on a host of no issuer", h, path)
				}
				continue
			}
			if !strings.Contains(set, bobKid) || strings.Contains(set, aliceKidOf(t, alice, "on-bobs-route")) {
				t.Errorf("%s%s: %q, want bob's key only", h, path, set)
			}
		}
	}
	readyReason(t, env.Client, bobNamespace, name, jwksv1alpha1.ReasonPublished)
}

// aliceKidOf is the kid of the certificate of alice's JWKSConfig name (its Secret name-tls).
func aliceKidOf(t *testing.T, alice *tenant, name string) string {
	t.Helper()
	secret := &corev1.Secret{}
	if err := alice.client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: name + "-tls"}, secret); err != nil {
		t.Fatal(err)
	}
	key, err := jwkset.ParseChain(secret.Data[corev1.TLSCertKey], "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return key.KeyID()
}

// hostBlindFallback: alice's issuer https://alice-<ns>.example/shared-<ns>. A request for
// bob's host on that path gets a 404 before bob's JWKSConfig exists, bob's set while it
// does, and a 404 again once it is gone: never alice's set.
func hostBlindFallback(t *testing.T, alice *tenant) {
	path := "/shared-" + alice.namespace
	bobHost := "bob-" + alice.namespace + ".example"
	jwksConfigIn(t, alice.client, alice.namespace, "shared", "https://alice-"+alice.namespace+".example"+path)
	readyReason(t, alice.client, alice.namespace, "shared", jwksv1alpha1.ReasonPublished)
	aliceKid := aliceKidOf(t, alice, "shared")
	awaitServed(t, "alice-"+alice.namespace+".example", path+"/jwks.json", aliceKid)
	nothing := func(when string) {
		t.Helper()
		for _, p := range []string{path + "/jwks.json", path + "/.well-known/openid-configuration"} {
			if set := servedKids(t, bobHost, p); set != "" {
				t.Errorf("%s: %s%s answered %q, want 404", when, bobHost, p, set)
			}
		}
	}
	nothing("before bob's JWKSConfig")
	jwksConfigIn(t, env.Client, bobNamespace, "shared-"+alice.namespace, "https://"+bobHost+path)
	bobKid := readyReason(t, env.Client, bobNamespace, "shared-"+alice.namespace, jwksv1alpha1.ReasonPublished).Status.LastKeyID
	awaitServed(t, bobHost, path+"/jwks.json", bobKid)
	if set := servedKids(t, bobHost, path+"/jwks.json"); strings.Contains(set, aliceKid) {
		t.Errorf("with bob's JWKSConfig: alice's key on bob's host: %q", set)
	}
	if err := env.Client.Delete(ctx, &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: bobNamespace, Name: "shared-" + alice.namespace}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "bob's set to go", 30*time.Second, func() bool {
		return !strings.Contains(servedKids(t, bobHost, path+"/jwks.json"), bobKid)
	})
	nothing("after bob's JWKSConfig")
}

// issuerSpellings: bob holds https://spell-<ns>.example/team and the operator binds
// bound.example to bob (the shipped manager's --jwks-issuer-namespaces are none, so the
// binding case is the in-process TestIssuerBindings). Alice's other spellings of bob's
// issuer are the same claim (IssuerInUse), and those that would be a second key for it
// are refused at admission, naming the field.
func issuerSpellings(t *testing.T, alice *tenant) {
	host := "spell-" + alice.namespace + ".example"
	jwksConfigIn(t, env.Client, bobNamespace, "spell-"+alice.namespace, "https://"+host+"/team")
	bobKid := readyReason(t, env.Client, bobNamespace, "spell-"+alice.namespace, jwksv1alpha1.ReasonPublished).Status.LastKeyID
	awaitServed(t, host, "/team/jwks.json", bobKid)
	for i, issuer := range []string{"https://" + strings.ToUpper(host) + ":8443/team/", "https://" + host + ".:443/team"} {
		name := fmt.Sprintf("spelling-%d", i)
		jwksConfigIn(t, alice.client, alice.namespace, name, issuer)
		readyReason(t, alice.client, alice.namespace, name, jwksv1alpha1.ReasonIssuerInUse)
	}
	for i, issuer := range []string{"https://" + host + "/t%65am", "https://" + host + "/x/../team", "https://" + host + "//team"} {
		tlsSecretIn(t, alice.client, alice.namespace, fmt.Sprintf("refused-%d-tls", i))
		cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: fmt.Sprintf("refused-%d", i)},
			Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: fmt.Sprintf("refused-%d-tls", i), Issuer: issuer}}
		if err := alice.client.Create(ctx, cfg); err == nil || !strings.Contains(err.Error(), "spec.issuer") {
			t.Errorf("issuer %q: %v, want refused naming spec.issuer", issuer, err)
		}
	}
	for _, h := range []string{host, host + ":8443", strings.ToUpper(host) + "."} {
		if set := servedKids(t, h, "/team/jwks.json"); !strings.Contains(set, bobKid) {
			t.Errorf("%s/team/jwks.json: %q, want bob's set", h, set)
		}
	}
}

// ownerLabelledConfigMaps: alice may create ConfigMaps in her namespace (as namespace
// admins may); one carrying the JWKS controller's owner label is refused by the shipped
// admission policy, so it never enters the manager's private cache. Without the label it
// is hers to make.
func ownerLabelledConfigMaps(t *testing.T, alice *tenant) {
	mustCreate(t, env.Client, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "configmap-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch"}}}})
	mustCreate(t, env.Client, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "configmap-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-writer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: alice.name}}})
	big := strings.Repeat("x", 900<<10)
	labelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "bloat",
		Labels: map[string]string{jwksv1alpha1.OwnerLabel: "anything"}}, Data: map[string]string{"jwks.json": big}}
	var err error
	testenv.Eventually(t, "the RoleBinding to let alice create ConfigMaps", 30*time.Second, func() bool {
		err = alice.client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: "plain"}})
		return err == nil || apierrors.IsAlreadyExists(err)
	})
	if err := alice.client.Create(ctx, labelled); err == nil || !strings.Contains(err.Error(), "only the trustplane manager sets the label") {
		t.Errorf("a ConfigMap with the owner label: %v, want refused by trustplane-owner-labels", err)
	}
	plain := &corev1.ConfigMap{}
	if err := alice.client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: "plain"}, plain); err != nil {
		t.Fatal(err)
	}
	plain.Labels = map[string]string{jwksv1alpha1.OwnerLabel: "anything"}
	if err := alice.client.Update(ctx, plain); err == nil || !strings.Contains(err.Error(), "only the trustplane manager sets the label") {
		t.Errorf("adding the owner label to her ConfigMap: %v, want refused", err)
	}
}
