package status

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
)

// statusWrites counts the requests sent to status subresources, by method.
type statusWrites struct {
	mu      sync.Mutex
	methods []string
	next    http.RoundTripper
}

func (s *statusWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/status") {
		s.mu.Lock()
		s.methods = append(s.methods, req.Method)
		s.mu.Unlock()
	}
	return s.next.RoundTrip(req)
}

func (s *statusWrites) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := strings.Join(s.methods, ",")
	s.methods = nil
	return out
}

// updatingTestClient is WithStatusUpdates over a client whose status requests are counted.
func updatingTestClient(t *testing.T) (client.Client, *statusWrites) {
	t.Helper()
	transport, err := rest.TransportFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	writes := &statusWrites{next: transport}
	h := &http.Client{Transport: writes}
	base, err := client.New(env.Config, client.Options{HTTPClient: h, Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := WithStatusUpdates(base, env.Config, h)
	if err != nil {
		t.Fatal(err)
	}
	return c, writes
}

// TestAStatusIsAnUpdateAtTheVersionRead: with the manager's client (WithStatusUpdates), a
// status is written in one update at the version the reconcile read, whose answer (the
// metadata) moves the object to the version written; the API server keeps the object's
// managed fields, which the update leaves out. One that changed since it was read is
// refused for the conflict and then merge-patched: the other writer's change stays, and
// so does everything of the status this reconcile did not change. One read before this
// process's last write to the object (a cache behind it) is merge-patched at once.
func TestAStatusIsAnUpdateAtTheVersionRead(t *testing.T) {
	ns := namespace(t)
	c, writes := updatingTestClient(t)
	key := client.ObjectKeyFromObject(newConfig(t, ns, "update"))

	cfg := getConfig(t, key)
	p := NewPatcher(cfg)
	MarkReady(cfg, jwksv1alpha1.ReasonPublished, "published")
	cfg.Status.KeyCount, cfg.Status.LastKeyID = 1, "kid-1"
	if _, err := p.Finish(ctx, c, nil, ctrl.Result{}, nil); err != nil {
		t.Fatal(err)
	}
	stored := getConfig(t, key)
	if got := writes.take(); got != http.MethodPut {
		t.Errorf("status writes %q, want one PUT", got)
	}
	if !meta.IsStatusConditionTrue(stored.Status.Conditions, conditions.Ready) || stored.Status.LastKeyID != "kid-1" {
		t.Errorf("status stored after the update: %+v", stored.Status)
	}
	if cfg.ResourceVersion != stored.ResourceVersion {
		t.Errorf("the object after its update is at version %s, the API server's at %s", cfg.ResourceVersion, stored.ResourceVersion)
	}
	if len(stored.ManagedFields) == 0 {
		t.Error("the update left the object with no managed fields")
	}
	// A second write in the same reconcile updates from the version the first wrote.
	cfg.Status.KeyCount = 2
	if err := p.Patch(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := writes.take(); got != http.MethodPut || getConfig(t, key).Status.KeyCount != 2 {
		t.Errorf("a second status write of one reconcile: %q, key count %d; want one PUT, 2", got, getConfig(t, key).Status.KeyCount)
	}

	// Changed since it was read: a label and a field of the status by someone else.
	cfg = getConfig(t, key)
	p = NewPatcher(cfg)
	other := getConfig(t, key)
	other.Labels = map[string]string{"team": "a"}
	if err := env.Client.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	other.Status.LastKeyID = "kid-other"
	if err := env.Client.Status().Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	cfg.Status.KeyCount = 3
	if _, err := p.Finish(ctx, c, nil, ctrl.Result{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := writes.take(); got != http.MethodPut+","+http.MethodPatch {
		t.Errorf("status writes to an object changed since it was read %q, want a PUT refused, then a PATCH", got)
	}
	stored = getConfig(t, key)
	if stored.Status.KeyCount != 3 || stored.Status.LastKeyID != "kid-other" || stored.Labels["team"] != "a" {
		t.Errorf("after a conflict: key count %d (want 3), last kid %q (want the other writer's), labels %v", stored.Status.KeyCount, stored.Status.LastKeyID, stored.Labels)
	}
	if cfg.ResourceVersion == stored.ResourceVersion {
		t.Error("after a merge patch the object held took the version written: an update of it would undo the other writer's change")
	}

	// Read before this process's last write (a cache behind it): an update would be
	// refused, so it is merge-patched at once.
	stale := getConfig(t, key)
	cfg = getConfig(t, key)
	p = NewPatcher(cfg)
	cfg.Status.KeyCount = 4
	if _, err := p.Finish(ctx, c, nil, ctrl.Result{}, nil); err != nil {
		t.Fatal(err)
	}
	p = NewPatcher(stale)
	stale.Status.LastKeyID = "kid-2"
	if _, err := p.Finish(ctx, c, nil, ctrl.Result{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := writes.take(); got != http.MethodPut+","+http.MethodPatch {
		t.Errorf("a write, then one from a read older than it: %q, want a PUT, then a PATCH alone", got)
	}
	if stored := getConfig(t, key); stored.Status.KeyCount != 4 || stored.Status.LastKeyID != "kid-2" {
		t.Errorf("after a write from a stale read: key count %d (want 4), last kid %q (want kid-2)", stored.Status.KeyCount, stored.Status.LastKeyID)
	}
}
