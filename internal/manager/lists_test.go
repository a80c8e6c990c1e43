package manager

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestListPagesAreStrippedOneByOne: a list that is not streamed is read from etcd (not
// the watch cache, which ignores the limit) in pages sized to the Secrets seen so far,
// and every page is stripped before it is returned, so the informer never gathers whole
// objects.
func TestListPagesAreStrippedOneByOne(t *testing.T) {
	// What the secret-checksum and tls-expiry caches keep of a Secret is less than this;
	// dropping data and labels is enough to see that a page was stripped.
	strip := func(obj any) (any, error) {
		if s, ok := obj.(*corev1.Secret); ok {
			s.Data, s.Labels = nil, nil
		}
		return obj, nil
	}
	var asked []metav1.ListOptions
	size := 900_000
	list := func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		asked = append(asked, opts)
		page := &corev1.SecretList{}
		for range opts.Limit {
			page.Items = append(page.Items, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"a": "b"}},
				Data: map[string][]byte{corev1.TLSCertKey: make([]byte, size)}})
		}
		return page, nil
	}
	paged := stripPages(list, strip, 9_100_000)
	get := func(opts metav1.ListOptions) {
		t.Helper()
		out, err := paged(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range out.(*corev1.SecretList).Items {
			if s.Data != nil || s.Labels != nil {
				t.Fatalf("a page reached the informer unstripped: %d data keys, labels %v", len(s.Data), s.Labels)
			}
		}
	}
	get(metav1.ListOptions{ResourceVersion: "0", Limit: 500})
	get(metav1.ListOptions{Limit: 500, Continue: "next"})
	size = 1000
	get(metav1.ListOptions{Limit: 500, Continue: "next"})
	get(metav1.ListOptions{Limit: 500, Continue: "next"})
	if asked[0].Limit != minListPage || asked[0].ResourceVersion != "" {
		t.Errorf("first list: limit %d, resourceVersion %q; want %d from etcd", asked[0].Limit, asked[0].ResourceVersion, minListPage)
	}
	if asked[1].Limit != 10 || asked[1].Continue != "next" {
		t.Errorf("after 900 KB Secrets: %+v; want pages of 10 (9.1 MB)", asked[1])
	}
	if asked[3].Limit != maxListPage {
		t.Errorf("after small Secrets: limit %d; want %d", asked[3].Limit, maxListPage)
	}
}
