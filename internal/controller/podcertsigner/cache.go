package podcertsigner

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/manager"
)

// podsAndNodes is the signer's own cache of the pods and nodes a request names: every
// request is checked against its pod and node (checkPod), and reading both from the API
// server made three requests of every issuance where the status write is the one needed.
// It holds only what checkPod and checkNode compare (strip), so a cluster's pods cost
// a few hundred bytes each.
func podsAndNodes(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: strip,
		// A cluster's pods listed whole, where the list is not streamed, would be held
		// whole before the transform runs: pages are stripped as they come instead.
		NewInformer: manager.StripListPages(strip, manager.ListPageBytes),
	})
	if err != nil {
		return nil, err
	}
	// Registered now, the informers start with the manager rather than on the first request.
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Node{}} {
		if _, err := c.GetInformer(context.Background(), obj); err != nil {
			return nil, err
		}
	}
	return c, mgr.Add(c)
}

// strip keeps of a pod what checkPod compares, and of a node what checkNode compares.
func strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
				DeletionTimestamp: o.DeletionTimestamp, DeletionGracePeriodSeconds: o.DeletionGracePeriodSeconds},
			Spec: corev1.PodSpec{NodeName: o.Spec.NodeName, ServiceAccountName: o.Spec.ServiceAccountName},
		}, nil
	case *corev1.Node:
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}}, nil
	}
	return obj, nil
}

// checkCachedThenLive runs check against the cache and, unless the cache allows the
// request, again against the API server: a denial is final (the request is concluded),
// so it is never made on a cache that has not seen a new pod or node yet, or still holds
// a replaced one. What the cache allows is issued: a pod or node deleted within the
// watch's lag (milliseconds) may still be served, as it may between a live read and the
// signature.
func (r *Reconciler) checkCachedThenLive(check func(client.Reader) (*Denial, error)) (*Denial, error) {
	if r.Cached != nil {
		if denial, err := check(r.Cached); denial == nil && err == nil {
			return nil, nil
		}
	}
	return check(r.APIReader)
}
