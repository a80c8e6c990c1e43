package podcertsigner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/manager"
	"github.com/trustplane/trustplane/internal/podcert"
)

// The canary reads what it judges by: namespaces and nodes by label, the Events of
// kubelets and of this signer, and the issued requests of the canaries.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=list;watch

// PreviewBundleName is the ClusterTrustBundle the canaries load while a next CA is
// previewed: every CA, the next one included, labelled canarying=preview.
func PreviewBundleName(signerName string) string {
	return strings.Replace(signerName, "/", ":", 1) + ":preview-bundle"
}

// canaries are the namespaces and nodes the canary selectors select now.
type canaries struct {
	namespaces, nodes map[string]bool
}

func (c canaries) empty() bool { return len(c.namespaces) == 0 && len(c.nodes) == 0 }

func (c canaries) String() string {
	names := func(m map[string]bool) string {
		var out []string
		for n := range m {
			out = append(out, n)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	return fmt.Sprintf("namespaces [%s], nodes [%s]", names(c.namespaces), names(c.nodes))
}

// selectCanaries lists the namespaces and nodes the canary selectors match, live from the
// API server (the rotation moves on what it reads, not on a cache that may lag; a change
// of their labels wakes the CA controller through its metadata watches).
func (r *Reconciler) selectCanaries(ctx context.Context) (canaries, error) {
	c := canaries{namespaces: map[string]bool{}, nodes: map[string]bool{}}
	for _, of := range []struct {
		kind     string
		selector labels.Selector
		into     map[string]bool
	}{{"NamespaceList", r.opts.canaryNamespaces, c.namespaces}, {"NodeList", r.opts.canaryNodes, c.nodes}} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(of.kind))
		if err := r.APIReader.List(ctx, list, client.MatchingLabelsSelector{Selector: of.selector}); err != nil {
			return c, fmt.Errorf("listing the canaries (%s): %w", of.kind, err)
		}
		for _, o := range list.Items {
			of.into[o.Name] = true
		}
	}
	return c, nil
}

// judgeCanary says why the canaries fail the next CA (empty: they pass), from what
// happened to them since the observation began: a kubelet's CertificateOverdueForRefresh
// on a canary pod, a refusal of this signer on a canary's request, and a leaf — the
// canaries' issued ones and a probe the next CA signs — that does not verify against the
// preview bundle as published.
func (r *Reconciler) judgeCanary(ctx context.Context, rot *podcert.Rotation, who canaries, since, now time.Time) (string, error) {
	if why, err := r.canaryTroubles(ctx, who, since); why != "" || err != nil {
		return why, err
	}
	roots, err := r.publishedPreview(ctx)
	if err != nil {
		return "", err
	}
	if err := probeLeafVerifies(rot.Next, roots, r.opts.TrustDomain, now); err != nil {
		return "a leaf of the next CA does not verify against the preview bundle: " + err.Error(), nil
	}
	return r.canaryLeavesVerify(ctx, who, roots, now)
}

// canaryTroubles says what went wrong with the canaries since then (empty: nothing): a
// kubelet's CertificateOverdueForRefresh on a canary pod, or a refusal of this signer on a
// canary's request. It is judged whenever such an Event appears, not only at the end of
// the observation, so that a failing canary holds the rotation (and alerts) at once.
func (r *Reconciler) canaryTroubles(ctx context.Context, who canaries, since time.Time) (string, error) {
	overdue, err := r.canaryEvents(ctx, who, since, certificates.ReasonOverdueForRefresh, "")
	if err != nil {
		return "", err
	}
	if len(overdue) > 0 {
		return fmt.Sprintf("%s on %s", certificates.ReasonOverdueForRefresh, strings.Join(overdue, ", ")), nil
	}
	refused, err := r.canaryEvents(ctx, who, since, certificatesv1.PodCertificateRequestConditionTypeDenied, recorderName)
	if err != nil {
		return "", err
	}
	if len(refused) > 0 {
		return fmt.Sprintf("the signer refused %s", strings.Join(refused, ", ")), nil
	}
	return "", nil
}

// canaryEvents names the objects (namespace/name) of the Events with reason, from
// reportingController when it is set, about a canary since then.
func (r *Reconciler) canaryEvents(ctx context.Context, who canaries, since time.Time, reason, reportingController string) ([]string, error) {
	// The caches of watchCanaryTroubles hold exactly these Events; without them (a
	// Reconciler not set up by Setup), the API server is asked.
	// Reasons are checked below either way: the cache was filled by that field selector,
	// and a cache lists by field only through an index.
	reader, opts := r.troubles[reason], []client.ListOption(nil)
	if reader == nil {
		reader, opts = r.APIReader, []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("reason", reason)}}
	}
	list := &corev1.EventList{}
	if err := reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s events: %w", reason, err)
	}
	var about []string
	for _, e := range list.Items {
		if e.Reason != reason || reportingController != "" && e.ReportingController != reportingController {
			continue
		}
		if eventTime(e).Before(since) || !r.isCanary(ctx, who, e.InvolvedObject) {
			continue
		}
		about = append(about, e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name)
	}
	sort.Strings(about)
	return about, nil
}

// eventTime is the last time an Event was seen, whichever API wrote it.
func eventTime(e corev1.Event) time.Time {
	t := e.EventTime.Time
	for _, other := range []time.Time{e.LastTimestamp.Time, e.FirstTimestamp.Time} {
		if other.After(t) {
			t = other
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// isCanary says whether the pod or request an Event is about is a canary: in a canary
// namespace, or (read from the API server) on a canary node.
func (r *Reconciler) isCanary(ctx context.Context, who canaries, obj corev1.ObjectReference) bool {
	if who.namespaces[obj.Namespace] {
		return true
	}
	if len(who.nodes) == 0 {
		return false
	}
	key := client.ObjectKey{Namespace: obj.Namespace, Name: obj.Name}
	switch obj.Kind {
	case "Pod":
		pods := r.Cached // the signer's own cache of pods (their node kept)
		if pods == nil {
			pods = r.APIReader
		}
		pod := &corev1.Pod{}
		return pods.Get(ctx, key, pod) == nil && who.nodes[pod.Spec.NodeName]
	case "PodCertificateRequest":
		pcr := &certificatesv1.PodCertificateRequest{} // the manager's cache: the signer watches them
		return r.Client.Get(ctx, key, pcr) == nil && who.nodes[string(pcr.Spec.NodeName)]
	}
	return false
}

// publishedPreview reads the preview bundle as the API server serves it.
func (r *Reconciler) publishedPreview(ctx context.Context) (*x509.CertPool, error) {
	ctb := &certificatesv1.ClusterTrustBundle{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: PreviewBundleName(r.opts.SignerName)}, ctb); err != nil {
		return nil, fmt.Errorf("reading the preview bundle: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ctb.Spec.TrustBundle)) {
		return nil, fmt.Errorf("the preview bundle %s holds no certificate", ctb.Name)
	}
	return roots, nil
}

// probeLeafVerifies signs a throwaway leaf with the next CA, as the signer will sign
// leaves once it is live, and verifies it against roots.
func probeLeafVerifies(next *podcert.CAEntry, roots *x509.CertPool, trustDomain string, now time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	req := Request{Namespace: "trustplane-canary", ServiceAccountName: "probe"}
	v := Validity{NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour)}
	issued, err := Issue(&CA{Cert: next.Cert, Key: next.Key}, key.Public(), req, Policy{TrustDomain: trustDomain}, v)
	if err != nil {
		return err
	}
	return verifyChain(issued.Chain, roots, now)
}

// canaryLeavesVerify verifies the live leaves the signer issued to canaries against roots.
func (r *Reconciler) canaryLeavesVerify(ctx context.Context, who canaries, roots *x509.CertPool, now time.Time) (string, error) {
	list := &certificatesv1.PodCertificateRequestList{}
	if err := r.APIReader.List(ctx, list); err != nil {
		return "", fmt.Errorf("listing PodCertificateRequests: %w", err)
	}
	for _, pcr := range list.Items {
		if pcr.Spec.SignerName != r.opts.SignerName || pcr.Status.CertificateChain == "" || pcr.Status.NotAfter == nil || !pcr.Status.NotAfter.After(now) {
			continue
		}
		if !who.namespaces[pcr.Namespace] && !who.nodes[string(pcr.Spec.NodeName)] {
			continue
		}
		if err := verifyChain(pcr.Status.CertificateChain, roots, now); err != nil {
			return fmt.Sprintf("the leaf of %s/%s does not verify against the preview bundle: %v", pcr.Namespace, pcr.Name, err), nil
		}
	}
	return "", nil
}

// verifyChain verifies the leaf of a PEM chain (leaf first) against roots at now.
func verifyChain(chainPEM string, roots *x509.CertPool, now time.Time) error {
	certs, err := podcert.ParseCertificates([]byte(chainPEM))
	if err != nil {
		return err
	}
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		intermediates.AddCert(c)
	}
	_, err = certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// watchCanaryTroubles makes the CA controller look at once, while canaries are observed,
// when a kubelet reports a certificate overdue for refresh or this signer refuses a
// request: the rotation then judges what went wrong (canaryTroubles), reading these same
// caches. Each is a cache of its own (one field selector each), holding only what the
// judge reads.
func (r *Reconciler) watchCanaryTroubles(mgr ctrl.Manager, b *builder.Builder, toKey handler.EventHandler) (*builder.Builder, error) {
	r.troubles = map[string]client.Reader{}
	observing := predicate.NewPredicateFuncs(func(client.Object) bool { return r.observing.Load() })
	for reason, selector := range map[string]fields.Selector{
		certificates.ReasonOverdueForRefresh: fields.OneTermEqualSelector("reason", certificates.ReasonOverdueForRefresh),
		certificatesv1.PodCertificateRequestConditionTypeDenied: fields.AndSelectors(
			fields.OneTermEqualSelector("reason", certificatesv1.PodCertificateRequestConditionTypeDenied),
			fields.OneTermEqualSelector("reportingComponent", recorderName)),
	} {
		c, err := cache.New(mgr.GetConfig(), cache.Options{
			HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
			ByObject: map[client.Object]cache.ByObject{&corev1.Event{}: {Field: selector, Transform: stripEvent}},
		})
		if err != nil {
			return nil, err
		}
		if err := manager.AddCache(mgr, c); err != nil {
			return nil, err
		}
		r.troubles[reason] = c
		b = b.WatchesRawSource(source.Kind(c, client.Object(&corev1.Event{}), toKey, observing))
	}
	return b, nil
}

// stripEvent keeps of an Event what the judge reads: what it is about, by whom, and when.
func stripEvent(obj any) (any, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return obj, nil
	}
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name, ResourceVersion: e.ResourceVersion},
		InvolvedObject: e.InvolvedObject, Reason: e.Reason, ReportingController: e.ReportingController,
		EventTime: e.EventTime, FirstTimestamp: e.FirstTimestamp, LastTimestamp: e.LastTimestamp, Series: e.Series}, nil
}

// selectionChanged passes the events of objects selector selects, before or after.
func selectionChanged(selector labels.Selector) predicate.Funcs {
	selects := func(o client.Object) bool { return selector.Matches(labels.Set(o.GetLabels())) }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return selects(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return selects(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return selects(e.ObjectOld) != selects(e.ObjectNew) },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// parseSelector is a label selector flag.
func parseSelector(flag, s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flag, s, err)
	}
	return sel, nil
}
