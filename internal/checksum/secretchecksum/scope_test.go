package secretchecksum

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

// tengineChecksum is the formula written out here, apart from the code under test:
// sort the IDs as strings, join with ",", MD5 in lower-case hex.
func tengineChecksum(ids []string) string {
	sorted := append([]string(nil), ids...)
	sort.Strings(sorted)
	sum := md5.Sum([]byte(strings.Join(sorted, ",")))
	return hex.EncodeToString(sum[:])
}

// TestClusterScopeIsOneChecksumOverEveryNamespace: as a Tengine-Ingress that watches
// every namespace computes it — versioned Secrets of three namespaces in one checksum,
// published in one namespace; and the per-namespace scope beside it, then retired.
func TestClusterScopeIsOneChecksumOverEveryNamespace(t *testing.T) {
	home, web, api := namespace(t), namespace(t), namespace(t)
	shared := newCert(t)
	var union []string
	perNamespace := map[string][]string{}
	for i, ns := range []string{home, web, api} {
		for j := range 2 {
			id := putSecret(t, ns, fmt.Sprintf("site-%d", 10*i+j), "1", newCert(t))
			union = append(union, id)
			perNamespace[ns] = append(perNamespace[ns], id)
		}
		// The same name and certificate in every namespace: the same ID, counted each time.
		id := putSecret(t, ns, "shared-7", "2", shared)
		union = append(union, id)
		perNamespace[ns] = append(perNamespace[ns], id)
	}
	if len(union) != 9 {
		t.Fatalf("want 9 IDs, have %d", len(union))
	}
	stop := startManagerWith(t, func(o *Options) {
		o.Namespaces, o.Scopes = []string{home, web, api}, []string{"cluster", "namespace"}
	})

	cluster := waitPublishedOfKind(t, home, ScopeCluster, tengineChecksum(union))
	wantScope := checksum.NewScope([]string{home, web, api}, checksum.DefaultVersionAnnotation)
	if got, err := checksum.ParseScope(cluster.GetAnnotations()[ScopeAnnotation]); err != nil || !got.Equal(wantScope) {
		t.Errorf("cluster scope recorded %q: %v", cluster.GetAnnotations()[ScopeAnnotation], err)
	}
	if len(cluster.Spec.IDs) != 9 {
		t.Errorf("cluster checksum lists %d IDs, want 9", len(cluster.Spec.IDs))
	}
	for ns, ids := range perNamespace {
		waitPublishedOfKind(t, ns, ScopeNamespace, tengineChecksum(ids))
	}

	// A change in one namespace: both its checksum and the cluster's follow.
	changed := putSecret(t, api, "site-20", "5", newCert(t))
	union[6], perNamespace[api][0] = changed, changed
	waitPublishedOfKind(t, home, ScopeCluster, tengineChecksum(union))
	waitPublishedOfKind(t, api, ScopeNamespace, tengineChecksum(perNamespace[api]))

	// The per-namespace scope switched off: its objects go, the cluster's stays.
	stop()
	startManager(t, home, web, api)
	deadline := time.Now().Add(20 * time.Second)
	for ns := range perNamespace {
		for len(publishedOfKind(t, ns, ScopeNamespace)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("per-namespace checksums left in %s after the scope was switched off", ns)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitPublishedOfKind(t, home, ScopeCluster, tengineChecksum(union))
}

func publishedOfKind(t *testing.T, ns string, kind ScopeKind) []string {
	t.Helper()
	var sums []string
	for _, p := range published(t, ns) {
		if kindOf(&p) == kind {
			sums = append(sums, p.Spec.Checksum)
		}
	}
	return sums
}

// waitPublishedOfKind waits until ns holds exactly one checksum of the kind, equal to sum.
func waitPublishedOfKind(t *testing.T, ns string, kind ScopeKind, sum string) *tenginev1.SecretCheckSum {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var found []*tenginev1.SecretCheckSum
		for _, p := range published(t, ns) {
			if kindOf(&p) == kind && p.Spec.Checksum == sum {
				found = append(found, &p)
			}
		}
		if len(found) == 1 && len(publishedOfKind(t, ns, kind)) == 1 {
			return found[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("want one %s checksum %s in %s, have %v", kind, sum, ns, publishedOfKind(t, ns, kind))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestLeftOutReportedOnceAcrossLeaderChange: Tengine's inclusion rules decide, each
// problem is reported once, and a new leader does not report it again.
func TestLeftOutReportedOnceAcrossLeaderChange(t *testing.T) {
	ns := namespace(t)
	good, other := newCert(t), newCert(t)
	counted := putSecret(t, ns, "site-1", "1", good)
	bad := map[string]map[string][]byte{
		"mismatch-2": {corev1.TLSCertKey: good.PEM(), corev1.TLSPrivateKeyKey: other.KeyPEM()},
		"nokey-3":    {corev1.TLSCertKey: good.PEM()},
		"keyfirst-4": {corev1.TLSCertKey: append(good.KeyPEM(), good.PEM()...), corev1.TLSPrivateKeyKey: good.KeyPEM()},
	}
	for name, data := range bad {
		createSecret(t, ns, name, map[string]string{checksum.DefaultVersionAnnotation: "1"}, data)
	}
	caOnly := createSecret(t, ns, "client-ca-5", map[string]string{checksum.DefaultVersionAnnotation: "2"}, map[string][]byte{"ca.crt": good.PEM()})
	// cert-manager's Secrets carry no version: never reported, whatever they hold.
	createSecret(t, ns, "web-tls", nil, map[string][]byte{corev1.TLSCertKey: good.PEM(), corev1.TLSPrivateKeyKey: other.KeyPEM()})

	stop := startManager(t, ns)
	first := waitPublished(t, ns, counted, caOnly)
	if caOnly != "5-2-" {
		t.Errorf("CA-only Secret's ID %q, want 5-2-", caOnly)
	}
	for name, text := range map[string]string{"mismatch-2": "do not load as a pair", "nokey-3": "neither", "keyfirst-4": "not a CERTIFICATE"} {
		waitForEvent(t, ns, name, text)
	}
	stop()
	// A new leader: same objects, same problems.
	startManager(t, ns)
	time.Sleep(settle)
	if again := waitPublished(t, ns, counted, caOnly); again.UID != first.UID {
		t.Error("the new leader published an unchanged checksum again")
	}
	for name := range bad {
		if got := eventsAbout(t, ns, name); len(got) != 1 {
			t.Errorf("%s reported %d times across a leader change, want once", name, len(got))
		}
	}
	if got := eventsAbout(t, ns, "web-tls"); len(got) != 0 {
		t.Errorf("an unversioned Secret was reported: %s", got[0].Note)
	}
}

// createSecret stores a Secret as given and returns its ID ("" when left out).
func createSecret(t *testing.T, ns, name string, annotations map[string]string, data map[string][]byte) string {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}, Data: data}
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	id, _ := checksum.SecretID(name, annotations, checksum.DefaultVersionAnnotation, data)
	return id
}

// TestTooManyIDsArePublishedWithoutThem: past the size limit the checksum is still
// published, its IDs left out, and that is said in an annotation, an event and a metric.
func TestTooManyIDsArePublishedWithoutThem(t *testing.T) {
	ns := namespace(t)
	c := newCert(t)
	var ids []string
	for i := range 60 { // 60 IDs of ~50 bytes and the overhead: over 4096 bytes
		ids = append(ids, putSecret(t, ns, fmt.Sprintf("site-%d", i), "1", c))
	}
	startManagerWith(t, func(o *Options) { o.Namespaces, o.MaxObjectBytes = []string{ns}, 4096 })
	got := waitPublished(t, ns, ids...)
	if len(got.Spec.IDs) != 0 || !strings.Contains(got.Annotations[checksum.IDsOmittedAnnotation], "60 IDs") {
		t.Errorf("ids %d, annotation %q", len(got.Spec.IDs), got.Annotations[checksum.IDsOmittedAnnotation])
	}
	testenv.Eventually(t, "an IDsOmitted event", 20*time.Second, func() bool {
		for _, e := range listEvents(t, ns) {
			if e.Reason == tenginev1alpha1.ReasonIDsOmitted && e.Regarding.Name == got.Name && strings.Contains(e.Note, "4096") {
				return true
			}
		}
		return false
	})
	if v := counter(t, defaultMetrics.idsOmitted.WithLabelValues(string(checksum.TrackSecrets), "cluster", ns)); v != 1 {
		t.Errorf("ids-omitted metric %v", v)
	}
}

// TestObjectsNotRecordingTheirScopeArePublishedAgain: an older version's object (no scope
// annotation) with the current checksum is replaced by one that says what it covers, or
// an all-namespaces data plane would take it for its own and diff against it.
func TestObjectsNotRecordingTheirScopeArePublishedAgain(t *testing.T) {
	ns := namespace(t)
	id := putSecret(t, ns, "site-1", "1", newCert(t))
	old := &tenginev1.SecretCheckSum{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "secret-", Labels: map[string]string{ManagedByLabel: managedByValue}},
		Spec:       tenginev1.SecretCheckSumSpec{Checksum: checksum.Sum([]string{id}), IDs: []string{id}, Timestamp: metav1.Now()},
	}
	if err := env.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	startManagerWith(t, func(o *Options) { o.Namespaces, o.Scopes = []string{ns}, []string{"namespace"} })
	var got tenginev1.SecretCheckSum
	testenv.Eventually(t, "the checksum published again, recording its scope", 20*time.Second, func() bool {
		items := published(t, ns)
		if len(items) != 1 {
			return false
		}
		got = items[0]
		return got.UID != old.UID
	})
	want := checksum.NewScope([]string{ns}, checksum.DefaultVersionAnnotation).String()
	if got.Spec.Checksum != old.Spec.Checksum || got.Annotations[ScopeAnnotation] != want {
		t.Errorf("republished %s with scope %q, want %s with %q", got.Spec.Checksum, got.Annotations[ScopeAnnotation], old.Spec.Checksum, want)
	}
}
