// Package garden connects trustplane to a Gardener project: a watched cache of its Shoots,
// a client to apply and delete them, and short-lived admin kubeconfigs for them through
// the shoots/adminkubeconfig subresource, which are kept in memory only.
package garden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// Connect makes the garden for mgr (nil when no garden is configured). Call it once per
// manager: internal/cli hands the one garden to every controller that needs it.
func (o *Options) Connect(mgr ctrl.Manager) (*Garden, error) {
	if o.Kubeconfig == "" {
		return nil, nil
	}
	// A bad Shoot setting fails the start, not every Cluster later.
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--garden-kubeconfig: %w", err)
	}
	return New(mgr, cfg, o.Shoot, o.AdminKubeconfigExpiration)
}

// CacheSyncTimeout is how long a controller that watches the garden waits for its cache at
// start: until the garden answers. With controller-runtime's default (give up after 2
// minutes) a garden that does not answer when the manager starts would make the whole
// manager exit, and every other controller and the JWKS server with it.
const CacheSyncTimeout = 100 * 365 * 24 * time.Hour

// Garden is one Gardener project.
type Garden struct {
	// Params are the settings of every Shoot; Params.Namespace is the project namespace.
	Params shoot.Params
	// Cache watches the project's Shoots (started with the manager).
	Cache cache.Cache
	// Client writes Shoots; it reads them uncached (unstructured objects bypass the cache).
	Client client.Client
	// APIReader reads the garden uncached, whatever the object's type (a fresh view of
	// the credential pool after a lost claim).
	APIReader client.Reader

	rest       rest.Interface
	expiration time.Duration
}

// New connects to the garden at cfg and adds its Shoot cache to mgr.
func New(mgr ctrl.Manager, cfg *rest.Config, params shoot.Params, adminExpiration time.Duration) (*Garden, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	cl, err := cluster.New(cfg, func(o *cluster.Options) {
		o.Scheme = mgr.GetScheme()
		o.Cache.DefaultNamespaces = map[string]cache.Config{params.Namespace: {}}
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to the garden: %w", err)
	}
	if err := mgr.Add(cl); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Garden{Params: params, Cache: cl.GetCache(), Client: cl.GetClient(), APIReader: cl.GetAPIReader(), rest: kube.CoreV1().RESTClient(), expiration: adminExpiration}, nil
}

// NewShoot is an empty Shoot object to read into.
func NewShoot() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(shoot.GVK)
	return u
}

// AdminConfig asks Gardener for a short-lived cluster-admin kubeconfig of the Shoot and
// returns it as a client configuration, with when it expires. Nothing is stored.
func (g *Garden) AdminConfig(ctx context.Context, shootName string) (*rest.Config, time.Time, error) {
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "authentication.gardener.cloud/v1alpha1", "kind": "AdminKubeconfigRequest",
		"spec": map[string]any{"expirationSeconds": int64(g.expiration / time.Second)},
	})
	raw, err := g.rest.Post().AbsPath("/apis", shoot.GVK.Group, shoot.GVK.Version, "namespaces", g.Params.Namespace, "shoots", shootName, "adminkubeconfig").
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("requesting an admin kubeconfig for shoot %s: %w", shootName, err)
	}
	var answer struct {
		Status struct {
			Kubeconfig          []byte    `json:"kubeconfig"`
			ExpirationTimestamp time.Time `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, time.Time{}, fmt.Errorf("admin kubeconfig of shoot %s: %w", shootName, err)
	}
	if len(answer.Status.Kubeconfig) == 0 {
		return nil, time.Time{}, errors.New("admin kubeconfig of shoot " + shootName + ": empty answer")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(answer.Status.Kubeconfig)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("admin kubeconfig of shoot %s: %w", shootName, err)
	}
	return cfg, answer.Status.ExpirationTimestamp, nil
}
