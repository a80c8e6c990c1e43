package clustertarget

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
)

// NotOwnedError: a Shoot of the name a Cluster's Shoot has exists and is not labelled for
// that Cluster (another tool made it, or another tenant's Cluster through a hash
// collision). It is never taken over, deleted or reached into.
type NotOwnedError struct {
	// Shoot is namespace/name of the Shoot.
	Shoot string
	// Namespace and Name are what its owner labels say.
	Namespace, Name string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("shoot %s is labelled %s=%q, %s=%q: it does not belong to this Cluster",
		e.Shoot, operatorv1alpha1.ClusterNamespaceLabel, e.Namespace, operatorv1alpha1.ClusterNameLabel, e.Name)
}

// ShootOf reads the Shoot named name in the garden project through reader (the garden's
// cache or its API reader) and checks that it is c's: nil without an error when there is
// none, a *NotOwnedError when it is someone else's.
func ShootOf(ctx context.Context, reader client.Reader, g *garden.Garden, c *operatorv1alpha1.Cluster, name string) (*unstructured.Unstructured, error) {
	live := garden.NewShoot()
	err := reader.Get(ctx, types.NamespacedName{Namespace: g.Params.Namespace, Name: name}, live)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading shoot %s: %w", name, err)
	}
	if l := live.GetLabels(); l[operatorv1alpha1.ClusterNamespaceLabel] != c.Namespace || l[operatorv1alpha1.ClusterNameLabel] != c.Name {
		return live, &NotOwnedError{Shoot: g.Params.Namespace + "/" + name, Namespace: l[operatorv1alpha1.ClusterNamespaceLabel], Name: l[operatorv1alpha1.ClusterNameLabel]}
	}
	return live, nil
}
