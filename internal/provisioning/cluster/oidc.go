package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/apply"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// authentication is the structured-authentication step of one Shoot apply: the Cluster's
// OIDC goes to the garden as a ConfigMap in the project namespace (Gardener forbids
// kubeAPIServer.oidcConfig for Kubernetes >= 1.32), which must exist before the Shoot
// names it, belongs to the Shoot and goes with it.
type authentication struct {
	configMap *corev1.ConfigMap // nil: the Cluster has no OIDC
	// shootUID is the Shoot's before the apply; empty: the Shoot is new.
	shootUID types.UID
	// stale is the ConfigMap the live Shoot names and the desired one no longer does.
	stale string
}

// applyAuthentication writes the Cluster's AuthenticationConfiguration ConfigMap before
// its Shoot is applied (server-side apply, FieldOwner), owned by the Shoot when the Shoot
// exists already, and marks desired with its hash. Nothing is written when the live Shoot
// carries that hash: the ConfigMap was applied for it already.
func (r *Reconciler) applyAuthentication(ctx context.Context, s *scope) error {
	auth, err := r.authentication(ctx, s.c, s.desired)
	s.auth = auth
	return err
}

func (r *Reconciler) authentication(ctx context.Context, c *operatorv1alpha1.Cluster, desired *unstructured.Unstructured) (*authentication, error) {
	cm, err := shoot.AuthenticationConfigMap(c, r.Garden.Params)
	var invalid *shoot.InvalidError
	switch {
	case errors.As(err, &invalid):
		return nil, stall(c, operatorv1alpha1.ReasonInvalidSpec, err.Error())
	case err != nil:
		return nil, err
	}
	auth := &authentication{configMap: cm}
	live := garden.NewShoot()
	err = r.Garden.Cache.Get(ctx, types.NamespacedName{Namespace: desired.GetNamespace(), Name: desired.GetName()}, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, gardenUnreachable(c, fmt.Errorf("reading shoot %s: %w", desired.GetName(), err))
	default:
		auth.shootUID = live.GetUID()
		named, _, _ := unstructured.NestedString(live.Object, "spec", "kubernetes", "kubeAPIServer", "structuredAuthentication", "configMapName")
		if named != "" && (cm == nil || cm.Name != named) {
			auth.stale = named
		}
	}
	if cm == nil {
		return auth, nil
	}
	hash := authenticationHash(cm)
	annotations := desired.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[operatorv1alpha1.AuthenticationHashAnnotation] = hash
	desired.SetAnnotations(annotations)
	if live != nil && live.GetAnnotations()[operatorv1alpha1.AuthenticationHashAnnotation] == hash {
		return auth, nil
	}
	return auth, r.writeAuthentication(ctx, c, desired, cm, auth.shootUID)
}

// finishAuthentication runs after the Shoot was applied: a ConfigMap written for a new
// Shoot gets the Shoot as its owner (so the garden's garbage collector removes it with
// the Shoot), and a ConfigMap the Shoot no longer names is deleted.
func (r *Reconciler) finishAuthentication(ctx context.Context, s *scope) error {
	c, applied, auth := s.c, s.desired, s.auth
	if auth.configMap != nil && auth.shootUID == "" && applied.GetUID() != "" {
		if err := r.writeAuthentication(ctx, c, applied, auth.configMap, applied.GetUID()); err != nil {
			return err
		}
	}
	if auth.stale != "" {
		return r.deleteAuthenticationConfigMap(ctx, c, applied, auth.stale)
	}
	return nil
}

func (r *Reconciler) writeAuthentication(ctx context.Context, c *operatorv1alpha1.Cluster, s *unstructured.Unstructured, cm *corev1.ConfigMap, shootUID types.UID) error {
	cm = cm.DeepCopy()
	if shootUID != "" {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: shoot.GVK.GroupVersion().String(), Kind: shoot.GVK.Kind,
			Name: s.GetName(), UID: shootUID}}
	}
	if err := apply.Apply(ctx, r.Garden.Client, cm, FieldOwner); err != nil {
		return gardenWriteFailed(c, "apply the authentication ConfigMap "+cm.Name+" of", s, err)
	}
	return nil
}

// deleteAuthentication removes the Cluster's authentication ConfigMap once its Shoot is
// gone. The garden's garbage collector would too, through the owner reference; this does
// not wait for it (and covers a ConfigMap whose owner was never set).
func (r *Reconciler) deleteAuthentication(ctx context.Context, sc *scope) error {
	c := sc.c
	if r.Garden == nil {
		return nil
	}
	s := garden.NewShoot()
	s.SetNamespace(r.Garden.Params.Namespace)
	s.SetName(r.Garden.Params.NameOf(c))
	return r.deleteAuthenticationConfigMap(ctx, c, s, shoot.AuthenticationConfigMapName(s.GetName()))
}

// deleteAuthenticationConfigMap deletes the named ConfigMap of the Shoot s, only if this
// Cluster made it (its labels), and only that object (its UID).
func (r *Reconciler) deleteAuthenticationConfigMap(ctx context.Context, c *operatorv1alpha1.Cluster, s *unstructured.Unstructured, name string) error {
	// Unstructured: read uncached, without a ConfigMap informer on the garden.
	cm := &unstructured.Unstructured{}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	err := r.Garden.Client.Get(ctx, types.NamespacedName{Namespace: r.Garden.Params.Namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return gardenUnreachable(c, fmt.Errorf("reading the authentication ConfigMap %s: %w", name, err))
	}
	if l := cm.GetLabels(); l[operatorv1alpha1.ClusterNamespaceLabel] != c.Namespace || l[operatorv1alpha1.ClusterNameLabel] != c.Name {
		return nil
	}
	uid := cm.GetUID()
	if err := client.IgnoreNotFound(r.Garden.Client.Delete(ctx, cm, client.Preconditions{UID: &uid})); err != nil && !apierrors.IsConflict(err) {
		return gardenWriteFailed(c, "delete the authentication ConfigMap "+name+" of", s, err)
	}
	return nil
}

// authenticationHash is a short hash of the ConfigMap's data.
func authenticationHash(cm *corev1.ConfigMap) string {
	sum := sha256.Sum256([]byte(cm.Data[shoot.AuthenticationConfigKey]))
	return hex.EncodeToString(sum[:16])
}
