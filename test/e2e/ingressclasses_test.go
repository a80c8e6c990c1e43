package e2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

// testDataplaneIngressClasses: the component's Role cannot grant the cluster-scoped
// IngressClasses that Tengine-Ingress's class rules read. Without them the agent verifies
// the Secrets all the same and says why it does not verify Ingresses; once the ClusterRole
// is bound as docs/checksum.md shows, it agrees with the manager (under its own
// ServiceAccount) on the Ingresses of Tengine's class only.
func testDataplaneIngressClasses(t *testing.T, agent *testenv.Process, metricsAddr string) {
	if !strings.Contains(agent.Output(), "cannot read IngressClasses") {
		t.Errorf("the agent did not say that it cannot read IngressClasses:\n%s", agent.Output())
	}
	create(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "trustplane-dataplane-" + gatewayNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "trustplane-dataplane"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gateway", Namespace: gatewayNamespace}},
	})
	create(t, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-nginx"}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}})
	nginxClass := "e2e-nginx"
	for name, className := range map[string]*string{"edge-web-1": &nginxClass, "edge-web-2": nil} {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: gatewayNamespace, Name: name, Annotations: map[string]string{checksum.DefaultVersionAnnotation: "1"}},
			Spec: networkingv1.IngressSpec{IngressClassName: className, DefaultBackend: &networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}
		if className == nil {
			ing.Annotations[checksum.IngressClassAnnotation] = checksum.DefaultIngressClass
		}
		create(t, ing)
	}
	// The agent checks again on every change, and RBAC takes a moment to apply: keep
	// changing something no checksum reads.
	touched := time.Now()
	testenv.Eventually(t, "the agent verifying Ingresses, consistent with the manager", 60*time.Second, func() bool {
		if time.Since(touched) > time.Second {
			touchIngress(t, gatewayNamespace, "edge-web-1")
			touched = time.Now()
		}
		body, _ := get(t, urlOf(metricsAddr, "/metrics"))
		return strings.Contains(string(body), `trustplane_dataplane_consistent{track="ingresses"} 1`)
	})
	if !strings.Contains(agent.Output(), "IngressClasses can be read now") {
		t.Error("the agent did not say that it reads IngressClasses now")
	}
	published := &tenginev1.IngressCheckSumList{}
	if err := env.Client.List(ctx, published, client.InNamespace(gatewayNamespace)); err != nil {
		t.Fatal(err)
	}
	if len(published.Items) != 1 || !slices.Equal(published.Items[0].Spec.IDs, []string{"2-1"}) {
		t.Errorf("IngressCheckSums in %s: %+v, want one over 2-1 (Tengine's class only)", gatewayNamespace, published.Items)
	}
}

// touchIngress changes an Ingress's label, which no checksum reads.
func touchIngress(t *testing.T, ns, name string) {
	t.Helper()
	ing := &networkingv1.Ingress{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ing); err != nil {
		t.Fatal(err)
	}
	ing.Labels = map[string]string{"touched": strconv.FormatInt(time.Now().UnixNano(), 10)}
	if err := env.Client.Update(ctx, ing); err != nil {
		t.Fatal(err)
	}
}
