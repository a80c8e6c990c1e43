package dataplane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/checksum/dataplaneagent"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

var (
	scopeAll   = checksum.NewScope(nil, checksum.DefaultVersionAnnotation).String()
	scopeAlpha = checksum.NewScope([]string{"alpha"}, checksum.DefaultVersionAnnotation).String()
)

// runAgent runs the agent over namespaces (none: every namespace; one: --namespace) with
// ingresses off, so that only the secrets track speaks.
func runAgent(t *testing.T, env *testenv.Env, dir, reload string, namespaces ...string) (stop func()) {
	t.Helper()
	return testenv.Background(t, func(c context.Context) error {
		opts := dataplaneagent.DefaultOptions()
		opts.Dir, opts.ReloadCommand, opts.Ingresses = dir, reload, false
		if len(namespaces) == 1 {
			opts.Namespace = namespaces[0]
		} else {
			opts.Namespaces = namespaces
		}
		opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
		return dataplaneagent.Run(c, env.Config, opts)
	})
}

// publish stores a SecretCheckSum over ids, as a control plane of the given scope would.
func publish(t *testing.T, cl client.Client, namespace, scope string, ids ...string) *tenginev1.SecretCheckSum {
	t.Helper()
	obj := &tenginev1.SecretCheckSum{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "secret-"},
		Spec:       tenginev1.SecretCheckSumSpec{Checksum: checksum.Sum(ids), IDs: ids, Timestamp: metav1.Now()},
	}
	if scope != "" { // none: as a publisher other than trustplane
		obj.Annotations = map[string]string{checksum.ScopeAnnotation: scope}
	}
	if err := cl.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// eventsOf are the events of a reason in a namespace.
func eventsOf(t *testing.T, cl client.Client, namespace, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := cl.List(ctx, list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func createNamespaces(t *testing.T, cl client.Client, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestScopesUndecodableObjectsAndReloadFailures: the agent sees what Tengine-Ingress sees
// (every namespace unless told otherwise), tells a control plane configured for other
// namespaces from a real disagreement, skips checksum objects it cannot decode, and keeps
// the previous set when the gateway cannot be reloaded.
func TestScopesUndecodableObjectsAndReloadFailures(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	createNamespaces(t, env.Client, "alpha", "beta", "gamma", "ops", "delta", "reload", "careless")

	t.Run("an all-namespaces agent verifies the union and nginx serves <namespace>.<name>", func(t *testing.T) {
		testAllNamespaces(t, env)
	})
	t.Run("a checksum of another scope is a ScopeMismatch, not a ChecksumMismatch", func(t *testing.T) {
		testScopeMismatch(t, env)
	})
	t.Run("an undecodable SecretCheckSum is skipped and reported", func(t *testing.T) {
		testUndecodable(t, env)
	})
	t.Run("a failed reload keeps the previous files until nginx reloads", func(t *testing.T) {
		testReloadFailure(t, env)
	})
	t.Run("a Secret that loses its version keeps its files until the removal is confirmed", func(t *testing.T) {
		testUnversionedKept(t, env)
	})
}

// testUnversionedKept: the common rotation recipe drops the version annotation (here with
// new data, as the recipe writes it). The control plane's next checksum leaves the Secret
// out and the agent verifies it, but keeps serving the Secret's last verified files, with
// a Warning event, until an operator confirms: by the annotation
// dataplane.trustplane.io/remove-unversioned, or by deleting the Secret.
func testUnversionedKept(t *testing.T, env *testenv.Env) {
	const namespace = "careless"
	scope := checksum.NewScope([]string{namespace}, checksum.DefaultVersionAnnotation).String()
	a, b, c := cert(t), cert(t), cert(t)
	putSecretData(t, env.Client, namespace, "shop-1", "1", map[string][]byte{corev1.TLSCertKey: a.PEM(), corev1.TLSPrivateKeyKey: a.KeyPEM()})
	putSecretData(t, env.Client, namespace, "blog-2", "1", map[string][]byte{corev1.TLSCertKey: b.PEM(), corev1.TLSPrivateKeyKey: b.KeyPEM()})
	publish(t, env.Client, namespace, scope, "1-1-"+pemSHA(t, a), "2-1-"+pemSHA(t, b))
	dir := t.TempDir()
	runAgent(t, env, dir, "", namespace)
	testenv.Eventually(t, "both Secrets served", 30*time.Second, func() bool {
		return fileIs(dir, "shop-1.crt", a.PEM())() && fileIs(dir, "blog-2.crt", b.PEM())()
	})

	// kubectl create secret tls ... --dry-run=client -o yaml | kubectl apply -f -
	for name, chain := range map[string]testcerts.Chain{"shop-1": c, "blog-2": c} {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			t.Fatal(err)
		}
		s.Annotations = nil
		s.Data = map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}
		if err := env.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, env.Client, namespace, scope) // the control plane's next checksum: neither counted
	testenv.Eventually(t, "an UnversionedKept event on each Secret", 30*time.Second, func() bool {
		on := map[string]bool{}
		for _, e := range eventsOf(t, env.Client, namespace, tenginev1alpha1.ReasonUnversionedKept) {
			on[e.Regarding.Name] = e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, dataplane.RemoveUnversionedAnnotation)
		}
		return on["shop-1"] && on["blog-2"]
	})
	if !fileIs(dir, "shop-1.crt", a.PEM())() || !fileIs(dir, "blog-2.key", b.KeyPEM())() {
		t.Fatal("the last verified files of Secrets that lost their version are gone or replaced")
	}

	// Confirmed by the annotation: shop-1's files go; blog-2's stay.
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, dataplane.RemoveUnversionedAnnotation)
	if err := env.Client.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "shop-1"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "shop-1's files removed once confirmed", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "shop-1.crt"))
		return os.IsNotExist(err)
	})
	if !fileIs(dir, "blog-2.crt", b.PEM())() {
		t.Fatal("blog-2's files went with shop-1's confirmation")
	}
	// Confirmed by deleting the Secret.
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "blog-2"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "blog-2's files removed with the Secret", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(dir, "blog-2.crt"))
		return os.IsNotExist(err)
	})
}

func testAllNamespaces(t *testing.T, env *testenv.Env) {
	a, b, ca := cert(t), cert(t), cert(t)
	caPEM := testcerts.CertPEM(ca.CA)
	putSecretData(t, env.Client, "alpha", "site-1", "1", map[string][]byte{corev1.TLSCertKey: a.PEM(), corev1.TLSPrivateKeyKey: a.KeyPEM()})
	putSecretData(t, env.Client, "beta", "site-2", "3", map[string][]byte{corev1.TLSCertKey: b.PEM(), corev1.TLSPrivateKeyKey: b.KeyPEM()})
	putSecretData(t, env.Client, "gamma", "clients-7", "2", map[string][]byte{"ca.crt": caPEM})
	// One checksum over the union, in a namespace of its own, as the control plane's
	// default "cluster" scope publishes it.
	publish(t, env.Client, "ops", scopeAll, "1-1-"+pemSHA(t, a), "2-3-"+pemSHA(t, b), "7-2-")

	dir := t.TempDir()
	stop := runAgent(t, env, dir, "")
	testenv.Eventually(t, "every namespace's files, named <namespace>.<name>", 20*time.Second, func() bool {
		return fileIs(dir, "alpha.site-1.crt", a.PEM())() && fileIs(dir, "alpha.site-1.key", a.KeyPEM())() &&
			fileIs(dir, "beta.site-2.crt", b.PEM())() && fileIs(dir, "gamma.clients-7.ca.crt", caPEM)()
	})
	if _, err := os.Stat(filepath.Join(dir, "site-1.crt")); !os.IsNotExist(err) {
		t.Errorf("an all-namespaces agent wrote an unprefixed file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gamma.clients-7.crt")); !os.IsNotExist(err) {
		t.Errorf("a CA-only Secret got a certificate file: %v", err)
	}
	// nginx loads the pair of one namespace and the CA bundle of another.
	nginx := startNginxWith(t, dir, "beta.site-2", "gamma.clients-7.ca.crt")
	if got := nginx.leafSHA(); got != pemSHA(t, b) {
		t.Errorf("nginx serves %s, want %s", got, pemSHA(t, b))
	}
	if n := len(eventsOf(t, env.Client, "ops", "ChecksumMismatch")); n != 0 {
		t.Errorf("%d ChecksumMismatch events", n)
	}
	stop()
}

func testScopeMismatch(t *testing.T, env *testenv.Env) {
	// A control plane in its cluster scope publishes into alpha too (its publish
	// namespace): that object covers every namespace, so a one-namespace agent can never
	// match it, and diffing against it would report beta's and gamma's IDs for ever.
	cluster := publish(t, env.Client, "alpha", scopeAll, "1-1-aa", "2-3-bb", "7-2-")
	dir := t.TempDir()
	stop := runAgent(t, env, dir, "", "alpha")
	testenv.Eventually(t, "the scope mismatch metric", 20*time.Second, func() bool {
		return gauge(t, "trustplane_dataplane_scope_mismatch", "track", "secrets") == 1
	})
	var note string
	testenv.Eventually(t, "a ScopeMismatch event on the object", 20*time.Second, func() bool {
		for _, e := range eventsOf(t, env.Client, "alpha", dataplane.ScopeMismatch) {
			if e.Type == corev1.EventTypeWarning && e.Regarding.Name == cluster.Name {
				note = e.Note
				return true
			}
		}
		return false
	})
	if !strings.Contains(note, scopeAlpha) || !strings.Contains(note, scopeAll) {
		t.Errorf("the event does not name both scopes: %s", note)
	}
	// The next publication of the other scope is no news: still one event, no mismatch.
	publish(t, env.Client, "alpha", scopeAll, "1-1-aa", "2-4-cc", "7-2-")
	time.Sleep(time.Second)
	if n := len(eventsOf(t, env.Client, "alpha", dataplane.ScopeMismatch)); n != 1 {
		t.Errorf("%d ScopeMismatch events, want 1", n)
	}
	if n := len(eventsOf(t, env.Client, "alpha", "ChecksumMismatch")); n != 0 {
		t.Errorf("%d ChecksumMismatch events", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files written while unverified: %v", entries)
	}

	// A checksum of the agent's own scope, matching: verified, and the metric clears.
	alphaSecret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "alpha", Name: "site-1"}, alphaSecret); err != nil {
		t.Fatal(err)
	}
	id, err := checksum.SecretID(alphaSecret.Name, alphaSecret.Annotations, checksum.DefaultVersionAnnotation, alphaSecret.Data)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, env.Client, "alpha", scopeAlpha, id)
	testenv.Eventually(t, "the one-namespace file names and the metric cleared", 20*time.Second, func() bool {
		return fileIs(dir, "site-1.crt", alphaSecret.Data[corev1.TLSCertKey])() &&
			gauge(t, "trustplane_dataplane_scope_mismatch", "track", "secrets") == 0
	})
	stop()
}

// testUndecodable stores SecretCheckSums that today's CRD refuses but Tengine-Ingress's
// own CRD (no pattern, no format) lets through, the only way they can get in: under a
// loosened schema. One is there before the agent starts (its first list), one comes later
// (its watch).
func testUndecodable(t *testing.T, env *testenv.Env) {
	restoreCRD := loosenTimestamp(t, env)
	storeRaw(t, env, "delta", "no-zone", "2024-01-02T03:04:05")
	a := cert(t)
	putSecretData(t, env.Client, "delta", "site-1", "1", map[string][]byte{corev1.TLSCertKey: a.PEM(), corev1.TLSPrivateKeyKey: a.KeyPEM()})
	publish(t, env.Client, "delta", checksum.NewScope([]string{"delta"}, checksum.DefaultVersionAnnotation).String(), "1-1-"+pemSHA(t, a))

	dir := t.TempDir()
	stop := runAgent(t, env, dir, "", "delta")
	testenv.Eventually(t, "the good checksum verified despite the bad one", 20*time.Second, fileIs(dir, "site-1.crt", a.PEM()))
	storeRaw(t, env, "delta", "lower-case", "2024-01-02t03:04:05z")
	restoreCRD()
	testenv.Eventually(t, "both reported: metric and one event each", 20*time.Second, func() bool {
		events := eventsOf(t, env.Client, "delta", "UndecodableChecksum")
		names := map[string]bool{}
		for _, e := range events {
			names[e.Regarding.Name] = e.Type == corev1.EventTypeWarning
		}
		return gauge(t, "trustplane_dataplane_undecodable_checksums", "track", "secrets") == 2 &&
			len(events) == 2 && names["no-zone"] && names["lower-case"]
	})
	// The agent is not frozen: a rotation, published, is served.
	a2 := cert(t)
	putSecretData(t, env.Client, "delta", "site-1", "2", map[string][]byte{corev1.TLSCertKey: a2.PEM(), corev1.TLSPrivateKeyKey: a2.KeyPEM()})
	publish(t, env.Client, "delta", "", "1-2-"+pemSHA(t, a2))
	testenv.Eventually(t, "the rotated pair served", 20*time.Second, fileIs(dir, "site-1.crt", a2.PEM()))
	if n := len(eventsOf(t, env.Client, "delta", "UndecodableChecksum")); n != 2 {
		t.Errorf("%d UndecodableChecksum events, want one per object", n)
	}
	stop()
}

// loosenTimestamp makes spec.timestamp any string in every served version, as
// Tengine-Ingress's CRD has it; the returned func puts today's CRD back.
func loosenTimestamp(t *testing.T, env *testenv.Env) (restore func()) {
	t.Helper()
	key := client.ObjectKey{Name: "secretchecksums.tengine.taobao.org"}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := env.Client.Get(ctx, key, crd); err != nil {
		t.Fatal(err)
	}
	original := crd.Spec.DeepCopy()
	for i := range crd.Spec.Versions {
		spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Properties["timestamp"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	if err := env.Client.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the loose CRD in effect", 30*time.Second, func() bool {
		return env.Client.Create(ctx, rawChecksum("delta", "probe", "2024-01-02T03:04:05"), client.DryRunAll) == nil
	})
	return func() {
		if err := env.Client.Get(ctx, key, crd); err != nil {
			t.Fatal(err)
		}
		crd.Spec = *original
		if err := env.Client.Update(ctx, crd); err != nil {
			t.Fatal(err)
		}
	}
}

func rawChecksum(namespace, name, timestamp string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"checksum": "0123", "ids": []any{"9-9-"}, "timestamp": timestamp}}}
	u.SetGroupVersionKind(tenginev1.GroupVersion.WithKind("SecretCheckSum"))
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func storeRaw(t *testing.T, env *testenv.Env, namespace, name, timestamp string) {
	t.Helper()
	if err := env.Client.Create(ctx, rawChecksum(namespace, name, timestamp)); err != nil {
		t.Fatalf("storing %s: %v", name, err)
	}
}

// testReloadFailure: nginx is down when a new set is verified, so `nginx -s reload` fails.
// The previous files go back byte for byte; once nginx runs again (reading them), the
// agent's retry reloads it with the new set.
func testReloadFailure(t *testing.T, env *testenv.Env) {
	scope := checksum.NewScope([]string{"reload"}, checksum.DefaultVersionAnnotation).String()
	a := cert(t)
	putSecretData(t, env.Client, "reload", "site-1", "1", map[string][]byte{corev1.TLSCertKey: a.PEM(), corev1.TLSPrivateKeyKey: a.KeyPEM()})
	publish(t, env.Client, "reload", scope, "1-1-"+pemSHA(t, a))
	dir := t.TempDir()
	stop := runAgent(t, env, dir, "", "reload")
	testenv.Eventually(t, "the first set", 20*time.Second, fileIs(dir, "site-1.crt", a.PEM()))
	stop()
	nginx := startNginx(t, dir)
	stop = runAgent(t, env, dir, nginx.reload, "reload")
	before := map[string][]byte{}
	for _, f := range []string{"site-1.crt", "site-1.key", dataplane.SnapshotFile} {
		before[f] = readFile(t, dir, f)
	}
	failures := gauge(t, "trustplane_dataplane_reload_failures_total")

	nginx.stop(t)
	a2 := cert(t)
	putSecretData(t, env.Client, "reload", "site-1", "2", map[string][]byte{corev1.TLSCertKey: a2.PEM(), corev1.TLSPrivateKeyKey: a2.KeyPEM()})
	publish(t, env.Client, "reload", scope, "1-2-"+pemSHA(t, a2))
	// Retries back off (0.1s, 0.2s, 0.4s, …): after four failures the next is ≥0.8s away,
	// and each is counted only once the previous files are back.
	testenv.Eventually(t, "four failed reloads", 20*time.Second, func() bool {
		return gauge(t, "trustplane_dataplane_reload_failures_total") >= failures+4
	})
	for f, want := range before {
		if got := readFile(t, dir, f); string(got) != string(want) {
			t.Errorf("%s changed although the new set was never served", f)
		}
	}
	if gauge(t, "trustplane_dataplane_reload_failing") != 1 {
		t.Error("reload_failing is not 1")
	}
	var reloadEvents []eventsv1.Event
	testenv.Eventually(t, "a ReloadFailed event", 20*time.Second, func() bool {
		reloadEvents = eventsOf(t, env.Client, "reload", "ReloadFailed")
		return len(reloadEvents) > 0
	})
	if e := reloadEvents[0]; e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "nginx.pid") {
		t.Errorf("event %s: %s (want nginx's own complaint in it)", e.Type, e.Note)
	}

	nginx.start(t) // reads the previous set from disk
	if got := nginx.leafSHA(); got != pemSHA(t, a) {
		t.Errorf("restarted nginx serves %s, want the previous %s", got, pemSHA(t, a))
	}
	testenv.Eventually(t, "the new set served after a retry", 40*time.Second, func() bool {
		return nginx.leafSHA() == pemSHA(t, a2) && fileIs(dir, "site-1.crt", a2.PEM())()
	})
	if gauge(t, "trustplane_dataplane_reload_failing") != 0 {
		t.Error("reload_failing is still 1")
	}
	if n := len(eventsOf(t, env.Client, "reload", "ReloadFailed")); n != 1 {
		t.Errorf("%d ReloadFailed events, want one for the failing period", n)
	}
	stop()
}
