package chaos

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/testcerts"
)

const canaryNamespace = "chaos-canary"

// canary is a JWKSConfig the harness asks to be reconciled (Flux's requestedAt pattern,
// reconcile.trustplane.io/requestedAt) to tell that the manager's leader works: that is
// how long a fault's recovery takes as a user of any controller sees it.
type canary struct {
	h   *Harness
	key client.ObjectKey
}

func newCanary(h *Harness) *canary {
	return &canary{h: h, key: client.ObjectKey{Namespace: canaryNamespace, Name: "canary"}}
}

func (c *canary) setup(ctx context.Context) error {
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		return err
	}
	chain, err := testcerts.NewChain(key, "canary.example.com", time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour))
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: canaryNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: canaryNamespace, Name: "canary-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}},
		&jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: canaryNamespace, Name: c.key.Name},
			Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "canary-tls", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}},
	} {
		if err := c.h.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// reconciled asks for a reconcile with token and waits up to timeout for the status to
// say it was handled. API errors (a fault still going on) are retried.
func (c *canary) reconciled(ctx context.Context, token string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	requested := false
	for time.Now().Before(deadline) {
		cfg := &jwksv1alpha1.JWKSConfig{}
		if err := c.h.Client.Get(ctx, c.key, cfg); err == nil {
			switch {
			case cfg.Status.LastHandledReconcileAt == token:
				return true
			case !requested || cfg.Annotations[conditions.ReconcileRequestedAnnotation] != token:
				patch := client.MergeFrom(cfg.DeepCopy())
				if cfg.Annotations == nil {
					cfg.Annotations = map[string]string{}
				}
				cfg.Annotations[conditions.ReconcileRequestedAnnotation] = token
				requested = c.h.Client.Patch(ctx, cfg, patch) == nil
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return false
}
