package testenv

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DrainWatch watches list in namespace until ctx ends and drops what it shows, watching
// again when the API server ends a watch. A bench's floor keeps the watches a controller
// must keep open with it, so that the API server sends the floor, and the floor decodes,
// the events the controller's informers receive.
func DrainWatch(ctx context.Context, c client.WithWatch, list client.ObjectList, namespace string) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, list, client.InNamespace(namespace))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for range w.ResultChan() {
		}
		w.Stop()
	}
}

// FeedCreated hands each object w shows created to queue once, as a controller's
// informer hands it to its workqueue, until n are queued (then it closes queue) or ctx
// ends; list is the kind's list type, in namespace. A watch the API server ends is caught
// up by a list, and watched again from there. A bench's floor feeds its workers with it.
func FeedCreated[T client.Object](ctx context.Context, c client.WithWatch, w watch.Interface, list client.ObjectList, namespace string, n int, queue chan<- T) error {
	defer close(queue)
	defer func() { w.Stop() }()
	queued := map[string]bool{}
	add := func(obj T) {
		if !queued[obj.GetName()] {
			queued[obj.GetName()] = true
			queue <- obj
		}
	}
	for len(queued) < n {
		select {
		case <-ctx.Done():
			return nil
		case ev, open := <-w.ResultChan():
			if open {
				if obj, ok := ev.Object.(T); ok && ev.Type == watch.Added {
					add(obj)
				}
				continue
			}
			listed := list.DeepCopyObject().(client.ObjectList)
			if err := c.List(ctx, listed, client.InNamespace(namespace)); err != nil {
				return fmt.Errorf("floor: listing: %w", err)
			}
			items, err := meta.ExtractList(listed)
			if err != nil {
				return fmt.Errorf("floor: %w", err)
			}
			for _, item := range items {
				if obj, ok := item.(T); ok {
					add(obj)
				}
			}
			if w, err = c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), client.InNamespace(namespace),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: listed.GetResourceVersion()}}); err != nil {
				return fmt.Errorf("floor: watching again: %w", err)
			}
		}
	}
	return nil
}
