package node

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

// gatewayNamespace is where the data-plane sidecar's gateway runs (the chart's
// dataplane.namespaces).
const gatewayNamespace = "edge"

// audience is the client ID of the relying party.
const audience = "node-test"

// testJWKS: go-oidc discovers an issuer and verifies its tokens against the JWKS nginx
// pods, reached through their Service (kube-proxy), before and after a key rotation: the
// new key's tokens verify once the pods serve the new set, and the old key's still do.
func testJWKS(t *testing.T) {
	ns := namespace(t, "jwks")
	const issuer = "https://issuer.node.test"
	key := newSigningKey(t, ns, "issuer-tls")
	createJWKSConfig(t, ns, "issuer", key.secret, issuer, true)
	waitReady(t, ns, "issuer")
	service := clusterIP(t, ns, "issuer")
	// The relying party reaches the issuer's host through the Service: every request for
	// https://issuer.node.test goes to the nginx pods' Service on port 80.
	ctx := oidc.ClientContext(context.Background(), &http.Client{Timeout: 5 * time.Second, Transport: toService{service}})
	// kube-proxy programs the Service within a sync of its endpoints becoming ready (slower
	// while every other suite of make test runs beside this one).
	var provider *oidc.Provider
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var err error
		if provider, err = oidc.NewProvider(ctx, issuer); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("discovery through Service %s: %v (its endpoints: %s)", service, err, endpointsOf(t, ns, "issuer"))
		}
		time.Sleep(time.Second)
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: audience})
	oldToken := signToken(t, issuer, audience, key)
	if _, err := verifier.Verify(ctx, oldToken); err != nil {
		t.Fatalf("a token of the published key refused: %v", err)
	}

	// Rotation: the Secret gets a new key; the set keeps the old one (keepOldKeys).
	rotated := keyOf(t, key.secret, newTLSData(t, "issuer.node.test"))
	secret := &corev1.Secret{}
	get(t, ns, key.secret, secret)
	secret.Data = rotated.data
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the nginx pods to serve the rotated key", 2*time.Minute, func() bool {
		return hasAll(httpGet("http://"+service+"/jwks.json"), rotated.kid, key.kid)
	})
	if _, err := verifier.Verify(ctx, signToken(t, issuer, audience, rotated)); err != nil {
		t.Errorf("after rotation, a token of the new key refused: %v", err)
	}
	if _, err := verifier.Verify(ctx, oldToken); err != nil {
		t.Errorf("after rotation, a token of the old key refused: %v", err)
	}
	if _, err := verifier.Verify(ctx, signToken(t, issuer, audience, keyOf(t, "", newTLSData(t, "forger")))); err == nil {
		t.Error("a token of a key never published was accepted")
	}
}

// toService sends every request to a Service's cluster IP, port 80, over plain HTTP.
type toService struct{ ip string }

func (s toService) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = "http", net.JoinHostPort(s.ip, "80")
	return http.DefaultTransport.RoundTrip(req)
}

// testChecksumSidecar: the data-plane sidecar writes only verified certificates, and the
// nginx container in its pod serves them: a TLS handshake shows the Secret's certificate.
// A Secret whose certificate and key do not load as a pair is never counted, so it never
// reaches the files: the last verified ones stay.
func testChecksumSidecar(t *testing.T) {
	ns := gatewayNamespace
	first := newTLSData(t, "web.node.test")
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-tls-1", Annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"}},
		Type:       corev1.SecretTypeTLS, Data: first,
	})
	for _, obj := range testenv.Rendered(t, "test/node/testdata/gateway") {
		if kind := obj.GetKind(); kind != "Deployment" && kind != "ConfigMap" && kind != "ServiceAccount" {
			continue // the chart grants the gateway's account the sidecar's rights
		}
		if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	var pod corev1.Pod
	waitForPods(t, "the gateway's pod to be ready", 3*time.Minute, ns, map[string]string{"app": "gateway"}, func() bool {
		pods := &corev1.PodList{}
		if c.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app": "gateway"}) != nil {
			return false
		}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					pod = p
					return true
				}
			}
		}
		return false
	})
	leaf, err := tlsLeaf(net.JoinHostPort(pod.Status.PodIP, "8443"), "web.node.test")
	if err != nil {
		t.Fatalf("TLS handshake with the gateway's nginx: %v", err)
	}
	if !bytes.Equal(leaf.Raw, firstCertificate(t, first)) {
		t.Errorf("the gateway serves %q, not Secret web-tls-1's certificate", leaf.Subject)
	}

	// A new version whose key is not its certificate's: never counted, never written.
	bad := newTLSData(t, "forged.node.test")
	bad[corev1.TLSPrivateKeyKey] = first[corev1.TLSPrivateKeyKey]
	secret := &corev1.Secret{}
	get(t, ns, "web-tls-1", secret)
	secret.Annotations[checksum.DefaultVersionAnnotation] = "2"
	secret.Data = bad
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	// And a good one beside it, so that the sidecar has visibly moved on.
	create(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api-tls-2", Annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"}},
		Type:       corev1.SecretTypeTLS, Data: newTLSData(t, "api.node.test"),
	})
	certs := filepath.Join(nodeDir, "kubelet", "root", "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "trustplane-certs")
	waitFor(t, "the sidecar to write api-tls-2", 2*time.Minute, func() bool {
		_, err := os.Stat(filepath.Join(certs, "api-tls-2.crt"))
		return err == nil
	})
	written, err := os.ReadFile(filepath.Join(certs, "web-tls-1.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(firstCertificateOf(t, written), firstCertificate(t, first)) {
		t.Error("the sidecar wrote web-tls-1's unverifiable version")
	}
	if leaf, err := tlsLeaf(net.JoinHostPort(pod.Status.PodIP, "8443"), "web.node.test"); err != nil || !bytes.Equal(leaf.Raw, firstCertificate(t, first)) {
		t.Errorf("after the bad version, the gateway serves %v (err %v)", leaf, err)
	}
}

func firstCertificate(t *testing.T, data map[string][]byte) []byte {
	t.Helper()
	return firstCertificateOf(t, data[corev1.TLSCertKey])
}

func firstCertificateOf(t *testing.T, chain []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(chain)
	if block == nil {
		t.Fatal("no certificate in the chain")
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		t.Fatal(err)
	}
	return block.Bytes
}

// endpointsOf describes the EndpointSlices of Service ns/name: each address and whether
// it is ready, for a failure message.
func endpointsOf(t *testing.T, ns, name string) string {
	t.Helper()
	list := &discoveryv1.EndpointSliceList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return err.Error()
	}
	var out []string
	for _, slice := range list.Items {
		for _, ep := range slice.Endpoints {
			out = append(out, fmt.Sprintf("%v ready=%v", ep.Addresses, ep.Conditions.Ready != nil && *ep.Conditions.Ready))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
