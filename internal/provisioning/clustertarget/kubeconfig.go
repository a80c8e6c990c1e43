package clustertarget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
)

// MissingSecretError: the kubeconfig Secret a brought-along Cluster names, or its key,
// does not exist. The Secret watch brings the Cluster back when it appears.
type MissingSecretError struct{ msg string }

func (e *MissingSecretError) Error() string { return e.msg }

// IsKubeconfigUnusable says whether err, from BroughtAlongConfig, is a kubeconfig Secret
// or key that is missing, a kubeconfig that does not parse, or one that uses what the
// policy refuses: a change to the Secret fixes it, retrying does not.
func IsKubeconfigUnusable(err error) bool {
	var missing *MissingSecretError
	var refused *tenantkubeconfig.RefusedError
	return errors.As(err, &missing) || errors.Is(err, tenantkubeconfig.ErrInvalid) || errors.As(err, &refused)
}

// BroughtAlongConfig reads the cluster-admin kubeconfig a brought-along Cluster points at,
// through tenantkubeconfig.RESTConfig: only what policy allows is used, the rest refused
// by name. reader should not be a cache: the Secret holds cluster-admin credentials, and
// the manager caches no Secret's data.
func BroughtAlongConfig(ctx context.Context, reader client.Reader, c *operatorv1alpha1.Cluster, policy tenantkubeconfig.Policy) (*rest.Config, error) {
	cfg, _, err := broughtAlongConfig(ctx, reader, c, policy)
	return cfg, err
}

// broughtAlongConfig is BroughtAlongConfig with the SHA-256 of the kubeconfig it read.
func broughtAlongConfig(ctx context.Context, reader client.Reader, c *operatorv1alpha1.Cluster, policy tenantkubeconfig.Policy) (*rest.Config, string, error) {
	ref := c.Spec.KubeconfigSecretRef
	secret := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: ref.Name}, secret); apierrors.IsNotFound(err) {
		return nil, "", &MissingSecretError{fmt.Sprintf("kubeconfig Secret %s not found", ref.Name)}
	} else if err != nil {
		return nil, "", fmt.Errorf("reading kubeconfig Secret %s: %w", ref.Name, err)
	}
	key := ref.Key
	if key == "" {
		key = "kubeconfig"
	}
	raw, ok := secret.Data[key]
	if !ok {
		return nil, "", &MissingSecretError{fmt.Sprintf("kubeconfig Secret %s has no key %q", ref.Name, key)}
	}
	cfg, err := tenantkubeconfig.RESTConfig(raw, policy)
	var refused *tenantkubeconfig.RefusedError
	switch {
	case errors.As(err, &refused):
		return nil, "", fmt.Errorf("kubeconfig Secret %s key %q: %w", ref.Name, key, err)
	case err != nil:
		return nil, "", fmt.Errorf("%w in Secret %s key %q: %w", tenantkubeconfig.ErrInvalid, ref.Name, key, err)
	}
	sum := sha256.Sum256(raw)
	return cfg, hex.EncodeToString(sum[:]), nil
}

// Redact is what a tenant may read of err, a failed call to the target at cfg: for a
// server the tenant chose (a brought-along Cluster's), only the class of the failure and
// the host (tenantkubeconfig.Failure), never what the server answered.
func Redact(cfg *rest.Config, tenantChosen bool, err error) error {
	if !tenantChosen {
		return err
	}
	return tenantkubeconfig.Failure(tenantkubeconfig.HostOf(cfg), err)
}
