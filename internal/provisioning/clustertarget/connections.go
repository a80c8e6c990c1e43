package clustertarget

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/provisioning/access"
	"github.com/trustplane/trustplane/internal/provisioning/garden"
	"github.com/trustplane/trustplane/internal/provisioning/tenantkubeconfig"
	"github.com/trustplane/trustplane/internal/status"
)

// defaultTimeout bounds each request to a target whose config sets none (a Gardener admin
// kubeconfig; a brought-along one carries the policy's --cluster-target-timeout).
const defaultTimeout = 15 * time.Second

// UnreachableFor is how long a target found unreachable is not tried again: every
// reconcile meanwhile gets what was found at once (a DownError from Target.Prepare or
// Target.Down), instead of each holding a worker for a timeout. Short, so a target back up is used again within seconds.
const UnreachableFor = 10 * time.Second

var (
	// ErrPreparing: another reconcile is preparing the target now; retry shortly.
	ErrPreparing = errors.New("another reconcile is preparing this cluster; retrying")
	// ErrClusterGone: the Cluster does not exist (any more).
	ErrClusterGone = errors.New("cluster not found")
	// ErrNoWayIn: the Cluster is going and its kubeconfig went first (its namespace is
	// being deleted, say): nothing will let us into the target again.
	ErrNoWayIn = errors.New("no way into the target cluster any more")
)

// Target is a connection to a Cluster's target cluster.
type Target struct {
	// Name is the Cluster's name, UID its UID.
	Name   string
	UID    types.UID
	Config *rest.Config
	Client client.Client
	Kube   kubernetes.Interface
	// TenantServer: the server is the tenant's choice (a brought-along Cluster): its
	// answers never reach a status (Redact).
	TenantServer bool

	key       types.NamespacedName // the Cluster's
	version   string               // of the kubeconfig Secret it was made from (brought along)
	hash      string               // of the kubeconfig it was made from (brought along)
	refreshAt time.Time            // when a fresh admin kubeconfig is due (Gardener)
	clock     clock.PassiveClock
	closeIdle func()

	mu        sync.Mutex
	prepared  bool // prepare succeeded
	preparing bool // a prepare runs now
	// whenPrepared are the callers told ErrPreparing, called when that prepare ends.
	whenPrepared []func()
	downUntil    time.Time // found unreachable: answering downErr until then
	downErr      error
}

// close closes the connection's idle sockets (a nil Target has none).
func (t *Target) close() {
	if t != nil && t.closeIdle != nil {
		t.closeIdle()
	}
}

// Endpoint is where the connection reaches the target and what it trusts there: what an
// issued kubeconfig must say to work as the connection does.
func (t *Target) Endpoint() access.Endpoint {
	return access.Endpoint{Server: t.Config.Host, CAData: t.Config.CAData, TLSServerName: t.Config.ServerName}
}

// Redact is what a tenant may read of err, a failed call to this target.
func (t *Target) Redact(err error) error { return Redact(t.Config, t.TenantServer, err) }

// Prepare runs prepare once per connection (again after a failure): what a controller
// sets up in a target before its first use there. It never makes a worker wait on
// another: while one reconcile prepares, the others get ErrPreparing at once; and for
// UnreachableFor after the target was found unreachable (by prepare or by Unreachable),
// every caller gets that failure at once. So a dead target costs one timeout per
// UnreachableFor, not one per reconcile, and holds no worker while it is down. A caller
// told ErrPreparing has whenPrepared (if not nil) called once that prepare ends, to come
// back then rather than poll.
func (t *Target) Prepare(prepare func() error, whenPrepared func()) error {
	t.mu.Lock()
	if err := t.downLocked(); err != nil {
		t.mu.Unlock()
		return err
	}
	if t.prepared {
		t.mu.Unlock()
		return nil
	}
	if t.preparing {
		if whenPrepared != nil {
			t.whenPrepared = append(t.whenPrepared, whenPrepared)
		}
		t.mu.Unlock()
		return ErrPreparing
	}
	t.preparing = true
	t.mu.Unlock()

	err := prepare()
	t.mu.Lock()
	t.preparing = false
	if err != nil {
		t.observeLocked(err)
	} else {
		t.prepared = true
	}
	waiting := t.whenPrepared
	t.whenPrepared = nil
	t.mu.Unlock()
	for _, f := range waiting {
		f()
	}
	return err
}

// Unreachable records a failed call to the target: when it failed for want of an answer
// (no connection, a timeout), the target is not tried again for UnreachableFor (Prepare
// fails at once) and is prepared again afterwards. Other failures change nothing.
func (t *Target) Unreachable(err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observeLocked(err)
}

// DownError is the failure a target was found unreachable with, while it is not tried
// again: RetryIn says when it will be.
type DownError struct {
	Err     error
	At      time.Time
	RetryIn time.Duration
}

func (e *DownError) Error() string {
	return fmt.Sprintf("%v (found so at %s; tried again in %s)", e.Err, e.At.UTC().Format(time.RFC3339), e.RetryIn.Round(time.Second))
}

func (e *DownError) Unwrap() error { return e.Err }

func (t *Target) observeLocked(err error) {
	var down *DownError
	if errors.As(err, &down) || !IsUnreachable(err) { // a DownError is what was seen before
		return
	}
	t.prepared = false
	t.downErr = err
	t.downUntil = t.now().Add(UnreachableFor)
}

// Down is the failure the target was found unreachable with, while it is not tried
// again (UnreachableFor); nil otherwise.
func (t *Target) Down() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.downLocked()
}

func (t *Target) downLocked() error {
	if t.downErr == nil || !t.now().Before(t.downUntil) {
		return nil
	}
	return &DownError{Err: t.downErr, At: t.downUntil.Add(-UnreachableFor), RetryIn: t.downUntil.Sub(t.now())}
}

func (t *Target) now() time.Time {
	if t.clock == nil {
		return time.Now()
	}
	return t.clock.Now()
}

// IsUnreachable says whether err, from a call to a target, means no answer came: no
// connection, or none in time. Only the error's types count, never its text.
func IsUnreachable(err error) bool {
	var te *tenantkubeconfig.TargetError
	if errors.As(tenantkubeconfig.Failure("", err), &te) {
		return te.Class == tenantkubeconfig.Unreachable
	}
	return false
}

// Connections caches a connection per Cluster: a new one costs a TLS handshake and API
// discovery. A brought-along Cluster's is reused while its kubeconfig Secret holds the
// same kubeconfig, a Gardener Cluster's for half the lifetime of its admin kubeconfig.
// One Connections serves every controller of a manager that reaches Clusters' targets
// (the cluster and kubeconfig controllers): one connection per Cluster. A Cluster's
// connection is forgotten when the Cluster goes (Evict, Forget), when its kubeconfig
// Secret goes, and when the kubeconfig in it changes.
type Connections struct {
	// Client reads Clusters and (as metadata) kubeconfig Secrets from the cache.
	Client client.Client
	// APIReader reads kubeconfig Secrets uncached: they hold cluster-admin credentials.
	APIReader client.Reader
	// Garden is nil when no garden is configured: only brought-along Clusters work then.
	Garden *garden.Garden
	// Policy is what a brought-along kubeconfig may use.
	Policy tenantkubeconfig.Policy
	Clock  clock.PassiveClock
	// Moved, if set, is told of a Gardener Cluster whose fresh admin kubeconfig reaches
	// another server or trusts another CA than the one before: nothing else says so (no
	// watch shows an admin kubeconfig). A brought-along Cluster's move is seen by a watch
	// on its kubeconfig Secret. OnMoved adds more listeners.
	Moved func(ctx context.Context, cluster *operatorv1alpha1.Cluster)

	mu      sync.Mutex
	cache   map[types.UID]*Target
	onMoved []func(ctx context.Context, cluster *operatorv1alpha1.Cluster)
	dials   map[types.UID]int
}

// OnMoved adds a listener told what Moved is told.
func (c *Connections) OnMoved(f func(ctx context.Context, cluster *operatorv1alpha1.Cluster)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onMoved = append(c.onMoved, f)
}

func (c *Connections) moved(ctx context.Context, cluster *operatorv1alpha1.Cluster) {
	c.mu.Lock()
	listeners := append([]func(context.Context, *operatorv1alpha1.Cluster){}, c.onMoved...)
	c.mu.Unlock()
	if c.Moved != nil {
		listeners = append(listeners, c.Moved)
	}
	for _, f := range listeners {
		f(ctx, cluster)
	}
}

// Get connects to the Cluster at key: a brought-along one through its kubeconfig Secret,
// a Gardener one through a short-lived admin kubeconfig kept in memory only. A Cluster
// that cannot be connected to yet is waited for (a status.Waiting error): a watch on the
// Cluster (and on its kubeconfig Secret) says when that changes. A Cluster that is gone
// wraps ErrClusterGone, one going with no way in left ErrNoWayIn.
func (c *Connections) Get(ctx context.Context, key types.NamespacedName) (*Target, error) {
	cluster := &operatorv1alpha1.Cluster{}
	if err := c.Client.Get(ctx, key, cluster); apierrors.IsNotFound(err) {
		return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %s: %w", key, ErrClusterGone)
	} else if err != nil {
		return nil, fmt.Errorf("reading Cluster %s: %w", key, err)
	}
	if cluster.Spec.KubeconfigSecretRef != nil {
		t, err := c.BroughtAlong(ctx, cluster)
		switch {
		case errors.Is(err, ErrNoWayIn):
			return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q is being deleted and its kubeconfig Secret is gone: %w", cluster.Name, err)
		case IsKubeconfigUnusable(err):
			// The Cluster reports it (and stalls); fixing the Secret brings the request back.
			return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q: %w", cluster.Name, err)
		case err != nil:
			return nil, fmt.Errorf("cluster %q: %w", cluster.Name, err)
		}
		return t, nil
	}
	return c.shoot(ctx, cluster)
}

// BroughtAlong is the connection to a brought-along Cluster's target. It is reused while
// the kubeconfig Secret is unchanged: its version comes from the metadata cache, its
// content is read uncached only on change, and a connection is made anew only when the
// kubeconfig in it changed. The errors are BroughtAlongConfig's (IsKubeconfigUnusable);
// a Secret that is gone forgets the connection, unless the Cluster is being deleted: then
// the connection made before still gets in to clean up, and without one the error wraps
// ErrNoWayIn.
func (c *Connections) BroughtAlong(ctx context.Context, cluster *operatorv1alpha1.Cluster) (*Target, error) {
	ref := types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Spec.KubeconfigSecretRef.Name}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.Client.Get(ctx, ref, secretMeta); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the kubeconfig Secret %s of cluster %q: %w", ref.Name, cluster.Name, err)
		}
		if !cluster.DeletionTimestamp.IsZero() {
			if t, ok := c.cached(cluster); ok {
				return t, nil
			}
			return nil, fmt.Errorf("kubeconfig Secret %s: %w", ref.Name, ErrNoWayIn)
		}
		c.Forget(cluster.UID) // its credentials went with the Secret
		return nil, &MissingSecretError{fmt.Sprintf("kubeconfig Secret %s does not exist", ref.Name)}
	}
	cached, ok := c.cached(cluster)
	if ok && cached.version == secretMeta.ResourceVersion {
		return cached, nil
	}
	cfg, hash, err := broughtAlongConfig(ctx, c.APIReader, cluster, c.Policy)
	if err != nil {
		if IsKubeconfigUnusable(err) {
			c.Forget(cluster.UID) // what it was made from is no longer what the Secret says
		}
		return nil, err
	}
	if ok && cached.hash == hash {
		// The Secret changed, not the kubeconfig in it (a label, say): the connection stays.
		c.mu.Lock()
		cached.version = secretMeta.ResourceVersion
		c.mu.Unlock()
		return cached, nil
	}
	t, err := c.connect(cluster, cfg, time.Time{}, true)
	if err != nil {
		return nil, err
	}
	t.version, t.hash = secretMeta.ResourceVersion, hash
	return t, nil
}

// shoot asks Gardener for an admin kubeconfig and reuses it for half its lifetime.
func (c *Connections) shoot(ctx context.Context, cluster *operatorv1alpha1.Cluster) (*Target, error) {
	if c.Garden == nil {
		return nil, status.Stalled(operatorv1alpha1.ReasonClusterNotReady, "cluster %q is a Gardener cluster and the operator runs without --garden-kubeconfig", cluster.Name)
	}
	provisioned := meta.FindStatusCondition(cluster.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned)
	if provisioned == nil || provisioned.Status != metav1.ConditionTrue || cluster.Status.ShootName == "" {
		return nil, status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q is not provisioned yet", cluster.Name)
	}
	// The Shoot is the one the Cluster controller names for this Cluster, never what the
	// status says: a status can be forged by whoever may write clusters/status, and the
	// garden project is shared by every tenant.
	shootName := c.Garden.Params.NameOf(cluster)
	if cluster.Status.ShootName != shootName {
		return nil, status.Stalled(operatorv1alpha1.ReasonShootMismatch, "cluster %s/%s: status.shootName %q is not this Cluster's shoot %q: no kubeconfig is issued for another shoot",
			cluster.Namespace, cluster.Name, cluster.Status.ShootName, shootName)
	}
	if t, ok := c.fresh(cluster); ok {
		return t, nil
	}
	if err := c.checkShoot(ctx, cluster, shootName); err != nil {
		return nil, err
	}
	t, err := c.Shoot(ctx, cluster, shootName)
	if err != nil {
		return nil, fmt.Errorf("cluster %q: %w", cluster.Name, err)
	}
	return t, nil
}

// Shoot is the connection to a Gardener Cluster's Shoot shootName, which the caller
// checked is the Cluster's: the one cached while it is fresh (half the lifetime of its
// admin kubeconfig), else one through a new admin kubeconfig. The error is the garden's.
func (c *Connections) Shoot(ctx context.Context, cluster *operatorv1alpha1.Cluster, shootName string) (*Target, error) {
	if t, ok := c.fresh(cluster); ok {
		return t, nil
	}
	now := c.Clock.Now()
	cfg, expires, err := c.Garden.AdminConfig(ctx, shootName)
	if err != nil {
		return nil, err
	}
	previous, hadOne := c.cached(cluster)
	t, err := c.connect(cluster, cfg, now.Add(expires.Sub(now)/2), false)
	if err == nil && hadOne && previous.Endpoint().Moved(t.Endpoint()) != "" {
		c.moved(ctx, cluster)
	}
	return t, err
}

// checkShoot: the Shoot exists and carries the owner labels the Cluster controller puts
// on the Shoot of this Cluster; it is read uncached, as an admin kubeconfig is about to be
// asked for it.
func (c *Connections) checkShoot(ctx context.Context, cluster *operatorv1alpha1.Cluster, shootName string) error {
	live, err := ShootOf(ctx, c.Garden.APIReader, c.Garden, cluster, shootName)
	var notOwned *NotOwnedError
	switch {
	case errors.As(err, &notOwned):
		return status.Stalled(operatorv1alpha1.ReasonShootMismatch, "cluster %s/%s: shoot %s is labelled %s=%q, %s=%q: it is not this Cluster's shoot, no kubeconfig is issued for it",
			cluster.Namespace, cluster.Name, shootName, operatorv1alpha1.ClusterNamespaceLabel, notOwned.Namespace, operatorv1alpha1.ClusterNameLabel, notOwned.Name)
	case err != nil:
		return fmt.Errorf("cluster %q: %w", cluster.Name, err)
	case live == nil:
		return status.Waiting(operatorv1alpha1.ReasonClusterNotReady, "cluster %q: shoot %s does not exist (yet)", cluster.Name, shootName)
	}
	return nil
}

// Forget drops the connection to a Cluster that is gone (its UID): a deleted Cluster's
// credentials are not kept for ever. Its idle sockets are closed.
func (c *Connections) Forget(uid types.UID) {
	c.mu.Lock()
	t := c.cache[uid]
	delete(c.cache, uid)
	c.mu.Unlock()
	t.close()
}

// Evict drops the connection to the Cluster at key, whatever its UID: what the cluster
// controller's deletion calls last, and the Cluster delete handlers.
func (c *Connections) Evict(key types.NamespacedName) {
	c.mu.Lock()
	var gone []*Target
	for uid, t := range c.cache {
		if t.key == key {
			gone = append(gone, t)
			delete(c.cache, uid)
		}
	}
	c.mu.Unlock()
	for _, t := range gone {
		t.close()
	}
}

// EvictOnDelete is a handler of Cluster delete events that evicts the deleted Cluster's
// connection.
func (c *Connections) EvictOnDelete() handler.EventHandler {
	return handler.Funcs{DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		c.Forget(e.Object.GetUID())
		c.Evict(types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()})
	}}
}

// Connected says whether a connection to the Cluster with uid is kept.
func (c *Connections) Connected(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.cache[uid]
	return ok
}

// Len is the number of Clusters connected to.
func (c *Connections) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cache)
}

// Dials is how many connections were made to the Cluster with uid.
func (c *Connections) Dials(uid types.UID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials[uid]
}

func (c *Connections) cached(cluster *operatorv1alpha1.Cluster) (*Target, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.cache[cluster.UID]
	return t, ok
}

// fresh is the cached connection to cluster while it need not be refreshed.
func (c *Connections) fresh(cluster *operatorv1alpha1.Cluster) (*Target, bool) {
	t, ok := c.cached(cluster)
	if !ok || !c.Clock.Now().Before(t.refreshAt) {
		return nil, false
	}
	return t, true
}

// connect makes the connection to cluster and caches it in place of the one before
// (whose idle sockets are closed); a zero refreshAt never expires.
func (c *Connections) connect(cluster *operatorv1alpha1.Cluster, cfg *rest.Config, refreshAt time.Time, tenantServer bool) (*Target, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	// client-go's default of 5 requests/s would serialise a burst of requests. As for its
	// own connection (controller-runtime's default), client-side rate limiting is off: the
	// target API server protects itself with priority and fairness.
	cfg.QPS = -1
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme(), HTTPClient: httpClient})
	if err != nil {
		httpClient.CloseIdleConnections()
		return nil, err
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		httpClient.CloseIdleConnections()
		return nil, err
	}
	if refreshAt.IsZero() {
		refreshAt = time.Unix(1<<62, 0)
	}
	t := &Target{Name: cluster.Name, UID: cluster.UID, Config: cfg, Client: cl, Kube: kube, TenantServer: tenantServer, refreshAt: refreshAt, clock: c.Clock,
		key: types.NamespacedName{Namespace: cluster.Namespace, Name: cluster.Name}, closeIdle: httpClient.CloseIdleConnections}
	c.mu.Lock()
	if c.cache == nil {
		c.cache, c.dials = map[types.UID]*Target{}, map[types.UID]int{}
	}
	previous := c.cache[cluster.UID]
	c.cache[cluster.UID] = t
	c.dials[cluster.UID]++
	c.mu.Unlock()
	if previous != nil {
		previous.close()
	}
	return t, nil
}

// Dial is a client of the target at cfg for one reconcile; close closes its connections.
// A brought-along config's own dialer and proxy keep client-go from sharing its transport
// between clients, so a connection not closed would stay idle after every reconcile.
func Dial(cfg *rest.Config) (target client.Client, closeIdle func(), err error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	target, err = client.New(cfg, client.Options{HTTPClient: httpClient})
	if err != nil {
		httpClient.CloseIdleConnections()
		return nil, nil, err
	}
	return target, httpClient.CloseIdleConnections, nil
}
