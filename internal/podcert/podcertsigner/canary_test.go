package podcertsigner

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certificatesv1ac "k8s.io/client-go/applyconfigurations/certificates/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/testenv"
)

// canaryRun drives a canaried rotation on a fake clock: each tick moves the clock and
// touches the CA Secret, which makes the CA controller look again.
type canaryRun struct {
	t      *testing.T
	opts   Options
	clk    *clocktesting.FakeClock
	start  time.Time
	ticks  int
	events map[string]int // reason → events on the Secret seen so far
}

func (c *canaryRun) secret() *corev1.Secret {
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: c.opts.CANamespace, Name: c.opts.CASecretName}, s); err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *canaryRun) annotate(key, value string) {
	c.t.Helper()
	s := c.secret()
	if value == "" {
		delete(s.Annotations, key)
	} else {
		s.Annotations[key] = value
	}
	if err := env.Client.Update(ctx, s); err != nil {
		c.t.Fatal(err)
	}
}

func (c *canaryRun) tick(d time.Duration) {
	c.t.Helper()
	c.clk.Step(d)
	c.ticks++
	c.annotate("test.trustplane.io/tick", fmt.Sprint(c.ticks))
}

// bundle is the CAs (certificate PEM) of the named ClusterTrustBundle.
func (c *canaryRun) bundle(name string) string {
	ctb := &certificatesv1.ClusterTrustBundle{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: name}, ctb); err != nil {
		return ""
	}
	return ctb.Spec.TrustBundle
}

func count(bundle string) int { return strings.Count(bundle, "BEGIN CERTIFICATE") }

// waitStatus waits for the CA Secret's rotation status to start with reason, and logs
// the step of the timeline.
func (c *canaryRun) waitStatus(reason, step string) *corev1.Secret {
	c.t.Helper()
	var s *corev1.Secret
	testenv.Eventually(c.t, "rotation status "+reason, 20*time.Second, func() bool {
		s = c.secret()
		return strings.HasPrefix(s.Annotations[certificates.AnnotationCARotationStatus], reason)
	})
	c.t.Logf("timeline +%-9v %-22s live bundle %d CA(s), preview %d: %s", c.clk.Now().Sub(c.start), step,
		count(c.bundle(BundleName(c.opts.SignerName))), count(c.bundle(PreviewBundleName(c.opts.SignerName))), s.Annotations[certificates.AnnotationCARotationStatus])
	return s
}

func (c *canaryRun) waitEvent(reason string) {
	c.t.Helper()
	testenv.Eventually(c.t, "event "+reason+" on the CA Secret", 20*time.Second, func() bool {
		list := &corev1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace(c.opts.CANamespace)); err != nil {
			return false
		}
		n := 0
		for _, e := range list.Items {
			if e.InvolvedObject.Name == c.opts.CASecretName && e.Reason == reason {
				n++
			}
		}
		if n > c.events[reason] {
			c.events[reason] = n
			return true
		}
		return false
	})
}

func certsIn(t *testing.T, bundle string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	rest := []byte(bundle)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out[string(cert.SubjectKeyId)] = true
	}
}

// TestCanariedRotationTimeline: a next CA is first in the preview bundle only; with no
// canary selected the rotation holds and says so; a canary pod's overdue refresh fails
// the canary (held, Warning, metric) until the operator clears it; observed clean, the
// next CA goes live, signs an overlap later, and the old CA leaves once its last leaf
// has expired. A manager restart mid-observation neither restarts nor skips it; the
// operator's hold stops the rotation and a rollback drops a next CA.
func TestCanariedRotationTimeline(t *testing.T) {
	// The API server refuses an issued certificate whose notBefore is more than 5 minutes
	// from its own clock, so the fake clock starts 31h30m back: it reaches the present
	// when the next CA goes live, the one moment a leaf is requested.
	start := time.Now().Add(-(31*time.Hour + 30*time.Minute)).Truncate(time.Second)
	opts := DefaultOptions()
	opts.SignerName = "canary.example.com/pods"
	opts.CANamespace, opts.CASecretName = "default", "canary-ca"
	opts.CARotation, opts.CAOverlap, opts.CanaryObservation, opts.MaxLifetime = 24*time.Hour, time.Hour, 2*time.Hour, 2*time.Hour
	c := &canaryRun{t: t, opts: opts, clk: clocktesting.NewFakeClock(start), start: start, events: map[string]int{}}
	opts.Clock = c.clk
	var r *Reconciler
	setup := func(mgr ctrl.Manager) error {
		var err error
		r, err = Setup(mgr, opts)
		return err
	}
	stop := env.RunManager(t, setup)
	const ns = "signer-canary"
	node, pod := world(t, ns)
	live, preview := BundleName(opts.SignerName), PreviewBundleName(opts.SignerName)
	testenv.Eventually(t, "the first CA", 20*time.Second, func() bool { return r.SigningCA() != nil })
	firstCA := r.SigningCA()
	first := &x509.Certificate{AuthorityKeyId: firstCA.SubjectKeyId} // what its leaves name

	// 21h in (24h − overlap − observation): the next CA, in the preview bundle only.
	c.tick(21 * time.Hour)
	s := c.waitStatus(certificates.ReasonCanaryTargetsNothing, "preview, no canary")
	c.waitEvent(certificates.ReasonCanaryTargetsNothing)
	if s.Annotations[certificates.AnnotationNextStage] != "preview" || count(c.bundle(live)) != 1 || count(c.bundle(preview)) != 2 {
		t.Fatalf("preview: stage %q, live %d, preview %d", s.Annotations[certificates.AnnotationNextStage], count(c.bundle(live)), count(c.bundle(preview)))
	}
	// Held however long nothing is selected.
	c.tick(5 * time.Hour)
	c.waitStatus(certificates.ReasonCanaryTargetsNothing, "still no canary")

	// The namespace becomes a canary: the observation begins (the label is the trigger).
	nsObj := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[certificates.LabelCanary] = "true"
	if err := env.Client.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	observedAt := c.clk.Now()
	s = c.waitStatus(certificates.ReasonCAPreview, "canaries observed")
	if got := s.Annotations[certificates.AnnotationCanaryObservedSince]; got != observedAt.UTC().Format(time.RFC3339) {
		t.Fatalf("observed since %s, want %s", got, observedAt.UTC().Format(time.RFC3339))
	}

	// A restart mid-observation resumes it: same start, no step repeated.
	stop()
	stop = env.RunManager(t, setup)
	c.tick(30 * time.Minute)
	s = c.waitStatus(certificates.ReasonCAPreview, "after a restart")
	if got := s.Annotations[certificates.AnnotationCanaryObservedSince]; got != observedAt.UTC().Format(time.RFC3339) {
		t.Fatalf("after a restart the observation began again: since %s, want %s", got, observedAt.UTC().Format(time.RFC3339))
	}

	// A kubelet reports a canary pod's certificate overdue: the canary fails and holds at
	// once (the signer watches such Events), not only at the end of the observation.
	overdue := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "overdue-"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
		Reason:         certificates.ReasonOverdueForRefresh, Message: "PodCertificate refresh overdue", Type: corev1.EventTypeWarning,
		FirstTimestamp: metav1.NewTime(c.clk.Now()), LastTimestamp: metav1.NewTime(c.clk.Now()), Source: corev1.EventSource{Component: "kubelet"}}
	if err := env.Client.Create(ctx, overdue); err != nil {
		t.Fatal(err)
	}
	s = c.waitStatus(certificates.ReasonCanaryFailed, "canary failed")
	c.waitEvent(certificates.ReasonCanaryFailed)
	if why := s.Annotations[certificates.AnnotationCanaryFailed]; !strings.Contains(why, certificates.ReasonOverdueForRefresh) || !strings.Contains(why, ns+"/"+pod.Name) {
		t.Errorf("failure says %q, want the overdue pod", why)
	}
	if count(c.bundle(live)) != 1 {
		t.Fatal("a failed canary's CA reached the live bundle")
	}
	// The condition is on the bundles too, for whoever may read them but not the Secret.
	testenv.Eventually(t, "the rotation's condition on the live bundle", 20*time.Second, func() bool {
		ctb := &certificatesv1.ClusterTrustBundle{}
		return env.Client.Get(ctx, client.ObjectKey{Name: live}, ctb) == nil &&
			ctb.Annotations[certificates.AnnotationCARotationStatus] == s.Annotations[certificates.AnnotationCARotationStatus]
	})
	c.tick(3 * time.Hour)
	c.waitStatus(certificates.ReasonCanaryFailed, "still held")

	// The operator clears the failure: observed again from now, clean this time.
	c.annotate(certificates.AnnotationCanaryFailed, "")
	c.waitStatus(certificates.ReasonCAPreview, "observing again")
	c.tick(2 * time.Hour)
	c.waitStatus(certificates.ReasonCALive, "live")
	c.waitEvent(certificates.ReasonCALive)
	liveCAs := certsIn(t, c.bundle(live))
	if len(liveCAs) != 2 || !liveCAs[string(first.AuthorityKeyId)] {
		t.Fatalf("live bundle after the canary: %d CAs", len(liveCAs))
	}
	// Still signed by the old CA until the overlap has passed (the fake clock is at the
	// present: the API server takes this leaf).
	if leaf := leafOf(t, issuedOK(t, request(t, node, pod, opts.SignerName, "ECDSAP256"))); string(leaf.AuthorityKeyId) != string(first.AuthorityKeyId) {
		t.Fatal("the next CA signed before its overlap in the live bundle")
	}

	// An overlap later it signs; the old CA stays in the bundle until its last leaf expires.
	c.tick(opts.CAOverlap + time.Second)
	testenv.Eventually(t, "the next CA signs", 20*time.Second, func() bool { return c.secret().Annotations[certificates.AnnotationNextStage] == "" })
	c.waitEvent(certificates.ReasonCASigning)
	c.t.Logf("timeline +%-9v %-22s live bundle %d CA(s)", c.clk.Now().Sub(start), "signing", count(c.bundle(live)))
	testenv.Eventually(t, "every replica signs with the next CA", 20*time.Second, func() bool { return !r.SigningCA().Equal(firstCA) })
	second := &x509.Certificate{AuthorityKeyId: r.SigningCA().SubjectKeyId}
	if !certsIn(t, c.bundle(live))[string(first.AuthorityKeyId)] {
		t.Fatal("after the overlap the old CA left the bundle while its leaf lives")
	}
	// Past the last leaf of the old CA (2h lifetime + the reservation's 10m): gone.
	c.tick(opts.MaxLifetime + 11*time.Minute)
	c.waitEvent(certificates.ReasonCARetired)
	testenv.Eventually(t, "the old CA gone from the bundles", 20*time.Second, func() bool {
		return !certsIn(t, c.bundle(live))[string(first.AuthorityKeyId)] && !certsIn(t, c.bundle(preview))[string(first.AuthorityKeyId)]
	})
	c.t.Logf("timeline +%-9v %-22s live bundle %d CA(s)", c.clk.Now().Sub(start), "old CA gone", count(c.bundle(live)))

	// The operator holds: the next rotation does not move while held.
	c.annotate(certificates.AnnotationCARotationHold, "true")
	c.waitStatus(certificates.ReasonCARotationHeld, "held")
	c.tick(24 * time.Hour)
	c.waitStatus(certificates.ReasonCARotationHeld, "held a day")
	if count(c.bundle(preview)) != 1 {
		t.Fatal("a held rotation generated a next CA")
	}
	c.annotate(certificates.AnnotationCARotationHold, "")
	s = c.waitStatus(certificates.ReasonCAPreview, "released: preview")
	dropped := certsIn(t, c.bundle(preview))
	// And rolls the next CA back: it leaves the preview bundle.
	c.annotate(certificates.AnnotationCARollback, "1")
	c.waitEvent(certificates.ReasonCARolledBack)
	testenv.Eventually(t, "the rolled back CA gone", 20*time.Second, func() bool {
		s = c.secret()
		return s.Annotations[certificates.AnnotationCARollbackHandled] == "1"
	})
	for ski := range dropped {
		if ski != string(second.AuthorityKeyId) && certsIn(t, c.bundle(preview))[ski] {
			t.Error("the rolled back CA is still in the preview bundle")
		}
	}
	stop()
}

// TestCanaryJudgesEachSignal: the judge fails a canary for each of the signals —
// a kubelet's CertificateOverdueForRefresh on a canary pod (by namespace, or by node for a
// pod elsewhere), a refusal of this signer on a canary's request, and a leaf of the next
// CA that the preview bundle as published does not verify — and passes one with none.
// What happened before the observation, or to pods that are not canaries, counts for
// nothing.
func TestCanaryJudgesEachSignal(t *testing.T) {
	opts := DefaultOptions()
	opts.SignerName = "judge.example.com/pods"
	opts.CANamespace, opts.CASecretName = "default", "judge-ca"
	opts.CanaryObservation = time.Hour
	opts, err := opts.withSelectors()
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: env.Client, APIReader: env.Client, opts: opts, policy: opts.Policy()}
	const ns = "signer-judge"
	_, pod := world(t, ns) // node signer-judge-node; the namespace is no canary
	now := time.Now()
	current, _ := podcert.NewCA("current", now, 24*time.Hour)
	next, _ := podcert.NewCA("next", now, 24*time.Hour)
	rot := &podcert.Rotation{Current: current, Next: next, Canary: podcert.Canary{Stage: podcert.StagePreview}}
	publish := func(bundle string) {
		ctb := certificatesv1ac.ClusterTrustBundle(PreviewBundleName(opts.SignerName)).
			WithSpec(certificatesv1ac.ClusterTrustBundleSpec().WithSignerName(opts.SignerName).WithTrustBundle(bundle))
		if err := env.Client.Apply(ctx, ctb, client.FieldOwner("test"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	publish(rot.PreviewBundle())
	since := now.Add(-time.Minute)
	byNamespace := canaries{namespaces: map[string]bool{ns: true}, nodes: map[string]bool{}}
	byNode := canaries{namespaces: map[string]bool{}, nodes: map[string]bool{ns + "-node": true}}
	neither := canaries{namespaces: map[string]bool{"elsewhere": true}, nodes: map[string]bool{"other-node": true}}
	judge := func(who canaries) string {
		t.Helper()
		why, err := r.judgeCanary(ctx, rot, who, since, now)
		if err != nil {
			t.Fatal(err)
		}
		return why
	}
	if why := judge(byNamespace); why != "" {
		t.Fatalf("a clean canary failed: %s", why)
	}

	event := func(reason, controller string, at time.Time, kind, name string) *corev1.Event {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "judge-"}, Reason: reason, Type: corev1.EventTypeWarning,
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name}, Message: reason,
			FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Source: corev1.EventSource{Component: "kubelet"}, ReportingController: controller}
		if controller != "" {
			e.ReportingInstance, e.Source = controller+"-x", corev1.EventSource{}
		}
		if err := env.Client.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Before the observation: nothing.
	old := event(certificates.ReasonOverdueForRefresh, "", since.Add(-time.Hour), "Pod", pod.Name)
	if why := judge(byNamespace); why != "" {
		t.Fatalf("an event from before the observation failed the canary: %s", why)
	}
	_ = env.Client.Delete(ctx, old)

	overdue := event(certificates.ReasonOverdueForRefresh, "", now, "Pod", pod.Name)
	for name, who := range map[string]canaries{"by namespace": byNamespace, "by node": byNode} {
		if why := judge(who); !strings.Contains(why, certificates.ReasonOverdueForRefresh) || !strings.Contains(why, ns+"/"+pod.Name) {
			t.Errorf("overdue pod, canary %s: %q", name, why)
		}
	}
	if why := judge(neither); why != "" {
		t.Errorf("a pod that is no canary failed the canary: %s", why)
	}
	_ = env.Client.Delete(ctx, overdue)

	refused := event(certificatesv1.PodCertificateRequestConditionTypeDenied, "trustplane-"+Name, now, "PodCertificateRequest", "req-x")
	if why := judge(byNamespace); !strings.Contains(why, "the signer refused "+ns+"/req-x") {
		t.Errorf("a refusal: %q", why)
	}
	_ = env.Client.Delete(ctx, refused)
	// Another controller's Denied is not this signer's refusal.
	other := event(certificatesv1.PodCertificateRequestConditionTypeDenied, "example.com-other-signer", now, "PodCertificateRequest", "req-y")
	if why := judge(byNamespace); why != "" {
		t.Errorf("another signer's refusal failed the canary: %s", why)
	}
	_ = env.Client.Delete(ctx, other)

	// The preview bundle as published lacks the next CA (edited by hand, say).
	publish(string(current.CertPEM))
	if why := judge(byNamespace); !strings.Contains(why, "a leaf of the next CA does not verify against the preview bundle") {
		t.Errorf("a preview bundle without the next CA: %q", why)
	}
}
