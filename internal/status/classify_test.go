package status

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testenv"
)

// The label that selects which admission test objects a ConfigMap meets.
const admissionLabel = "status-test.trustplane.io/admission"

// TestClassifyTheAPIServersOwnAnswers makes the test API server (and its etcd, its
// admission plugins, a ValidatingAdmissionPolicy and two admission webhooks) refuse
// writes in every way the controllers meet, and checks how each is classified and
// described.
func TestClassifyTheAPIServersOwnAnswers(t *testing.T) {
	ns := namespace(t)
	denyByPolicy(t, ns)
	denyByWebhooks(t, ns)
	quota := exhaustedQuota(t, ns)

	stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stale"}}
	if err := env.Client.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	fresh := stale.DeepCopy()
	fresh.Data = map[string]string{"a": "b"}
	if err := env.Client.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name       string
		write      func() (client.Object, error)
		reason     string // "" for an error to retry
		serverSays string // in the message besides the object
	}{
		{"RBAC", func() (client.Object, error) { return createAs(t, "nobody", configMap(ns, "rbac", nil, 0)) }, conditions.ReasonForbidden, `User "nobody" cannot create resource "configmaps"`},
		{"invalid name", func() (client.Object, error) { return create(configMap(ns, "Not_Valid", nil, 0)) }, conditions.ReasonInvalid, "a lowercase RFC 1123 subdomain"},
		{"ConfigMap over 1 MiB", func() (client.Object, error) { return create(configMap(ns, "big", nil, 1<<20+1)) }, conditions.ReasonTooLarge, "bytes"},
		{"request body over 3 MiB", func() (client.Object, error) { return create(configMap(ns, "huge", nil, 3<<20+1)) }, conditions.ReasonTooLarge, "Request entity too large"},
		{"object over etcd's limit", func() (client.Object, error) { return create(clusterWithExtensions(ns, "fat", 1700<<10)) }, conditions.ReasonTooLarge, "request is too large"},
		{"object over the etcd client's limit", func() (client.Object, error) { return create(clusterWithExtensions(ns, "fatter", 2500<<10)) }, conditions.ReasonTooLarge, "message larger than max"},
		{"ValidatingAdmissionPolicy", func() (client.Object, error) {
			return create(configMap(ns, "vap", map[string]string{admissionLabel: "policy"}, 0))
		}, conditions.ReasonAdmissionDenied, "test policy: not here"},
		{"admission webhook", func() (client.Object, error) {
			return create(configMap(ns, "hook", map[string]string{admissionLabel: "webhook"}, 0))
		}, conditions.ReasonAdmissionDenied, "test webhook: not here"},
		{"ResourceQuota", func() (client.Object, error) {
			return create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-too-many"}})
		}, conditions.ReasonQuotaExceeded, "exceeded quota: " + quota},
		{"conflict", func() (client.Object, error) { return stale, env.Client.Update(ctx, stale) }, "", "the object has been modified"},
		{"webhook down", func() (client.Object, error) {
			return create(configMap(ns, "down", map[string]string{admissionLabel: "webhook-down"}, 0))
		}, "", "failed calling webhook"},
		{"connection refused", func() (client.Object, error) {
			return createAt(t, "https://"+testenv.FreeAddr(t), configMap(ns, "nowhere", nil, 0))
		}, "", "connection refused"},
	} {
		obj, err := tc.write()
		if err == nil {
			t.Errorf("%s: the write succeeded", tc.name)
			continue
		}
		reason, persistent := Classify(err)
		if reason != tc.reason || persistent != (tc.reason != "") {
			t.Errorf("%s: classified %q (persistent %v), want %q: %v", tc.name, reason, persistent, tc.reason, err)
		}
		described := WriteFailed("create", obj, err)
		t.Logf("%s → %q: %.300s", tc.name, reason, described)
		wantPrefix := fmt.Sprintf("create %s %s/%s: ", kindOf(obj), obj.GetNamespace(), obj.GetName())
		if msg := described.Error(); !strings.HasPrefix(msg, wantPrefix) || !strings.Contains(msg, tc.serverSays) {
			t.Errorf("%s: message %q, want %q... with %q", tc.name, msg, wantPrefix, tc.serverSays)
		}
		if got := Reason(described); tc.reason != "" && got != tc.reason {
			t.Errorf("%s: reported with reason %q", tc.name, got)
		}
	}
}

// TestClassifyServerSideAnswersThatAreTransient: 5xx, timeouts and throttling are retried.
func TestClassifyServerSideAnswersThatAreTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, err := range []error{
		apierrors.NewInternalError(errors.New("etcd leader changed")),
		apierrors.NewServiceUnavailable("the server is shutting down"),
		apierrors.NewTimeoutError("request did not complete within 60s", 1),
		apierrors.NewServerTimeout(gr, "create", 1),
		apierrors.NewTooManyRequests("priority and fairness", 1),
		apierrors.NewNotFound(gr, "gone"),
		apierrors.NewAlreadyExists(gr, "there"),
		errors.New("net/http: TLS handshake timeout"),
	} {
		if reason, persistent := Classify(fmt.Errorf("writing: %w", err)); persistent {
			t.Errorf("%v: classified persistent (%s)", err, reason)
		}
	}
}

func create(obj client.Object) (client.Object, error) { return obj, env.Client.Create(ctx, obj) }

// createAs creates obj as user, who has no RBAC at all.
func createAs(t *testing.T, user string, obj client.Object) (client.Object, error) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return obj, c.Create(ctx, obj)
}

// createAt creates obj through an API server address nothing listens on.
func createAt(t *testing.T, host string, obj client.Object) (client.Object, error) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Host, cfg.Timeout = host, 5*time.Second
	c, err := client.New(cfg, client.Options{Scheme: scheme.New(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return obj, c.Create(ctx, obj)
}

func configMap(ns, name string, labels map[string]string, size int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	if size > 0 {
		cm.Data = map[string]string{"blob": strings.Repeat("x", size)}
	}
	return cm
}

// clusterWithExtensions is a Cluster whose free-form extensions make it size bytes large:
// nothing in its schema limits it, etcd does.
func clusterWithExtensions(ns, name string, size int) *operatorv1alpha1.Cluster {
	raw, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", size)})
	return &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{Extensions: &runtime.RawExtension{Raw: raw}}}
}

// inForce waits until a dry-run create of obj is refused: admission configuration and
// quota reach the API server's admission plugins through informers, a little later.
func inForce(t *testing.T, what string, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, what+" in force", 30*time.Second, func() bool {
		return env.Client.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll) != nil
	})
}

// denyByPolicy makes a ValidatingAdmissionPolicy deny ConfigMaps labelled "policy" in ns.
func denyByPolicy(t *testing.T, ns string) {
	t.Helper()
	name := "status-test-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: configMapWrites}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !('%s' in object.metadata.labels) || object.metadata.labels['%s'] != 'policy'", admissionLabel, admissionLabel),
				Message:    "test policy: not here",
			}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: inNamespace(ns)},
		}}
	createCleanly(t, policy, binding)
	inForce(t, "the policy", configMap(ns, "probe", map[string]string{admissionLabel: "policy"}, 0))
}

var configMapWrites = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}

func inNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

// denyByWebhooks registers two validating webhooks for ConfigMaps in ns: one that denies
// those labelled "webhook", and one for those labelled "webhook-down" that does not answer.
func denyByWebhooks(t *testing.T, ns string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Result: &metav1.Status{Message: "test webhook: not here"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(srv.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	hook := func(name, url, selected string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url), CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{configMapWrites},
			NamespaceSelector:       inNamespace(ns),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{admissionLabel: selected}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](5),
		}
	}
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "status-test-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("deny.status-test.trustplane.io", srv.URL, "webhook"),
			hook("down.status-test.trustplane.io", "https://"+testenv.FreeAddr(t), "webhook-down"),
		}}
	createCleanly(t, config)
	inForce(t, "the denying webhook", configMap(ns, "probe", map[string]string{admissionLabel: "webhook"}, 0))
	inForce(t, "the webhook that is down", configMap(ns, "probe", map[string]string{admissionLabel: "webhook-down"}, 0))
}

// exhaustedQuota makes a ResourceQuota of ns allow no more Secret, and returns its name.
// No quota controller runs here: the test writes the usage it would have computed.
func exhaustedQuota(t *testing.T, ns string) string {
	t.Helper()
	one := corev1.ResourceList{corev1.ResourceSecrets: resource.MustParse("1")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secrets"}, Spec: corev1.ResourceQuotaSpec{Hard: one}}
	if err := env.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	quota.Status = corev1.ResourceQuotaStatus{Hard: one, Used: one}
	if err := env.Client.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	inForce(t, "the quota", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}})
	return quota.Name
}

// createCleanly creates cluster-scoped objects that are deleted when the test ends.
func createCleanly(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
}
