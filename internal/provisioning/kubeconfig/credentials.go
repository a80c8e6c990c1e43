package kubeconfig

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/status"
)

// The credentials a request holds are listed in status.credentials, by token ID (the JTI,
// as kube-apiserver's audit log names each token) and token binding, never by token. The
// list follows the bindings: an issue adds one, a prune, a revoke or a withdrawal takes
// them away. The credential status.kubeconfig holds is always on it, unless it was
// revoked: that is how a revoke whose new kubeconfig was not issued yet is still seen
// after a restart.

// recordCredential adds the credential just issued (its token, bound to binding) to the
// front of the list.
func recordCredential(kr *operatorv1alpha1.KubeconfigRequest, token, binding string, issuedAt, expires time.Time) {
	c := operatorv1alpha1.IssuedCredential{ID: access.ClaimsOf(token).CredentialID, Binding: binding,
		IssuedAt: metav1.Time{Time: issuedAt}, ExpirationTimestamp: metav1.Time{Time: expires}}
	kr.Status.Credentials = slices.Insert(slices.DeleteFunc(kr.Status.Credentials, func(o operatorv1alpha1.IssuedCredential) bool { return o.Binding == binding }), 0, c)
}

// forgetCredentials drops from the list the credentials whose bindings were deleted, and
// those expired by now.
func forgetCredentials(kr *operatorv1alpha1.KubeconfigRequest, deleted []string, now time.Time) {
	kr.Status.Credentials = slices.DeleteFunc(kr.Status.Credentials, func(c operatorv1alpha1.IssuedCredential) bool {
		return slices.Contains(deleted, c.Binding) || !now.Before(c.ExpirationTimestamp.Time)
	})
}

// currentCredential is the credential status.kubeconfig holds, as its token says:
// its binding and ID; zero when there is none or its token cannot be read.
func currentCredential(kr *operatorv1alpha1.KubeconfigRequest) access.TokenClaims {
	raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
	if err != nil {
		return access.TokenClaims{}
	}
	return access.KubeconfigClaims(raw)
}

// backfillCredentials lists the current credential of a request issued before
// status.credentials existed, from its token and the status, so that an upgrade neither
// re-issues nor loses track of it. A request that revoked credentials already has a list
// (or had its current one revoked) and is left alone.
func backfillCredentials(kr *operatorv1alpha1.KubeconfigRequest) {
	if len(kr.Status.Credentials) > 0 || kr.Status.LastHandledRevokeCredential != "" || kr.Status.IssuedAt == nil || kr.Status.ExpirationTimestamp == nil {
		return
	}
	current := currentCredential(kr)
	if current.BoundSecret == "" {
		return
	}
	kr.Status.Credentials = []operatorv1alpha1.IssuedCredential{{ID: current.CredentialID, Binding: current.BoundSecret,
		IssuedAt: *kr.Status.IssuedAt, ExpirationTimestamp: *kr.Status.ExpirationTimestamp}}
}

// currentRevoked: the credential status.kubeconfig holds was revoked by ID, and a new one
// is due.
func currentRevoked(kr *operatorv1alpha1.KubeconfigRequest) bool {
	if kr.Status.LastHandledRevokeCredential == "" {
		// Never revoked by ID: the current credential is listed (issued or backfilled),
		// and every reconcile need not parse the kubeconfig to know it.
		return false
	}
	current := currentCredential(kr).BoundSecret
	return current != "" && !slices.ContainsFunc(kr.Status.Credentials, func(c operatorv1alpha1.IssuedCredential) bool { return c.Binding == current })
}

// revokeCredentialIfAsked revokes the one credential the annotation revoke-credential
// names by ID, unless that value was handled already: its token binding in the target
// is deleted (the API server refuses its token from then on), and it leaves the list.
// The others stay valid. Revoking the current credential makes the issue phase issue a
// new kubeconfig in the same reconcile (currentRevoked).
func (r *Reconciler) revokeCredentialIfAsked(ctx context.Context, s *scope) (reconcile.Result, error) {
	kr, target := s.kr, s.target
	id := kr.Annotations[operatorv1alpha1.RevokeCredentialAnnotation]
	handled := handledRevoke(id)
	if id == "" || handled == kr.Status.LastHandledRevokeCredential {
		return reconcile.Result{}, nil
	}
	i := slices.IndexFunc(kr.Status.Credentials, func(c operatorv1alpha1.IssuedCredential) bool { return c.ID == id })
	if i < 0 {
		kr.Status.LastHandledRevokeCredential = handled
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonCredentialNotFound, "RevokeCredential",
			"no live credential of this request has ID %.80q (live: %s); nothing was revoked", id, credentialIDs(kr))
		return reconcile.Result{}, nil
	}
	c := kr.Status.Credentials[i]
	if err := target.Down(); err != nil {
		return reconcile.Result{}, targetUnreachable(target, err)
	}
	binding := &corev1.Secret{}
	err := target.Client.Get(ctx, client.ObjectKey{Namespace: TargetNamespace, Name: c.Binding}, binding)
	switch {
	case apierrors.IsNotFound(err):
		// Revoked already (a reconcile whose status write was lost), or deleted by hand.
	case err != nil:
		return reconcile.Result{}, targetUnreachable(target, err)
	case binding.Labels[RequestLabel] != access.TargetName(kr):
		// A status naming another request's binding (forged, where admission lets a
		// tenant write status at all): never deleted for this request, and not its
		// credential to list.
		kr.Status.Credentials = slices.Delete(kr.Status.Credentials, i, i+1)
		kr.Status.LastHandledRevokeCredential = handled
		r.Recorder.Eventf(kr, nil, corev1.EventTypeWarning, operatorv1alpha1.ReasonCredentialNotFound, "RevokeCredential",
			"status.credentials named token binding %s for %s, which is not this request's; nothing was revoked", c.Binding, id)
		return reconcile.Result{}, nil
	default:
		if err := client.IgnoreNotFound(target.Client.Delete(ctx, binding, client.Preconditions{UID: &binding.UID})); err != nil {
			return reconcile.Result{}, targetUnreachable(target, status.WriteFailed("delete", binding, err))
		}
	}
	kr.Status.Credentials = slices.Delete(kr.Status.Credentials, i, i+1)
	kr.Status.LastHandledRevokeCredential = handled
	note := ""
	if currentRevoked(kr) {
		note = "; it was the current one: a new kubeconfig is issued"
	}
	r.Recorder.Eventf(kr, nil, corev1.EventTypeNormal, operatorv1alpha1.ReasonCredentialRevoked, "RevokeCredential",
		"revoked credential %s (token binding %s); the others stay valid%s", id, c.Binding, note)
	return reconcile.Result{}, nil
}

// handledRevoke is what status.lastHandledRevokeCredential records for the annotation's
// value: the value itself, or, for one longer than any credential ID (the annotation is
// the tenant's to write, the status field is bounded), its SHA-256; a value the status
// could not hold would make every status write of the request fail.
func handledRevoke(value string) string {
	if len(value) <= maxCredentialIDLength {
		return value
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(value)))
}

// maxCredentialIDLength is the longest credential ID status.credentials admits.
const maxCredentialIDLength = 128

// credentialIDs lists the IDs of the request's live credentials, for a message.
func credentialIDs(kr *operatorv1alpha1.KubeconfigRequest) string {
	ids := make([]string, 0, len(kr.Status.Credentials))
	for _, c := range kr.Status.Credentials {
		ids = append(ids, c.ID)
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
