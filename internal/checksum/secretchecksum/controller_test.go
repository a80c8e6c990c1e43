package secretchecksum

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("TEST_LOG") != "" {
		ctrl.SetLogger(zap.New())
	}
	os.Exit(testenv.Main(m, &env))
}

// quietPeriod is the tests' debounce: long enough that a burst sent at once stays inside
// it on a loaded 2-core machine (300 ms did not, under the whole suite).
const quietPeriod = 1500 * time.Millisecond

// settle is how long a test waits to see that nothing more is published: a publication
// follows the last change by the quiet period, so a wrong one would show within it.
const settle = quietPeriod + 500*time.Millisecond

// startManager runs the control plane over the test's namespaces, with the cluster scope
// published in the first (tests share one API server: none may cover every namespace
// with the cluster scope).
func startManager(t *testing.T, namespaces ...string) (stop func()) {
	t.Helper()
	return startManagerWith(t, func(o *Options) { o.Namespaces = namespaces })
}

func startManagerWith(t *testing.T, configure func(*Options)) (stop func()) {
	t.Helper()
	opts := DefaultOptions()
	opts.QuietPeriod = quietPeriod
	configure(&opts)
	if len(opts.Namespaces) > 0 {
		opts.PublishNamespace = opts.Namespaces[0]
	}
	return env.RunManager(t, func(mgr ctrl.Manager) error { _, err := Setup(mgr, opts); return err })
}

func namespace(t *testing.T) string { return env.Namespace(t, "checksum") }

func newCert(t *testing.T) testcerts.Chain {
	t.Helper()
	key, _ := testcerts.NewKey(testcerts.P256)
	c, err := testcerts.NewChain(key, "example.com", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func putSecret(t *testing.T, ns, name, version string, c testcerts.Chain) string {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: c.PEM(), corev1.TLSPrivateKeyKey: c.KeyPEM()},
	}
	if version != "" {
		s.Annotations = map[string]string{checksum.DefaultVersionAnnotation: version}
	}
	if err := env.Client.Create(ctx, s); err != nil {
		cur := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		cur.Data, cur.Annotations = s.Data, s.Annotations
		if err := env.Client.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	id, err := checksum.SecretID(name, s.Annotations, checksum.DefaultVersionAnnotation, s.Data)
	if err != nil {
		return ""
	}
	return id
}

func published(t *testing.T, ns string) []tenginev1.SecretCheckSum {
	t.Helper()
	list := &tenginev1.SecretCheckSumList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitPublished waits until exactly one SecretCheckSum with the checksum of ids exists.
func waitPublished(t *testing.T, ns string, ids ...string) tenginev1.SecretCheckSum {
	t.Helper()
	want := checksum.Sum(ids)
	deadline := time.Now().Add(20 * time.Second)
	for {
		items := published(t, ns)
		if len(items) == 1 && items[0].Spec.Checksum == want {
			return items[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("want one SecretCheckSum with %s (ids %v), have %+v", want, ids, items)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func counter(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func TestPublishesReplacesAndReportsLeftOut(t *testing.T) {
	ns := namespace(t)
	a, b := newCert(t), newCert(t)
	id1 := putSecret(t, ns, "example-com-1", "3", a)
	id2 := putSecret(t, ns, "shop-example-com-027", "1", b)
	putSecret(t, ns, "no-version-5", "", a)
	putSecret(t, ns, "noid", "1", a)
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opaque-9"}, StringData: map[string]string{"password": "x"}}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns)

	first := waitPublished(t, ns, id1, id2)
	if !sort.StringsAreSorted(first.Spec.IDs) || len(first.Spec.IDs) != 2 || first.Spec.Timestamp.IsZero() {
		t.Errorf("published spec: %+v", first.Spec)
	}
	wantScope := checksum.NewScope([]string{ns}, checksum.DefaultVersionAnnotation).String()
	if !strings.HasPrefix(first.Name, "secret-") || first.Annotations[ScopeAnnotation] != wantScope || first.Labels[ScopeKindLabel] != "cluster" {
		t.Errorf("object %s, scope %q (want %q), labels %v", first.Name, first.Annotations[ScopeAnnotation], wantScope, first.Labels)
	}
	// Left-out versioned secrets: a Warning event each, with the reason and never the
	// contents. An unversioned one is no data plane's business: not reported.
	waitForEvent(t, ns, "noid", "no numeric ID")
	time.Sleep(settle)
	if got := eventsAbout(t, ns, "no-version-5"); len(got) != 0 {
		t.Errorf("an unversioned Secret was reported: %v", got[0].Note)
	}
	for _, e := range listEvents(t, ns) {
		if strings.Contains(e.Note, "BEGIN") {
			t.Errorf("an event carries key material: %s", e.Note)
		}
	}
	if len(eventsAbout(t, ns, "opaque-9")) != 0 {
		t.Error("a non-TLS secret was reported")
	}

	// A change publishes a new object, then the old one goes.
	id1b := putSecret(t, ns, "example-com-1", "4", a)
	second := waitPublished(t, ns, id1b, id2)
	if second.UID == first.UID {
		t.Error("the change was published by updating the old object (the data plane only sees adds and deletes)")
	}

	// The v1alpha1 view of the same object is served too.
	alpha := &tenginev1alpha1.SecretCheckSumList{}
	if err := env.Client.List(ctx, alpha, client.InNamespace(ns)); err != nil || len(alpha.Items) != 1 || alpha.Items[0].Spec.Checksum != second.Spec.Checksum {
		t.Errorf("v1alpha1 list: %v %+v", err, alpha.Items)
	}
}

func TestNoChangeNoWriteBurstOnePublicationIncrementalParse(t *testing.T) {
	ns := namespace(t)
	certs := make([]testcerts.Chain, 10)
	var ids []string
	for i := range certs {
		certs[i] = newCert(t)
		ids = append(ids, putSecret(t, ns, fmt.Sprintf("site-%d", i), "1", certs[i]))
	}
	startManager(t, ns)
	first := waitPublished(t, ns, ids...)

	// Unrelated changes (labels, other annotations) write nothing and parse nothing.
	parsedBefore := counter(t, defaultMetrics.parsed)
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "site-3"}, s); err != nil {
		t.Fatal(err)
	}
	s.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle)
	if items := published(t, ns); len(items) != 1 || items[0].UID != first.UID || items[0].ResourceVersion != first.ResourceVersion {
		t.Fatalf("an unrelated change wrote: %+v", items)
	}
	if n := counter(t, defaultMetrics.parsed) - parsedBefore; n != 0 {
		t.Errorf("a label change parsed %v certificates", n)
	}

	// One secret changes: exactly one certificate is parsed.
	parsedBefore = counter(t, defaultMetrics.parsed)
	ids[4] = putSecret(t, ns, "site-4", "2", newCert(t))
	waitPublished(t, ns, ids...)
	if n := counter(t, defaultMetrics.parsed) - parsedBefore; n != 1 {
		t.Errorf("one changed secret parsed %v certificates", n)
	}

	// A burst of changes: one publication. Everything is prepared first and the updates
	// are sent at once, so that the burst is well inside one quiet period however loaded
	// the machine is.
	pubs := defaultMetrics.publications.WithLabelValues(string(checksum.TrackSecrets), "cluster", ns)
	before := counter(t, pubs)
	updated := make([]*corev1.Secret, len(certs))
	for i := range certs {
		certs[i] = newCert(t)
		updated[i] = &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("site-%d", i)}, updated[i]); err != nil {
			t.Fatal(err)
		}
		updated[i].Data = map[string][]byte{corev1.TLSCertKey: certs[i].PEM(), corev1.TLSPrivateKeyKey: certs[i].KeyPEM()}
		updated[i].Annotations = map[string]string{checksum.DefaultVersionAnnotation: "3"}
		id, err := checksum.SecretID(updated[i].Name, updated[i].Annotations, checksum.DefaultVersionAnnotation, updated[i].Data)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	var g errgroup.Group
	for _, s := range updated {
		g.Go(func() error { return env.Client.Update(ctx, s) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	waitPublished(t, ns, ids...)
	time.Sleep(settle)
	if n := counter(t, pubs) - before; n != 1 {
		t.Errorf("a burst of %d changes made %v publications, want 1", len(certs), n)
	}

	// Our object deleted by someone: published again.
	cur := published(t, ns)[0]
	if err := env.Client.Delete(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	if again := waitPublished(t, ns, ids...); again.UID == cur.UID {
		t.Error("not republished")
	}
}

func TestIngressChecksum(t *testing.T) {
	ns := namespace(t)
	for name, version := range map[string]string{"web-12": "7", "api-0003": "2", "bad": "1"} {
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
				checksum.DefaultVersionAnnotation: version, checksum.IngressClassAnnotation: checksum.DefaultIngressClass}},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "s", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
		}
		if err := env.Client.Create(ctx, ing); err != nil {
			t.Fatal(err)
		}
	}
	startManager(t, ns)
	want := checksum.Sum([]string{"12-7", "3-2"})
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := &tenginev1.IngressCheckSumList{}
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 && list.Items[0].Spec.Checksum == want && strings.HasPrefix(list.Items[0].Name, "ingress-") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("IngressCheckSum: %+v", list.Items)
		}
		time.Sleep(25 * time.Millisecond)
	}
	waitForEvent(t, ns, "bad", "no numeric ID")
}

func listEvents(t *testing.T, ns string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func eventsAbout(t *testing.T, ns, name string) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range listEvents(t, ns) {
		if e.Regarding.Name == name && e.Reason == tenginev1alpha1.ReasonLeftOut {
			out = append(out, e)
		}
	}
	return out
}

func waitForEvent(t *testing.T, ns, name, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, e := range eventsAbout(t, ns, name) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, text) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event on %s mentioning %q", tenginev1alpha1.ReasonLeftOut, name, text)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestAllNamespacesModeSkipsNamespacesWithNothingToCover: per namespace over every
// namespace, only namespaces holding versioned objects get a checksum.
func TestAllNamespacesModeSkipsNamespacesWithNothingToCover(t *testing.T) {
	covered, plain := namespace(t), namespace(t)
	id := putSecret(t, covered, "site-1", "1", newCert(t))
	putSecret(t, plain, "unversioned-1", "", newCert(t))
	startManagerWith(t, func(o *Options) { o.Scopes = []string{"namespace"} }) // every namespace
	waitPublished(t, covered, id)
	time.Sleep(settle)
	if items := published(t, plain); len(items) != 0 {
		t.Errorf("a namespace without versioned secrets got %d SecretCheckSums", len(items))
	}
}

// TestACountedSecretThatLosesItsVersionIsReported: the common rotation recipe (`kubectl
// create secret tls ... --dry-run=client -o yaml | kubectl apply -f -`) drops the version
// annotation; the Secret leaves the checksum, and that is said: a Warning event on the
// Secret naming the annotation, and the metric. Removing the annotation is the only
// thing that does it: a version change is no such event.
func TestACountedSecretThatLosesItsVersionIsReported(t *testing.T) {
	ns := namespace(t)
	a, b := newCert(t), newCert(t)
	id := putSecret(t, ns, "rotated-1", "1", a)
	kept := putSecret(t, ns, "kept-2", "1", b)
	startManager(t, ns)
	waitPublished(t, ns, id, kept)
	removed := defaultMetrics.versionsRemoved.WithLabelValues(ns)
	before := counter(t, removed)

	putSecret(t, ns, "kept-2", "2", b) // a new version: not a removal
	putSecret(t, ns, "rotated-1", "", newCert(t))
	waitPublished(t, ns, putSecret(t, ns, "kept-2", "2", b))
	deadline := time.Now().Add(20 * time.Second)
	for {
		var notes []string
		for _, e := range listEvents(t, ns) {
			if e.Reason == tenginev1alpha1.ReasonVersionRemoved && e.Type == corev1.EventTypeWarning {
				notes = append(notes, e.Regarding.Name+": "+e.Note)
			}
		}
		if len(notes) == 1 && strings.HasPrefix(notes[0], "rotated-1: ") && strings.Contains(notes[0], checksum.DefaultVersionAnnotation) {
			break
		}
		if len(notes) > 1 || time.Now().After(deadline) {
			t.Fatalf("%s events: %q, want one on rotated-1 naming %s", tenginev1alpha1.ReasonVersionRemoved, notes, checksum.DefaultVersionAnnotation)
		}
		time.Sleep(25 * time.Millisecond)
	}
	if got := counter(t, removed) - before; got != 1 {
		t.Errorf("trustplane_checksum_versions_removed_total{namespace=%q} rose by %v, want 1", ns, got)
	}
}
