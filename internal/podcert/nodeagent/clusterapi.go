package nodeagent

import (
	"context"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterAPI is podcert.API over controller-runtime's client and caches.
type clusterAPI struct {
	client    client.Client
	cache     client.Reader
	apiReader client.Reader
	nodeName  string
}

func (c *clusterAPI) CreatePCR(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	return pcr, c.client.Create(ctx, pcr)
}

func (c *clusterAPI) GetPCR(namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	pcr := &certificatesv1.PodCertificateRequest{}
	return pcr, c.cache.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, pcr)
}

func (c *clusterAPI) ServiceAccountUID(ctx context.Context, namespace, name string) (types.UID, error) {
	sa := &corev1.ServiceAccount{}
	if err := c.apiReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sa); err != nil {
		return "", err
	}
	return sa.UID, nil
}

func (c *clusterAPI) NodeUID(ctx context.Context) (types.UID, error) {
	node := &corev1.Node{}
	if err := c.cache.Get(ctx, client.ObjectKey{Name: c.nodeName}, node); err != nil {
		return "", err
	}
	return node.UID, nil
}
