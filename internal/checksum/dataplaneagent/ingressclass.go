package dataplaneagent

import (
	"context"
	"fmt"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/internal/checksum"
)

// ingressClasses gives the ingresses track the IngressClasses that Tengine-Ingress's class
// rules read. They are cluster-scoped, which a sidecar's namespaced Role cannot grant, so
// the agent starts watching them only once it may list them (Tengine-Ingress checks the
// same way, cmd/nginx/main.go). Until then the ingresses track is not verified and the log
// says why; the secrets track never waits for a watch that cannot sync.
type ingressClasses struct {
	ignored bool          // --ignore-ingress-class: the rules read none
	api     client.Reader // uncached, for the permission check
	cache   client.Reader
	ctrl    controller.Controller
	watch   source.Source

	mu       sync.Mutex
	watching bool
	denied   bool // the denial was logged
}

func newIngressClasses(ignored bool, api client.Reader, c cache.Cache, ctrl controller.Controller, onChange handler.EventHandler) *ingressClasses {
	return &ingressClasses{ignored: ignored, api: api, cache: c, ctrl: ctrl,
		watch: source.Kind[client.Object](c, &networkingv1.IngressClass{}, onChange)}
}

// lookup returns the cluster's IngressClasses, or ok false while the agent may not read
// them (checked again on every change: a ClusterRoleBinding added later takes effect).
func (c *ingressClasses) lookup(ctx context.Context) (lookup checksum.IngressClassLookup, ok bool, err error) {
	if c.ignored {
		return func(string) (string, bool) { return "", false }, true, nil
	}
	if ok, err := c.readable(ctx); !ok || err != nil {
		return nil, false, err
	}
	list := &networkingv1.IngressClassList{}
	if err := c.cache.List(ctx, list); err != nil {
		return nil, false, fmt.Errorf("listing IngressClasses: %w", err)
	}
	controllers := make(map[string]string, len(list.Items))
	for _, class := range list.Items {
		controllers[class.Name] = class.Spec.Controller
	}
	return func(name string) (string, bool) {
		controller, exists := controllers[name]
		return controller, exists
	}, true, nil
}

// readable starts the watch once the agent may list IngressClasses.
func (c *ingressClasses) readable(ctx context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watching {
		return true, nil
	}
	err := c.api.List(ctx, &networkingv1.IngressClassList{}, client.Limit(1))
	switch {
	case apierrors.IsForbidden(err):
		if !c.denied {
			log.FromContext(ctx).Info("cannot read IngressClasses, so Ingresses are not verified: bind the ClusterRole trustplane-dataplane to this agent's ServiceAccount (docs/checksum.md); checked again on every change",
				"error", err.Error())
			c.denied = true
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("checking whether IngressClasses can be read: %w", err)
	}
	if err := c.ctrl.Watch(c.watch); err != nil {
		return false, fmt.Errorf("watching IngressClasses: %w", err)
	}
	c.watching = true
	if c.denied {
		log.FromContext(ctx).Info("IngressClasses can be read now: verifying Ingresses")
	}
	return true, nil
}
