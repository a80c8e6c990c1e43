package testenv

import (
	"context"
	"time"

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
