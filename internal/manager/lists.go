package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
)

// ListPageBytes is about how much Secret data a list that is not streamed brings at a
// time; pages hold at least minListPage and at most maxListPage objects.
const (
	ListPageBytes = 8 << 20
	minListPage   = 5
	maxListPage   = 500 // client-go's own page size
)

// StripListPages is a cache.Options.NewInformer that bounds what an informer holds while
// it lists. client-go streams the initial list (WatchListClient) where the API server
// can, and the cache transform then strips each object as it arrives. Where it cannot
// (an older API server, a fallback after an error), the reflector gathers the whole list
// before any transform runs: 400 Secrets with a 900 KB tls.crt are 400 MB at once. So
// lists are read from etcd in pages (resourceVersion "0" would let the watch cache answer
// in one piece, whatever the limit) of about pageBytes of Secret data — the next page's
// size follows the Secrets seen so far — and each page is transformed before the next is
// fetched: only one page of whole objects is ever held.
func StripListPages(transform toolscache.TransformFunc, pageBytes int) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if l, ok := lw.(*toolscache.ListWatch); ok && l.ListWithContextFunc != nil {
			paged := *l // the same type, so the reflector still streams where it can
			paged.ListWithContextFunc = stripPages(l.ListWithContextFunc, transform, pageBytes)
			lw = &paged
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
}

func stripPages(list toolscache.ListWithContextFunc, transform toolscache.TransformFunc, pageBytes int) toolscache.ListWithContextFunc {
	var mu sync.Mutex
	limit := int64(minListPage) // the first page finds out how large objects are
	return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		mu.Lock()
		if opts.Limit == 0 || opts.Limit > limit {
			opts.Limit = limit
		}
		mu.Unlock()
		if opts.ResourceVersion == "0" && opts.Continue == "" {
			opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
		}
		page, err := list(ctx, opts)
		if err != nil {
			return page, err
		}
		items, size := 0, 0
		// The transform strips in place; the informer may transform the copy again.
		err = meta.EachListItem(page, func(o runtime.Object) error {
			items++
			size += dataBytes(o)
			_, err := transform(o)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("stripping a list page: %w", err)
		}
		if items > 0 {
			mu.Lock()
			limit = min(max(int64(pageBytes/max(size/items, 1)), minListPage), maxListPage)
			mu.Unlock()
		}
		return page, nil
	}
}

// dataBytes is what a Secret brings beyond its metadata; other objects count as small.
func dataBytes(o runtime.Object) int {
	s, ok := o.(*corev1.Secret)
	if !ok {
		return 1024
	}
	n := 1024
	for _, v := range s.Data {
		n += len(v)
	}
	for _, v := range s.Annotations {
		n += len(v)
	}
	return n
}
