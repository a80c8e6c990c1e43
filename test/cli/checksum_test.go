package cli_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
)

const version = checksum.DefaultVersionAnnotation

func tlsSecret(t *testing.T, ns, name, ver string) *corev1.Secret {
	t.Helper()
	chain := newChain(t)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{version: ver}}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}}
}

func secretID(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	id, err := checksum.SecretID(s.Name, s.Annotations, version, s.Data)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// publish writes a SecretCheckSum (or IngressCheckSum) for namespace ns, as the control
// plane's namespace scope does.
func publish(t *testing.T, ns string, obj client.Object, ids []string) {
	t.Helper()
	obj.SetNamespace(ns)
	obj.SetGenerateName("published-")
	obj.SetAnnotations(map[string]string{checksum.ScopeAnnotation: checksum.NewScope([]string{ns}, version).String()})
	switch o := obj.(type) {
	case *tenginev1.SecretCheckSum:
		o.Spec = tenginev1.SecretCheckSumSpec{Checksum: checksum.Sum(ids), IDs: ids, Timestamp: metav1.Now()}
	case *tenginev1.IngressCheckSum:
		o.Spec = tenginev1.IngressCheckSumSpec{Checksum: checksum.Sum(ids), IDs: ids, Timestamp: metav1.Now()}
	}
	create(t, obj)
}

func TestChecksumDiff(t *testing.T) {
	ns := env.Namespace(t, "tengine")
	site1, site2, site3 := tlsSecret(t, ns, "site-1", "1"), tlsSecret(t, ns, "site-2", "1"), tlsSecret(t, ns, "site-3", "1")
	create(t, site1, site2,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unversioned-1"}, Data: map[string][]byte{"x": []byte("y")}})
	publish(t, ns, &tenginev1.SecretCheckSum{}, []string{secretID(t, site1), secretID(t, site2)})
	publish(t, ns, &tenginev1.IngressCheckSum{}, nil)

	out := tp(t, "checksum", "diff", "--namespace", ns).ok(t)
	contains(t, out, "Scope: namespaces="+ns+"; version-annotation="+version,
		"Secrets: match: checksum "+checksum.Sum([]string{secretID(t, site1), secretID(t, site2)})+" of 2 IDs is published in SecretCheckSum "+ns+"/published-",
		"Ingresses: match: checksum d41d8cd98f00b204e9800998ecf8427e of 0 IDs")

	// The cluster moves on without the control plane: a version bump, a key that no
	// longer matches its certificate, a new Secret, a counted Ingress.
	was1, was2 := secretID(t, site1), secretID(t, site2)
	site1.Annotations[version] = "2"
	site2.Data[corev1.TLSPrivateKeyKey] = newChain(t).KeyPEM()
	for _, s := range []*corev1.Secret{site1, site2} {
		if err := env.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	create(t, site3, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-7",
		Annotations: map[string]string{version: "4", checksum.IngressClassAnnotation: checksum.DefaultIngressClass}},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}}}}})

	out = tp(t, "checksum", "diff", "-n", ns).fails(t, "2 of 2 tracks do not match the published checksum")
	sha1 := strings.SplitN(was1, "-", 3)[2]
	contains(t, out,
		"Secrets: MISMATCH with SecretCheckSum "+ns+"/published-",
		"ID ", "ONLY IN", "SECRET", "WHY",
		"1-2-"+sha1, "cluster     "+ns+"/site-1   version 2 in the cluster, 1 published",
		was1, "replaced in the cluster by 1-2-"+sha1,
		was2, "published   "+ns+"/site-2   "+ns+"/site-2 is left out (KeyMismatch: tls.crt and tls.key do not load as a pair",
		secretID(t, site3), "not in the published checksum",
		"Ingresses: MISMATCH with IngressCheckSum", "7-4 ", ns+"/app-7")
	for _, key := range [][]byte{site1.Data[corev1.TLSPrivateKeyKey], site2.Data[corev1.TLSPrivateKeyKey]} {
		if strings.Contains(out, string(key[40:80])) {
			t.Error("a key is printed")
		}
	}

	// Tengine-Ingress's class flags decide which Ingresses count.
	out = tp(t, "checksum", "diff", "-n", ns, "--tracks", "ingresses", "--ingress-class", "nginx").ok(t)
	contains(t, out, "Ingresses: match")

	// Another scope: nothing published there is ours to compare with.
	out = tp(t, "checksum", "diff", "-n", ns, "-n", "default", "--tracks", "secrets").fails(t, "1 of 1 tracks do not match")
	contains(t, out, "Scope: namespaces=default,"+ns, "no published SecretCheckSum covers this scope")
	tp(t, "checksum", "diff", "--tracks", "pods").fails(t, `unknown track "pods" in --tracks`)

	// describe: the scope, the objects of the same scope (publish-then-delete), the diff to run.
	older := &tenginev1.SecretCheckSumList{}
	if err := env.Client.List(ctx, older, client.InNamespace(ns)); err != nil || len(older.Items) != 1 {
		t.Fatalf("SecretCheckSums: %v %d", err, len(older.Items))
	}
	newer := &tenginev1.SecretCheckSum{}
	publish(t, ns, newer, nil)
	out = tp(t, "describe", "secretchecksum", older.Items[0].Name, "-n", ns).ok(t)
	contains(t, out, "SecretCheckSum "+ns+"/"+older.Items[0].Name+" Ready=True Published",
		"├─Scope: namespaces="+ns+"; version-annotation="+version,
		"│ ├─SecretCheckSum "+ns+"/"+newer.Name+" (",
		"│ └─compare with the cluster: trustplane checksum diff --namespace "+ns)
}
