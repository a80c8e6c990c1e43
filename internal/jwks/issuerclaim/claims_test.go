package issuerclaim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/status"
)

const claims = "trustplane-system"

func config(ns, name, issuer string) *jwksv1alpha1.JWKSConfig {
	return &jwksv1alpha1.JWKSConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec:       jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "tls", Issuer: issuer},
	}
}

func TestRefusal(t *testing.T) {
	bindings, err := jwkset.ParseIssuerBindings([]string{"bound.example/teams/bob=bob"})
	if err != nil {
		t.Fatal(err)
	}
	c := &Claims{Namespace: claims, Bindings: bindings, ServerHosts: []string{"jwks.internal"}}
	for _, tc := range []struct {
		ns, key, refused string // refused: a part of the reason, "" when allowed
	}{
		{"alice", "idp.example/alice", ""},
		{"alice", "jwks.internal/x", "--jwks-server-hosts"},
		{"alice", "idp.example/bob/idp", `JWKSConfig "idp" in namespace "bob"`},
		{"bob", "idp.example/bob/idp", ""},
		{"alice", "idp.example/bob/idp/x", ""},
		{"alice", "bound.example/teams/bob/api", "--jwks-issuer-namespaces"},
		{"bob", "bound.example/teams/bob/api", ""},
		{"alice", "bound.example/teams/bobby/api", ""},
		{"alice", "bound.example/teams/bobby", `JWKSConfig "bobby" in namespace "teams"`},
	} {
		why := c.Refusal(config(tc.ns, "x", ""), tc.key)
		if tc.refused == "" && why != "" || !strings.Contains(why, tc.refused) {
			t.Errorf("%s in namespace %s: refusal %q, want one naming %q", tc.key, tc.ns, why, tc.refused)
		}
	}
}

func TestClaimNaming(t *testing.T) {
	c := &Claims{Namespace: claims}
	cfg := config("bob", "idp", "https://idp.example/bob")
	cm := c.Desired(cfg, "idp.example/bob")
	if cm.Namespace != claims || cm.Name != ObjectName("idp.example/bob") || !strings.HasPrefix(cm.Name, "jwks-issuer-") || len(cm.Name) != len("jwks-issuer-")+20 {
		t.Errorf("claim %s/%s", cm.Namespace, cm.Name)
	}
	if ObjectName("idp.example/bob") == ObjectName("idp.example/alice") {
		t.Error("two issuers, one claim name")
	}
	if cm.Labels[jwksv1alpha1.IssuerClaimLabel] != string(cfg.UID) || IssuerOf(cm) != "idp.example/bob" || HolderOf(cm) != (types.NamespacedName{Namespace: "bob", Name: "idp"}) {
		t.Errorf("claim %+v", cm)
	}
	if got := KeyIndexOf(cfg); len(got) != 1 || got[0] != "idp.example/bob" {
		t.Errorf("KeyIndexOf = %v", got)
	}
	if got := KeyIndexOf(config("bob", "plain", "")); got != nil {
		t.Errorf("KeyIndexOf without an issuer = %v", got)
	}
}

// TestClaimAndRelease walks one issuer through its claims with a fake clock: the first
// JWKSConfig holds it, another waits (stalled while the holder lives, waiting for the hold
// once it is released by another namespace), and the holder's namespace gets it back at
// once.
func TestClaimAndRelease(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bob, alice, bob2 := config("bob", "idp", "https://idp.example/x"), config("alice", "idp", "https://IDP.example/x/"), config("bob", "again", "https://idp.example/x")
	w := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(bob, alice, bob2).Build()
	c := &Claims{Namespace: claims, Reader: w, Hold: time.Hour}
	reason := func(err error) string {
		if err == nil {
			return ""
		}
		var se *status.Error
		if errors.As(err, &se) {
			return se.Reason()
		}
		return err.Error()
	}
	serves := func(cfg *jwksv1alpha1.JWKSConfig) bool {
		ok, err := c.Serves(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for i, step := range []struct {
		do     func() error
		reason string
		bob    bool // whether bob's idp is served after the step
		alice  bool
	}{
		{func() error { return c.Claim(ctx, w, bob, t0) }, "", true, false},
		{func() error { return c.Claim(ctx, w, bob, t0) }, "", true, false}, // held: nothing to do
		{func() error { return c.Claim(ctx, w, alice, t0) }, jwksv1alpha1.ReasonIssuerInUse, true, false},
		{func() error { return c.Release(ctx, w, bob, "", t0.Add(time.Minute)) }, "", false, false},
		{func() error { return c.Claim(ctx, w, alice, t0.Add(30*time.Minute)) }, jwksv1alpha1.ReasonIssuerInUse, false, false}, // the hold
		{func() error { return c.Claim(ctx, w, bob2, t0.Add(30*time.Minute)) }, "", false, false},                              // bob's namespace, at once
		{func() error { return c.Release(ctx, w, bob2, "", t0.Add(40*time.Minute)) }, "", false, false},
		{func() error { return c.Claim(ctx, w, alice, t0.Add(41*time.Minute+time.Hour)) }, "", false, true},
	} {
		if got := reason(step.do()); got != step.reason {
			t.Fatalf("step %d: %q, want %q", i, got, step.reason)
		}
		if serves(bob) != step.bob || serves(alice) != step.alice {
			t.Fatalf("step %d: serves bob %v alice %v, want %v %v", i, serves(bob), serves(alice), step.bob, step.alice)
		}
	}
	list := &corev1.ConfigMapList{}
	if err := w.List(ctx, list, client.InNamespace(claims)); err != nil || len(list.Items) != 1 {
		t.Fatalf("claims: %d (%v), want one per issuer", len(list.Items), err)
	}
}
