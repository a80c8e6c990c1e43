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
// It holds only what checkPod compares (stripPod, stripNode), so a cluster's pods cost
// a few hundred bytes each.
func podsAndNodes(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: stripPod},
			&corev1.Node{}: {Transform: stripNode},
		},
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
	return c, manager.AddCache(mgr, c)
}

// stripPod keeps of a pod what checkPod compares.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			DeletionTimestamp: pod.DeletionTimestamp, DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName, ServiceAccountName: pod.Spec.ServiceAccountName},
	}, nil
}

// stripNode keeps of a node what checkNode compares.
func stripNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, UID: node.UID, ResourceVersion: node.ResourceVersion}}, nil
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
