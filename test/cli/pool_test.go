package cli_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// TestPoolListAndCleanAsAnOperator: `pool list` shows each credential of a Secret pool
// with its type, state, account and claiming namespace (never its data); `pool clean`
// hands named dirty credentials back (dirty removed, the account kept), refuses one that
// is not dirty before changing anything, and with --all-dirty --free frees every dirty one
// for any account.
func TestPoolListAndCleanAsAnOperator(t *testing.T) {
	ns := env.Namespace(t, "pool-cli")
	secret := func(name string, labels map[string]string, claimedBy string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, StringData: map[string]string{"credentials": "top-secret-" + name}}
		if claimedBy != "" {
			s.Annotations = map[string]string{cp.AnnotationClaimedBy: claimedBy}
		}
		return s
	}
	create(t,
		secret("aws-free", map[string]string{"hyperscalerType": "aws"}, ""),
		secret("aws-claimed", map[string]string{"hyperscalerType": "aws", "tenantName": "ga-1"}, "tenant-a/ga-1"),
		secret("aws-dirty-1", map[string]string{"hyperscalerType": "aws", "tenantName": "ga-2", "dirty": "true"}, "tenant-b/ga-2"),
		secret("aws-dirty-2", map[string]string{"hyperscalerType": "aws", "tenantName": "ga-3", "dirty": "true"}, "tenant-b/ga-3"),
		secret("gcp-shared", map[string]string{"hyperscalerType": "gcp", "shared": "true", "euAccess": "true"}, ""),
		secret("not-in-pool", map[string]string{"app": "x"}, ""),
	)
	list := tp(t, "pool", "list", "-n", ns).ok(t)
	contains(t, list, "NAME", "aws-claimed", "claimed", "ga-1", "tenant-a", "aws-dirty-1", "dirty", "aws-free", "free", "gcp-shared", "shared")
	if strings.Contains(list, "not-in-pool") || strings.Contains(list, "top-secret") {
		t.Errorf("pool list shows what is not the pool's, or a credential:\n%s", list)
	}

	tp(t, "pool", "clean", "-n", ns, "aws-dirty-1", "aws-claimed").fails(t, "aws-claimed is claimed, not dirty")
	if get(t, ns, "aws-dirty-1").Labels["dirty"] != "true" {
		t.Error("a refused clean changed a credential")
	}
	tp(t, "pool", "clean", "-n", ns).fails(t, "name the credentials to hand back, or give --all-dirty")
	contains(t, tp(t, "pool", "clean", "-n", ns, "aws-dirty-1").ok(t), "aws-dirty-1: handed back to account ga-2")
	if l := get(t, ns, "aws-dirty-1").Labels; l["dirty"] != "" || l["tenantName"] != "ga-2" {
		t.Errorf("handed back: labels %v, want the account kept and not dirty", l)
	}
	contains(t, tp(t, "pool", "clean", "-n", ns, "--all-dirty", "--free").ok(t), "aws-dirty-2: handed back and freed for any account")
	s := get(t, ns, "aws-dirty-2")
	if _, claimed := s.Labels["tenantName"]; claimed || s.Labels["dirty"] != "" || s.Annotations[cp.AnnotationClaimedBy] != "" {
		t.Errorf("freed: labels %v, annotations %v", s.Labels, s.Annotations)
	}
	if string(s.Data["credentials"]) != "top-secret-aws-dirty-2" {
		t.Error("the credential itself changed")
	}
	contains(t, tp(t, "pool", "clean", "-n", ns, "--all-dirty").ok(t), "no dirty credential in "+ns)
}

func get(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}
