package podcert

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/trustplane/trustplane/api/certificates"
)

// unknownSignerAfter is how long a request may be pending before its signer is reported
// (certificates.ReasonUnknownSigner): long enough for a signer that works to answer, so a
// new one is not reported.
const unknownSignerAfter = 10 * time.Second

// maxSuggestionDistance is how many single-character edits make a known signer's name a
// likely meaning of a misspelled one.
const maxSuggestionDistance = 3

// reportUnanswered reports, once per request, a pending request whose signer has
// concluded no request of this manager since it started.
func (m *Manager) reportUnanswered(ctx context.Context, pod *corev1.Pod, pcr *certificatesv1.PodCertificateRequest, st *stateWait, now time.Time) {
	pending := now.Sub(pcr.CreationTimestamp.Time)
	if st.eventEmittedForUnknownSigner || pending < unknownSignerAfter {
		return
	}
	signer := pcr.Spec.SignerName
	m.mu.Lock()
	known := make([]string, 0, len(m.answered))
	for s := range m.answered {
		known = append(known, s)
	}
	m.mu.Unlock()
	if slices.Contains(known, signer) {
		return
	}
	slices.Sort(known)
	st.eventEmittedForUnknownSigner = true
	message := fmt.Sprintf("PodCertificateRequest %s has been pending for %s, waiting for signer %q, which has answered no request of this node since the agent started (%s). A request that no signer serves stays pending.",
		pcr.Namespace+"/"+pcr.Name, pending.Round(time.Second), signer, knownSigners(signer, known))
	logr.FromContextOrDiscard(ctx).Info("pod certificate request waits for an unknown signer",
		"pod", pod.Namespace+"/"+pod.Name, "request", pcr.Name, "signerName", signer, "answeringSigners", known)
	m.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificates.ReasonUnknownSigner, "Wait", "%s", message)
}

// knownSigners says which signers have answered, the nearest first when it is a likely
// meaning of signer.
func knownSigners(signer string, known []string) string {
	if len(known) == 0 {
		return "no signer has answered one yet"
	}
	best, bestDistance := "", maxSuggestionDistance+1
	for _, k := range known {
		if d := editDistance(signer, k); d < bestDistance {
			best, bestDistance = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	quoted := make([]string, len(known))
	for i, k := range known {
		quoted[i] = fmt.Sprintf("%q", k)
	}
	return "signers that have: " + strings.Join(quoted, ", ")
}

// editDistance is the Levenshtein distance of two strings, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
