package cli_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	controlplanev1alpha1 "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks"
	clusterctrl "github.com/trustplane/trustplane/internal/provisioning/cluster"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
	"github.com/trustplane/trustplane/internal/provisioning/subscription"
	"github.com/trustplane/trustplane/internal/testenv"
)

// reconcileKinds are the kinds `reconcile --help` lists, each with the name of the
// controller it says reconciles it.
func reconcileKinds(t *testing.T) map[string]string {
	t.Helper()
	help := tpRaw(t, "reconcile", "--help").ok(t)
	if strings.Contains(help, "[jwksconfig") {
		t.Errorf("reconcile --help prints its kinds as a Go slice:\n%s", help)
	}
	kinds := map[string]string{}
	in := false
	for _, l := range lines(help) {
		switch {
		case strings.HasPrefix(l, "Kinds, each with the controller"):
			in = true
		case in && strings.TrimSpace(l) == "":
			in = false
		case in:
			f := strings.Fields(l)
			if len(f) != 6 || f[2] != "by" || f[5] != "controller" {
				t.Fatalf("reconcile --help: a kind's line %q", l)
			}
			kinds[f[0]] = f[4]
		}
	}
	if len(kinds) == 0 {
		t.Fatalf("reconcile --help lists no kind:\n%s", help)
	}
	return kinds
}

// TestReconcileEveryKind: each kind reconcile lists, with its controller running (as
// trustplane manager runs it), gets the annotation and is reconciled because of it: the
// controller records the request it handled.
func TestReconcileEveryKind(t *testing.T) {
	ns := env.Namespace(t, "reconcile-all")
	issuerToPublish(t, ns)
	broughtAlong(t, ns)
	create(t, kubeconfigRequest(ns, "reader", "self"),
		// The Secret pool is this namespace: a shared gcp credential for the request.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gcp-shared-1",
			Labels: map[string]string{controlplanev1alpha1.LabelHyperscalerType: "gcp", "shared": "true"}}, StringData: map[string]string{"credentials": "x"}},
		&controlplanev1alpha1.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"},
			Spec: controlplanev1alpha1.SubscriptionRequestSpec{Provider: "gcp", SubscriptionSelector: "shared"}})

	// What reconciles each kind, by the name reconcile --help gives it, and the object of
	// each kind reconciled below.
	jwksOpts := jwks.DefaultOptions()
	jwksOpts.ServerBindAddress, jwksOpts.MinUpdateInterval, jwksOpts.IssuerClaimNamespace = "0", 0, ns
	env.RunManager(t, func(mgr ctrl.Manager) error { _, err := jwks.Setup(mgr, jwksOpts); return err })
	runOperators(t)
	env.RunManager(t, func(mgr ctrl.Manager) error {
		_, err := subscription.Setup(mgr, subscription.Options{Pool: subscription.PoolSecrets, PoolNamespace: ns})
		return err
	})
	objects := map[string]struct {
		controller string
		obj        client.Object
	}{
		"jwksconfig":          {jwks.Name, &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"}}},
		"cluster":             {clusterctrl.Name, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "self"}}},
		"kubeconfigrequest":   {kubeconfigctrl.Name, &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader"}}},
		"subscriptionrequest": {subscription.Name, &controlplanev1alpha1.SubscriptionRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}}},
	}
	listed := reconcileKinds(t)
	for kind, controller := range listed {
		o, ok := objects[kind]
		if !ok {
			t.Errorf("reconcile lists %s, which this test does not reconcile", kind)
			continue
		}
		if controller != o.controller {
			t.Errorf("reconcile --help says the %s controller reconciles %s; it is %s", controller, kind, o.controller)
		}
		name := o.obj.GetName()
		testenv.Eventually(t, kind+" "+name+" Ready", 60*time.Second, func() bool { return tp(t, "get", kind, name, "-n", ns).code == 0 })
		out := tp(t, "reconcile", kind, name, "-n", ns).ok(t)
		contains(t, out, kind+"/"+name+": reconciled; Ready=True ")
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o.obj), o.obj); err != nil {
			t.Fatal(err)
		}
		at := o.obj.GetAnnotations()[conditions.ReconcileRequestedAnnotation]
		if handled := o.obj.(conditions.ReconcileRequestStatus).GetLastHandledReconcileAt(); at == "" || handled != at {
			t.Errorf("%s: annotation %q, lastHandledReconcileAt %q", kind, at, handled)
		}
	}
	for kind := range objects {
		if _, ok := listed[kind]; !ok {
			t.Errorf("reconcile --help does not list %s", kind)
		}
	}
}
