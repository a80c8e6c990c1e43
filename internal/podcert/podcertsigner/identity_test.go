package podcertsigner

import (
	"crypto/x509"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trustplane/trustplane/api/certificates"
	podcertv1alpha1 "github.com/trustplane/trustplane/api/podcert/v1alpha1"
)

func identityPolicy(ns, name, signer string, accounts ...podcertv1alpha1.ServiceAccountIdentity) podcertv1alpha1.PodIdentityPolicy {
	return podcertv1alpha1.PodIdentityPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: podcertv1alpha1.PodIdentityPolicySpec{SignerName: signer, ServiceAccounts: accounts}}
}

// TestIdentityOf: a pod gets the DNS names its namespace's policies allow its
// ServiceAccount, narrowed by its request, never widened; names outside the namespace,
// other namespaces' and other signers' policies count for nothing.
func TestIdentityOf(t *testing.T) {
	const signer = "trustplane.io/pod-identity"
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}
	policies := []podcertv1alpha1.PodIdentityPolicy{
		identityPolicy("shop", "b-web", "", podcertv1alpha1.ServiceAccountIdentity{Name: "web",
			DNSNames:          []string{"web.shop.svc", "web.bank.svc", "web.shop.svc.cluster.local.evil.example", "shop.svc"},
			ExtendedKeyUsages: []podcertv1alpha1.ExtendedKeyUsage{podcertv1alpha1.ExtendedKeyUsageClientAuth}}),
		identityPolicy("shop", "a-web", signer, podcertv1alpha1.ServiceAccountIdentity{Name: "web",
			DNSNames:          []string{"web-0.web.shop.svc.cluster.local"},
			ExtendedKeyUsages: []podcertv1alpha1.ExtendedKeyUsage{podcertv1alpha1.ExtendedKeyUsageServerAuth}}),
		identityPolicy("bank", "web", signer, podcertv1alpha1.ServiceAccountIdentity{Name: "web", DNSNames: []string{"web.bank.svc"}}),
		identityPolicy("shop", "other-signer", "example.com/other", podcertv1alpha1.ServiceAccountIdentity{Name: "web", DNSNames: []string{"admin.shop.svc"}}),
	}
	for _, tc := range []struct {
		name, serviceAccount string
		annotations          map[string]string
		dnsNames             []string
		ekus                 []x509.ExtKeyUsage
		denied               string
	}{
		{name: "every allowed name, EKUs of the first policy by name", serviceAccount: "web",
			dnsNames: []string{"web-0.web.shop.svc.cluster.local", "web.shop.svc"}, ekus: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{name: "no policy: SPIFFE ID only, both EKUs", serviceAccount: "db", ekus: both},
		{name: "narrowed", serviceAccount: "web", annotations: map[string]string{certificates.DNSNamesAnnotation: " web.shop.svc ,web.shop.svc"},
			dnsNames: []string{"web.shop.svc"}, ekus: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{name: "narrowed to none", serviceAccount: "web", annotations: map[string]string{certificates.DNSNamesAnnotation: ""},
			ekus: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{name: "another namespace's name, though listed", serviceAccount: "web", annotations: map[string]string{certificates.DNSNamesAnnotation: "web.bank.svc"},
			denied: `DNS name "web.bank.svc"`},
		{name: "a name no policy lists", serviceAccount: "web", annotations: map[string]string{certificates.DNSNamesAnnotation: "web.shop.svc,admin.shop.svc"},
			denied: `DNS name "admin.shop.svc"`},
		// Second spellings of an allowed name are other names: refused, never matched.
		{name: "the allowed name in capitals", serviceAccount: "web", annotations: map[string]string{certificates.DNSNamesAnnotation: "WEB.shop.svc"},
			denied: `DNS name "WEB.shop.svc"`},
		{name: "the allowed name with a trailing dot", serviceAccount: "web", annotations: map[string]string{certificates.DNSNamesAnnotation: "web.shop.svc."},
			denied: `DNS name "web.shop.svc."`},
		{name: "another ServiceAccount's name", serviceAccount: "db", annotations: map[string]string{certificates.DNSNamesAnnotation: "web.shop.svc"},
			denied: "ServiceAccount db"},
		{name: "a key of the signer's domain it does not read", serviceAccount: "web", annotations: map[string]string{"podcert.trustplane.io/uri-sans": "spiffe://x"},
			denied: `"podcert.trustplane.io/uri-sans" is not one this signer reads`},
		{name: "another domain's key: ignored, never in the certificate", serviceAccount: "web", annotations: map[string]string{"example.com/uri-sans": "spiffe://x"},
			dnsNames: []string{"web-0.web.shop.svc.cluster.local", "web.shop.svc"}, ekus: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, denial := IdentityOf(policies, signer, "cluster.local", "shop", tc.serviceAccount, tc.annotations)
			if tc.denied != "" {
				if denial == nil || denial.Reason != certificatesv1.PodCertificateRequestConditionInvalidUserConfig || !strings.Contains(denial.Message, tc.denied) {
					t.Fatalf("want a denial saying %q, got %+v (identity %+v)", tc.denied, denial, id)
				}
				return
			}
			if denial != nil {
				t.Fatalf("denied: %v", denial)
			}
			if !slices.Equal(id.DNSNames, tc.dnsNames) || !slices.Equal(id.ExtKeyUsages, tc.ekus) {
				t.Errorf("got names %q EKUs %v, want %q %v", id.DNSNames, id.ExtKeyUsages, tc.dnsNames, tc.ekus)
			}
		})
	}
}

func TestServiceNameOf(t *testing.T) {
	for name, want := range map[string]bool{
		"web.shop.svc": true, "web.shop.svc.cluster.local": true, "web-0.web.shop.svc.cluster.local": true,
		"shop.svc": false, ".shop.svc": false, "web.bank.svc": false, "web.shop.svc.example.com": false,
		"web.shop": false, "*.shop.svc": false, "web.xshop.svc": false, "web.shop.svc.corp.internal": false,
	} {
		if got := ServiceNameOf(name, "shop", "cluster.local"); got != want {
			t.Errorf("ServiceNameOf(%q, shop, cluster.local) = %v, want %v", name, got, want)
		}
	}
	// Another cluster domain: its names, not cluster.local's.
	for name, want := range map[string]bool{"web.shop.svc.corp.internal": true, "web.shop.svc.cluster.local": false, "web.shop.svc": true} {
		if got := ServiceNameOf(name, "shop", "corp.internal"); got != want {
			t.Errorf("ServiceNameOf(%q, shop, corp.internal) = %v, want %v", name, got, want)
		}
	}
}

// TestPoliciesShapeCertificates: the signer as it runs reads the PodIdentityPolicies of
// the request's namespace from the API server: the DNS names and EKUs they allow are in
// the leaf, beside its one URI SAN; what the pod asks for narrows them; what it asks
// beyond them, and what a policy lists outside its namespace, is denied.
func TestPoliciesShapeCertificates(t *testing.T) {
	opts := DefaultOptions()
	opts.CANamespace, opts.CASecretName = "default", "identity-ca"
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
	const ns = "signer-identity"
	node, pod := world(t, ns)
	// No admission policy in this test environment: the out-of-namespace name is stored,
	// and the signer must ignore it itself.
	for _, p := range []podcertv1alpha1.PodIdentityPolicy{
		identityPolicy(ns, "web", "", podcertv1alpha1.ServiceAccountIdentity{Name: "web",
			DNSNames:          []string{"web." + ns + ".svc", "web." + ns + ".svc.cluster.local", "web.kube-system.svc"},
			ExtendedKeyUsages: []podcertv1alpha1.ExtendedKeyUsage{podcertv1alpha1.ExtendedKeyUsageServerAuth}}),
		identityPolicy("default", "web-elsewhere", "", podcertv1alpha1.ServiceAccountIdentity{Name: "web", DNSNames: []string{"web.default.svc"}}),
	} {
		if err := env.Client.Create(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}

	leaf := leafOf(t, issuedOK(t, request(t, node, pod, opts.SignerName, "ECDSAP256")))
	if want := []string{"web." + ns + ".svc", "web." + ns + ".svc.cluster.local"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNS names %q, want %q", leaf.DNSNames, want)
	}
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://cluster.local/ns/"+ns+"/sa/web" {
		t.Errorf("URI SANs %v, want the SPIFFE ID alone", leaf.URIs)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("EKUs %v, want ServerAuth alone", leaf.ExtKeyUsage)
	}

	narrowed := leafOf(t, issuedOK(t, requestWith(t, node, pod, opts.SignerName, "ECDSAP256", map[string]string{certificates.DNSNamesAnnotation: "web." + ns + ".svc"})))
	if !slices.Equal(narrowed.DNSNames, []string{"web." + ns + ".svc"}) {
		t.Errorf("narrowed: DNS names %q", narrowed.DNSNames)
	}
	for _, asked := range []string{"web.kube-system.svc", "web.default.svc", "api." + ns + ".svc"} {
		pcr := waitConcluded(t, requestWith(t, node, pod, opts.SignerName, "ECDSAP256", map[string]string{certificates.DNSNamesAnnotation: asked}))
		c := pcr.Status.Conditions[len(pcr.Status.Conditions)-1]
		if c.Type != certificatesv1.PodCertificateRequestConditionTypeDenied || c.Reason != certificatesv1.PodCertificateRequestConditionInvalidUserConfig || !strings.Contains(c.Message, asked) {
			t.Errorf("asking for %s: %s %s %q, want Denied %s naming it", asked, c.Type, c.Reason, c.Message, certificatesv1.PodCertificateRequestConditionInvalidUserConfig)
		}
	}
}
