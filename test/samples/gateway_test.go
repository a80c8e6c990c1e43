package samples

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/testenv"
)

// checkGateway: the gateway sample's sidecar has exactly the rights the component's
// generated Role gives; on make run's real node, its nginx serves Secret web-tls-1's
// certificate, which the sidecar wrote once the checksum verified it.
func checkGateway(t *testing.T, r *run) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "components", "dataplane-sidecar", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var generated *rbacv1.Role
	for _, obj := range testenv.DecodeYAML(t, raw) {
		if obj.GetKind() == "Role" {
			generated = &rbacv1.Role{}
			testenv.FromUnstructured(t, obj, generated)
		}
	}
	for _, role := range typed[rbacv1.Role](t, r.samples, "Role") {
		if role.Name == "trustplane-dataplane" && (generated == nil || !equality.Semantic.DeepEqual(role.Rules, generated.Rules)) {
			t.Errorf("the gateway sample's Role %s/%s differs from the generated one: %+v", role.Namespace, role.Name, role.Rules)
		}
	}
	if r.standIn {
		return // no node runs the gateway
	}
	secret := sampleSecret(t, r.samples, "edge", "web-tls-1")
	want := firstCertificate(t, secretData(secret, corev1.TLSCertKey))
	var served []byte
	eventually(t, "the gateway's nginx to serve web-tls-1 from the sidecar's files", func() bool {
		pods := &corev1.PodList{}
		if cluster.List(ctx, pods, client.InNamespace("edge"), client.MatchingLabels{"app": "gateway"}) != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
				continue
			}
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(p.Status.PodIP, "8443"),
				&tls.Config{InsecureSkipVerify: true})
			if err != nil {
				continue
			}
			served = conn.ConnectionState().PeerCertificates[0].Raw
			_ = conn.Close()
			return bytes.Equal(served, want.Raw)
		}
		return false
	})
}
