package nodeagent

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// Layouts of a projection's directory (--layout), and the file names of the SPIFFE
// Filesystem Delivery draft (spiffe/spiffe#376) as issue 43 names them. (The draft has
// since discussed credential-bundle.private-key.pem and x509.<td>.spiffe-trust-bundle.pem;
// see docs/podcert.md.)
const (
	// LayoutKubernetes writes kubelet's files: BundleFile and the projection's paths.
	LayoutKubernetes = "kubernetes"
	// LayoutSPIFFE makes each projection's directory a SPIFFE credential folder.
	LayoutSPIFFE = "spiffe"
	// SPIFFECredentialBundleFile holds the PKCS#8 key then the chain, leaf first, without
	// the trust anchor.
	SPIFFECredentialBundleFile = "credential-bundle.pem"
	// TrustBundleSuffix ends the name of each trust bundle file: <trust domain> then it.
	TrustBundleSuffix = ".trust-bundle.pem"
)

// canaryingBundles selects the ClusterTrustBundles labelled with a rotation stage: the
// only ones selectTrustBundles can choose, so the agent's cache holds no others.
var canaryingBundles = func() labels.Selector {
	stage, err := labels.NewRequirement(certificates.LabelCanarying, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key
	}
	return labels.NewSelector().Add(*stage)
}()

// spiffeCredentialBundle is the draft's credential bundle of a credential: the key, then
// the chain's certificates leaf first, stopping before a trailing self-signed
// certificate (the trust anchor, which the draft forbids there: a peer must find it in a
// trust bundle, not take it from the chain), each block without headers or anything
// between them. It returns the leaf too.
func spiffeCredentialBundle(privateKey, chain []byte) ([]byte, *x509.Certificate, error) {
	keyBlock, _ := pem.Decode(privateKey)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		return nil, nil, errors.New("the private key is not one PEM PRIVATE KEY (PKCS#8) block")
	}
	certs, err := podcert.ParseCertificates(chain)
	if err != nil {
		return nil, nil, fmt.Errorf("the certificate chain: %w", err)
	}
	if len(certs) > 1 && isSelfSigned(certs[len(certs)-1]) {
		certs = certs[:len(certs)-1]
	}
	out := pem.EncodeToMemory(&pem.Block{Type: keyBlock.Type, Bytes: keyBlock.Bytes})
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out, certs[0], nil
}

// isSelfSigned says whether c is its own issuer, signature included.
func isSelfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}

// selectTrustBundles is the ClusterTrustBundles a workload of trustDomain, issued by
// signerName, loads: the signer's own (spec.signerName: a bundle of another signer says
// nothing of this one's leaves), for that workload trust domain, and of one rotation
// stage per peer trust domain — the preview bundles (canarying=preview) of a peer trust
// domain when the workload is one of their canaries (canary says so; a preview bundle is
// complete on its own), else its live ones — sorted by name so that the files are written
// the same way every time. Pure: its caller lists, and decides who is a canary.
func selectTrustBundles(all []certificatesv1.ClusterTrustBundle, signerName string, trustDomain spiffeid.TrustDomain,
	canary func(certificatesv1.ClusterTrustBundle) bool) []certificatesv1.ClusterTrustBundle {
	byPeer := map[string]map[string][]certificatesv1.ClusterTrustBundle{} // peer → stage → bundles
	for _, b := range all {
		stage := b.Labels[certificates.LabelCanarying]
		if b.Spec.SignerName != signerName || signerName == "" || b.Labels[certificates.LabelWorkloadTrustDomain] != trustDomain.Name() ||
			(stage != certificates.LabelCanaryingLive && stage != certificates.LabelCanaryingPreview) {
			continue
		}
		peer := b.Labels[certificates.LabelPeerTrustDomain]
		if byPeer[peer] == nil {
			byPeer[peer] = map[string][]certificatesv1.ClusterTrustBundle{}
		}
		byPeer[peer][stage] = append(byPeer[peer][stage], b)
	}
	var selected []certificatesv1.ClusterTrustBundle
	for _, stages := range byPeer {
		previews := stages[certificates.LabelCanaryingPreview]
		if len(previews) > 0 && canary != nil && slices.ContainsFunc(previews, canary) {
			selected = append(selected, previews...)
		} else {
			selected = append(selected, stages[certificates.LabelCanaryingLive]...)
		}
	}
	slices.SortFunc(selected, func(a, b certificatesv1.ClusterTrustBundle) int { return strings.Compare(a.Name, b.Name) })
	return selected
}

// canaryOf says whether pod is a canary of a preview bundle: its namespace or this node
// matches the selectors the signer wrote on the bundle
// (podcert.trustplane.io/canary-namespace-selector, …-node-selector). A selector that does
// not parse selects nothing; a namespace or node the agent cannot read is no canary.
func (a *Agent) canaryOf(ctx context.Context, pod *corev1.Pod) func(certificatesv1.ClusterTrustBundle) bool {
	return func(b certificatesv1.ClusterTrustBundle) bool {
		matches := func(annotation string, obj client.Object, key client.ObjectKey) bool {
			raw := b.Annotations[annotation]
			sel, err := labels.Parse(raw)
			if raw == "" || err != nil || sel.Empty() {
				return false
			}
			return a.reader.Get(ctx, key, obj) == nil && sel.Matches(labels.Set(obj.GetLabels()))
		}
		return matches(certificates.AnnotationCanaryNamespaceSelector, &corev1.Namespace{}, client.ObjectKey{Name: pod.Namespace}) ||
			matches(certificates.AnnotationCanaryNodeSelector, &corev1.Node{}, client.ObjectKey{Name: pod.Spec.NodeName})
	}
}

// trustBundleFiles are the trust bundle files of the selected bundles, by file name: one
// per peer trust domain (label peer-trust-domain), holding the CERTIFICATE blocks of
// every bundle of that domain, each certificate once. A bundle whose peer trust domain is
// missing or not a SPIFFE trust domain (nor so a safe file name) is skipped and named in
// the returned skipped list.
func trustBundleFiles(selected []certificatesv1.ClusterTrustBundle) (map[string][]byte, []string) {
	files := map[string][]byte{}
	seen := map[string]bool{}
	var skipped []string
	for _, b := range selected {
		td, err := spiffeid.TrustDomainFromString(b.Labels[certificates.LabelPeerTrustDomain])
		if err != nil || td.Name() != b.Labels[certificates.LabelPeerTrustDomain] {
			skipped = append(skipped, fmt.Sprintf("ClusterTrustBundle %s: label %s %q is not a SPIFFE trust domain",
				b.Name, certificates.LabelPeerTrustDomain, b.Labels[certificates.LabelPeerTrustDomain]))
			continue
		}
		name := td.Name() + TrustBundleSuffix
		for rest := []byte(b.Spec.TrustBundle); ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			// The API server admits CERTIFICATE blocks only; anything else would not be a
			// trust anchor anyway. Headers are dropped: the draft allows none.
			if block.Type != "CERTIFICATE" || seen[name+"\x00"+string(block.Bytes)] {
				continue
			}
			seen[name+"\x00"+string(block.Bytes)] = true
			files[name] = append(files[name], pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})...)
		}
	}
	return files, skipped
}

// isTrustBundleFile says whether name, in a SPIFFE credential folder, is a trust bundle
// file: those not written again are stale (a trust domain no longer configured).
func isTrustBundleFile(name string) bool {
	return strings.HasSuffix(name, TrustBundleSuffix) && name != TrustBundleSuffix
}

// spiffeFiles are the files of the SPIFFE layout beside the projection's own: the trust
// bundle files, then the credential bundle last, so that a workload seeing it renewed
// finds the bundles that verify its peers in place. Without a SPIFFE ID in the leaf, the
// pod hears of it once and gets no trust bundle file (which trust domain's would it
// load?); its credentials are written all the same.
func (a *Agent) spiffeFiles(ctx context.Context, pod *corev1.Pod, key podcert.Key, signerName string, privateKey, chain []byte) ([]file, error) {
	credential, leaf, err := spiffeCredentialBundle(privateKey, chain)
	if err != nil {
		a.reportNoSPIFFEID(ctx, pod, key, err.Error())
		return []file{{SPIFFECredentialBundleFile, append(append([]byte(nil), privateKey...), chain...)}}, nil
	}
	id, err := x509svid.IDFromCert(leaf)
	if err != nil {
		a.reportNoSPIFFEID(ctx, pod, key, err.Error())
		return []file{{SPIFFECredentialBundleFile, credential}}, nil
	}
	a.mu.Lock()
	delete(a.noSPIFFEID, key) // a certificate without one again is reported again
	a.mu.Unlock()
	var all certificatesv1.ClusterTrustBundleList
	if err := a.reader.List(ctx, &all); err != nil {
		return nil, fmt.Errorf("listing ClusterTrustBundles for the trust bundles of %s: %w", id, err)
	}
	bundles, skipped := trustBundleFiles(selectTrustBundles(all.Items, signerName, id.TrustDomain(), a.canaryOf(ctx, pod)))
	for _, s := range skipped {
		log.FromContext(ctx).Info("not writing a trust bundle file", "volume", key.VolumeName, "problem", s)
	}
	var out []file
	for _, name := range slices.Sorted(maps.Keys(bundles)) {
		out = append(out, file{name, bundles[name]})
	}
	return append(out, file{SPIFFECredentialBundleFile, credential}), nil
}

// reportNoSPIFFEID logs and records a Warning event on pod, once per projection and
// problem, that its certificate has no SPIFFE ID the SPIFFE layout could file it under.
func (a *Agent) reportNoSPIFFEID(ctx context.Context, pod *corev1.Pod, key podcert.Key, problem string) {
	a.mu.Lock()
	reported := a.noSPIFFEID[key] == problem
	a.noSPIFFEID[key] = problem
	a.mu.Unlock()
	if reported {
		return
	}
	log.FromContext(ctx).Info("writing no trust bundle file: the certificate has no SPIFFE ID", "volume", key.VolumeName, "problem", problem)
	a.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificates.ReasonNoSPIFFEID, "WriteBundle",
		"%s has no SPIFFE ID (%s): its credential is written, but no trust bundle file (--layout=%s)", bundleName(key), problem, LayoutSPIFFE)
}

// podsOfSigner maps a ClusterTrustBundle to the pods of this node served for its signer,
// so that a changed bundle is written again to each of their folders (no polling).
func (a *Agent) podsOfSigner(ctx context.Context, o client.Object) []reconcile.Request {
	ctb, ok := o.(*certificatesv1.ClusterTrustBundle)
	if !ok || ctb.Spec.SignerName == "" {
		return nil
	}
	var pods corev1.PodList
	if err := a.reader.List(ctx, &pods); err != nil {
		log.FromContext(ctx).Error(err, "listing the node's pods for a changed ClusterTrustBundle", "clusterTrustBundle", ctb.Name)
		return nil
	}
	var out []reconcile.Request
	for i := range pods.Items {
		pod := &pods.Items[i]
		for _, src := range podcert.Projections(a.served(pod)) {
			if src.SignerName == ctb.Spec.SignerName {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}})
				break
			}
		}
	}
	return out
}
