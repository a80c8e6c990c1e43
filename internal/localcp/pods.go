package localcp

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// podRetryPeriod is how often FinishPodDeletions looks at its pods again, retrying what
// failed.
const podRetryPeriod = 30 * time.Second

// FinishPodDeletions stands in for the kubelet of node, for the one thing `kubectl delete`
// needs of it, until ctx ends. A pod on a node is deleted in two steps: the API server
// marks it terminating, and the node's kubelet stops its containers and then removes it
// (grace period 0). The samples' node has no kubelet and its pods run no containers, so
// this removes them as soon as they are marked; otherwise they, and the namespaces
// holding them, would stay Terminating for ever. report hears of each failure; it is
// retried every podRetryPeriod. Only pods on node are touched.
func FinishPodDeletions(ctx context.Context, cfg *rest.Config, node string, report func(error)) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, podRetryPeriod,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
		}))
	finish := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp != nil {
			if err := removePod(ctx, cs, pod); err != nil {
				report(err)
			}
		}
	}
	_, err = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    finish,
		UpdateFunc: func(_, obj any) { finish(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// removePod deletes a terminating pod at once, as kubelet does once its containers have
// stopped; only this pod, not one created since under the same name.
func removePod(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod) error {
	err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("removing terminating pod %s/%s of node %s: %w", pod.Namespace, pod.Name, pod.Spec.NodeName, err)
}
