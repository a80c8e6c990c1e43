package chaos

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// The pool's other claimer. In a landscape, kyma-environment-broker claims credentials of
// the same pool, and a claim is safe only because each claimer writes with the
// resourceVersion it read (optimistic concurrency): of two claims of one credential, one
// fails. The manager claims one credential at a time, so the workload alone never puts a
// second claim in the moment between the manager's read of a free credential and its
// write. The rival does, on purpose: a validating webhook the API server calls for the
// manager's write of a claim claims that credential first (as a correct claimer, with the
// optimistic lock) and then admits the write. The API server then tries the manager's
// write again against the rival's claim: with the manager's resourceVersion in it, it
// fails with a conflict and the manager chooses again; without, it overwrites the rival's
// claim. "pool: claim kept" checks that the rival's claim is still its own when the rival
// releases it, a second later.
const (
	rivalAccount = "rival-account"
	rivalClaimer = "kcp-system/kyma-environment-broker"
	// rivalHold is how long the rival holds a claim; rivalRest how long it then leaves
	// the manager's claims alone, so that a request waiting for the last free credential
	// gets it.
	rivalHold = time.Second
	rivalRest = 5 * time.Second
	// rivalWatches is whose writes the rival's webhook sees: the managers' (they run as
	// their ServiceAccount, Harness.startManagers).
	rivalWatches = "system:serviceaccount:" + ManagerNamespace + ":trustplane-manager"
)

type poolRival struct {
	h *Harness

	mu sync.Mutex
	// held is the claim the rival holds, if any: one at a time.
	held *rivalClaim
	// restUntil is when the rival claims again; stopped: never again (Settle).
	restUntil time.Time
	stopped   bool
	claims    int
}

type rivalClaim struct {
	name, rv string
	at       time.Time
}

// startPoolRival starts the rival's webhook and registers it for updates of the pool's
// credentials by the managers. A webhook that does not answer is ignored (failurePolicy
// Ignore): the rival is the workload, never a fault.
func startPoolRival(ctx context.Context, h *Harness) (*poolRival, error) {
	r := &poolRival{h: h}
	server := httptest.NewTLSServer(http.HandlerFunc(r.admit))
	h.T.Cleanup(server.Close)
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-pool-rival"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "rival.pool.chaos.trustplane.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(server.URL + "/claim"),
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: poolNamespace}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: cp.LabelHyperscalerType, Operator: metav1.LabelSelectorOpExists}}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "manager", Expression: fmt.Sprintf("request.userInfo.username == %q", rivalWatches)}},
			FailurePolicy:   ptr.To(admissionregistrationv1.Ignore),
			// Its side effect is the rival's own claim; it skips dry runs.
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := h.Client.Create(ctx, hook); err != nil {
		return nil, fmt.Errorf("registering the pool rival's webhook: %w", err)
	}
	return r, nil
}

// admit answers every review "allowed"; for a manager's claim of a free credential, it
// first claims that credential itself (unless it holds one or rests).
func (r *poolRival) admit(w http.ResponseWriter, req *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(req.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	if old, claimed, ok := claimOf(review.Request); ok && r.due() {
		r.claim(req.Context(), old, claimed)
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// claimOf reads a review: a manager's update that labels a free credential for a tenant
// (not a dry run), the credential before the update, and whether it is one.
func claimOf(req *admissionv1.AdmissionRequest) (old metav1.ObjectMeta, claimed string, ok bool) {
	var before, after struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if ptr.Deref(req.DryRun, false) || json.Unmarshal(req.OldObject.Raw, &before) != nil || json.Unmarshal(req.Object.Raw, &after) != nil {
		return old, "", false
	}
	_, wasClaimed := before.Metadata.Labels[cp.LabelTenantName]
	tenant, isClaimed := after.Metadata.Labels[cp.LabelTenantName]
	return before.Metadata, tenant, !wasClaimed && isClaimed
}

// due says whether the rival claims now: it holds nothing, does not rest, is not stopped.
func (r *poolRival) due() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.stopped && r.held == nil && time.Now().After(r.restUntil)
}

// claim claims the credential old describes, as it was before the manager's write,
// with the optimistic lock.
func (r *poolRival) claim(ctx context.Context, old metav1.ObjectMeta, managerTenant string) {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"labels":{%q:%q},"annotations":{%q:%q}}}`,
		old.ResourceVersion, cp.LabelTenantName, rivalAccount, cp.AnnotationClaimedBy, rivalClaimer)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: old.Namespace, Name: old.Name}}
	if err := r.h.Client.Patch(ctx, secret, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return // lost to another write, or the API server is away: no claim
	}
	r.mu.Lock()
	r.held = &rivalClaim{name: old.Name, rv: secret.ResourceVersion, at: time.Now()}
	r.claims++
	r.mu.Unlock()
	r.h.Logf("cluster: the pool's other claimer claimed %s (rv %s) while the manager was claiming it for %s", old.Name, secret.ResourceVersion, managerTenant)
}

// check judges the rival's claim, "pool: claim kept": the credential is still labelled
// for the rival; once held rivalHold (at once when stopped), the rival releases it with
// the optimistic lock. It reports whether the rival holds nothing any more.
func (r *poolRival) check(ctx context.Context) bool {
	const invariant = "pool: claim kept"
	r.mu.Lock()
	held, stopped := r.held, r.stopped
	r.mu.Unlock()
	if held == nil {
		return true
	}
	h := r.h
	secret := &corev1.Secret{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: poolNamespace, Name: held.name}, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return false // the API server is away: judged next time
		}
		h.NotJudged(invariant, "credential %s, claimed by the pool's other claimer, is gone", held.name)
		r.drop(false)
		return true
	}
	if secret.Labels[cp.LabelTenantName] != rivalAccount || secret.Annotations[cp.AnnotationClaimedBy] != rivalClaimer {
		h.Check(invariant, false, "credential %s/%s, claimed by the pool's other claimer at rv %s (%s ago, while the manager was claiming it), was claimed over: now labelled %s=%q, claimed by %q (rv %s)",
			poolNamespace, held.name, held.rv, time.Since(held.at).Round(time.Millisecond), cp.LabelTenantName, secret.Labels[cp.LabelTenantName],
			secret.Annotations[cp.AnnotationClaimedBy], secret.ResourceVersion)
		r.drop(false)
		return true
	}
	if !stopped && time.Since(held.at) < rivalHold {
		return false
	}
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"labels":{%q:null},"annotations":{%q:null}}}`,
		secret.ResourceVersion, cp.LabelTenantName, cp.AnnotationClaimedBy)
	if err := h.Client.Patch(ctx, secret, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return false // released next time
	}
	h.Check(invariant, true, "")
	r.drop(true)
	return true
}

// drop forgets the held claim; after a release the rival rests.
func (r *poolRival) drop(released bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = nil
	if released {
		r.restUntil = time.Now().Add(rivalRest)
	}
}

// stop makes the rival claim no more (Settle: the pool must settle without it).
func (r *poolRival) stop() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return r.claims
}
