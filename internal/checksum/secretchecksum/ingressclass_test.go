package secretchecksum

import (
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

const nginxController = "k8s.io/ingress-nginx"

// TestIngressChecksumCountsTengineClassesOnly: the IngressCheckSum holds exactly the
// Ingresses a Tengine-Ingress with the same class flags keeps (the rules, one per row with
// their upstream source, are TestTengineIngressClassRules in internal/checksum), against
// a real API server and its DefaultIngressClass admission; an IngressClass that appears or
// goes re-evaluates the Ingresses naming it.
func TestIngressChecksumCountsTengineClassesOnly(t *testing.T) {
	ns := namespace(t)
	tengineClass, nginxClass, laterClass, defaultClass := ns+"-tengine", ns+"-nginx", ns+"-later", ns+"-default"
	createIngressClass(t, tengineClass, checksum.DefaultControllerClass, false)
	createIngressClass(t, nginxClass, nginxController, false)
	annotated := func(class string) map[string]string { return map[string]string{checksum.IngressClassAnnotation: class} }
	putIngress(t, ns, "annotated-tengine-1", "1", nil, annotated("tengine"))
	putIngress(t, ns, "annotated-nginx-2", "1", nil, annotated("nginx"))
	putIngress(t, ns, "classless-3", "1", nil, nil)
	putIngress(t, ns, "class-tengine-4", "1", &tengineClass, nil)
	putIngress(t, ns, "class-nginx-5", "1", &nginxClass, nil)
	// A class that does not exist (yet): left out, and its owner told.
	putIngress(t, ns, "class-missing-6", "1", &laterClass, nil)
	putIngress(t, ns, "unversioned-tengine-8", "", nil, annotated("tengine"))
	// A default IngressClass of Tengine's controller: the API server writes it into the
	// Ingresses created without a class from now on; the ones before stay classless.
	createIngressClass(t, defaultClass, checksum.DefaultControllerClass, true)
	testenv.Eventually(t, "the API server's admission to see the default IngressClass", 20*time.Second, func() bool {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}
		if err := env.Client.Create(ctx, ing, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		return ing.Spec.IngressClassName != nil && *ing.Spec.IngressClassName == defaultClass
	})
	if got := putIngress(t, ns, "defaulted-7", "1", nil, nil).Spec.IngressClassName; got == nil || *got != defaultClass {
		t.Fatalf("the API server gave a new classless Ingress the class %v, want the default %s", got, defaultClass)
	}

	stop := startManager(t, ns)
	waitIngressIDs(t, ns, "1-1", "4-1", "7-1")
	waitForEvent(t, ns, "class-missing-6", "names no IngressClass")
	for _, other := range []string{"annotated-nginx-2", "classless-3", "class-nginx-5", "unversioned-tengine-8"} {
		if events := eventsAbout(t, ns, other); len(events) != 0 {
			t.Errorf("%s (another controller's, or unversioned) reported: %s", other, events[0].Note)
		}
	}

	// The missing class appears with Tengine's controller; Tengine's own class goes.
	createIngressClass(t, laterClass, checksum.DefaultControllerClass, false)
	waitIngressIDs(t, ns, "1-1", "4-1", "6-1", "7-1")
	if err := env.Client.Delete(ctx, &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: tengineClass}}); err != nil {
		t.Fatal(err)
	}
	waitIngressIDs(t, ns, "1-1", "6-1", "7-1")

	// --watch-ingress-without-class takes the Ingress created before the default class.
	stop()
	startManagerWith(t, func(o *Options) {
		o.Namespaces, o.IngressClasses.WatchWithoutClass = []string{ns}, true
	})
	waitIngressIDs(t, ns, "1-1", "3-1", "6-1", "7-1")
}

func createIngressClass(t *testing.T, name, controller string, isDefault bool) {
	t.Helper()
	class := &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.IngressClassSpec{Controller: controller}}
	if isDefault {
		class.Annotations = map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}
	}
	if err := env.Client.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	// Cluster-scoped, and a default class would adopt other tests' Ingresses.
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Client.Delete(ctx, class)) })
}

// putIngress creates a versioned Ingress (version "" for none) and returns it as stored.
func putIngress(t *testing.T, ns, name, version string, className *string, annotations map[string]string) *networkingv1.Ingress {
	t.Helper()
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}},
		Spec: networkingv1.IngressSpec{IngressClassName: className,
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}
	for k, v := range annotations {
		ing.Annotations[k] = v
	}
	if version != "" {
		ing.Annotations[checksum.DefaultVersionAnnotation] = version
	}
	if err := env.Client.Create(ctx, ing); err != nil {
		t.Fatal(err)
	}
	return ing
}

// waitIngressIDs waits until ns holds exactly one IngressCheckSum, over exactly ids.
func waitIngressIDs(t *testing.T, ns string, ids ...string) {
	t.Helper()
	var items []tenginev1.IngressCheckSum
	testenv.Eventually(t, "the IngressCheckSum over "+strings.Join(ids, ","), 20*time.Second, func() bool {
		list := &tenginev1.IngressCheckSumList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items = list.Items
		return len(items) == 1 && items[0].Spec.Checksum == checksum.Sum(ids) && slices.Equal(items[0].Spec.IDs, ids)
	})
}

// TestStandingChecksumsArePublishedOverNothing: the cluster scope's objects, and those of
// the namespaces named in --secret-checksum-namespaces, exist even when nothing counts
// (the MD5 of the empty string), as docs/checksum.md says.
func TestStandingChecksumsArePublishedOverNothing(t *testing.T) {
	home, named := namespace(t), namespace(t)
	putSecret(t, home, "unversioned-1", "", newCert(t))
	putIngress(t, named, "other-class-2", "1", nil, map[string]string{checksum.IngressClassAnnotation: "nginx"})
	startManagerWith(t, func(o *Options) {
		o.Namespaces, o.Scopes = []string{home, named}, []string{"cluster", "namespace"}
	})
	empty := checksum.Sum(nil)
	waitPublishedOfKind(t, home, ScopeCluster, empty)
	for _, ns := range []string{home, named} {
		waitPublishedOfKind(t, ns, ScopeNamespace, empty)
	}
	testenv.Eventually(t, "IngressCheckSums over nothing, cluster and per namespace", 20*time.Second, func() bool {
		list := &tenginev1.IngressCheckSumList{}
		if err := env.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, p := range list.Items {
			if p.Spec.Checksum == empty && (p.Namespace == home || p.Namespace == named) {
				kinds[p.Namespace+"/"+string(kindOf(&p))]++
			}
		}
		return kinds[home+"/cluster"] == 1 && kinds[home+"/namespace"] == 1 && kinds[named+"/namespace"] == 1
	})
}
