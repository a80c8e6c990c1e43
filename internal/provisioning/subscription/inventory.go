package subscription

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/credentialpool"
)

// The pool's inventory, as kyma-environment-broker exports it (kcp_keb_v2_available_,
// claimed_, dirty_ and shared_credentials_bindings, instances_per_credentials_binding),
// counted from the controller's cache of the pool when scraped.
var (
	availableDesc = prometheus.NewDesc("trustplane_pool_available_credentials",
		"Free dedicated credentials of the pool (no tenantName, not shared, not dirty), by hyperscalerType.", []string{"hyperscaler_type"}, nil)
	claimedDesc = prometheus.NewDesc("trustplane_pool_claimed_credentials",
		"Credentials of the pool labelled tenantName, by hyperscalerType and global account.", []string{"hyperscaler_type", "tenant_name"}, nil)
	dirtyDesc = prometheus.NewDesc("trustplane_pool_dirty_credentials",
		"Credentials of the pool labelled dirty=true, waiting to be cleaned and handed back, by hyperscalerType.", []string{"hyperscaler_type"}, nil)
	sharedDesc = prometheus.NewDesc("trustplane_pool_shared_credentials",
		"Shared credentials of the pool, by hyperscalerType.", []string{"hyperscaler_type"}, nil)
	instancesDesc = prometheus.NewDesc("trustplane_pool_instances_per_credential",
		"Users of a credential of the pool: SubscriptionRequests assigned it and Shoots naming it.", []string{"credential"}, nil)
	onHoldDesc = prometheus.NewDesc("trustplane_pool_on_hold",
		"1 while the operator holds the pool (annotation "+cp.AnnotationPoolHold+" on the pool's Namespace): no credential is claimed or released.", nil, nil)
)

// inventory collects the pool's inventory of the controller running in this process, if
// any (the package's Collectors register it before the controller is set up).
type inventory struct {
	source atomic.Pointer[Reconciler]
}

var poolInventory = &inventory{}

// inventoryTimeout bounds a scrape's reads of the caches.
const inventoryTimeout = 5 * time.Second

func (i *inventory) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{availableDesc, claimedDesc, dirtyDesc, sharedDesc, instancesDesc, onHoldDesc} {
		ch <- d
	}
}

// Collect counts the pool now; a pool it cannot read (caches not synced yet) gives no
// series rather than wrong ones.
func (i *inventory) Collect(ch chan<- prometheus.Metric) {
	r := i.source.Load()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), inventoryTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	if _, held, err := r.hold(ctx); err == nil {
		gauge(onHoldDesc, map[bool]int{false: 0, true: 1}[held])
	}
	inv, err := r.inventory(ctx)
	if err != nil {
		return
	}
	for typ, n := range inv.Available {
		gauge(availableDesc, n, typ)
	}
	for key, n := range inv.Claimed {
		gauge(claimedDesc, n, key[0], key[1])
	}
	for typ, n := range inv.Dirty {
		gauge(dirtyDesc, n, typ)
	}
	for typ, n := range inv.Shared {
		gauge(sharedDesc, n, typ)
	}
	for name, n := range inv.Instances {
		gauge(instancesDesc, n, name)
	}
}

// inventory counts the pool from the caches.
func (r *Reconciler) inventory(ctx context.Context) (credentialpool.Inventory, error) {
	entries := r.pool.newList()
	if err := r.pool.cache.List(ctx, entries, client.InNamespace(r.pool.namespace), client.HasLabels{cp.LabelHyperscalerType}); err != nil {
		return credentialpool.Inventory{}, err
	}
	pool := make([]credentialpool.Credential, len(entries.Items))
	for i, e := range entries.Items {
		pool[i] = credentialpool.Credential{Name: e.Name, Labels: e.Labels}
	}
	users, err := r.users(ctx, r.pool.namespace)
	if err != nil {
		return credentialpool.Inventory{}, err
	}
	counts := make(map[string]int, len(users))
	for name, u := range users {
		counts[name] = len(u)
	}
	return credentialpool.Count(pool, counts), nil
}
