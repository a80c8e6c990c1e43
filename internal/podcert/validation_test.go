package podcert

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/trustplane/trustplane/api/certificates"
)

// TestValidationSpeaksLikeTheAPIServer: the messages are the ones kube-apiserver 1.37.1
// returned for the same podCertificate volume sources (copied from its answers).
func TestValidationSpeaksLikeTheAPIServer(t *testing.T) {
	path := field.NewPath("spec", "volumes").Index(0).Child("projected", "sources").Index(0).Child("podCertificate")
	for _, c := range []struct{ signer, keyType, want string }{
		{"trustplane.io/pod-identity", "RSA1024", `spec.volumes[0].projected.sources[0].podCertificate.keyType: Unsupported value: "RSA1024": supported values: "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"`},
		{"pod-identity", "ECDSAP256", `spec.volumes[0].projected.sources[0].podCertificate.signerName: Invalid value: "pod-identity": must be a fully qualified domain and path of the form 'example.com/signer-name'`},
		{"trustplane.io/pod/identity", "ECDSAP256", `spec.volumes[0].projected.sources[0].podCertificate.signerName: Invalid value: "trustplane.io/pod/identity": must be a fully qualified domain and path of the form 'example.com/signer-name'`},
		{"Trustplane.io/pod-identity", "ECDSAP256", `spec.volumes[0].projected.sources[0].podCertificate.signerName: Invalid value: "Trustplane.io": validating label "Trustplane": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"trustplane.io/Pod_Identity!", "ECDSAP256", `spec.volumes[0].projected.sources[0].podCertificate.signerName: Invalid value: "Pod_Identity!": validating label "Pod_Identity!": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		{"localhost/pod-identity", "ED25519", `spec.volumes[0].projected.sources[0].podCertificate.signerName: Invalid value: "localhost": should be a domain with at least two segments separated by dots`},
		{"trustplane.io/pod-identty", "ECDSAP256", ""}, // well-formed: only no answer tells
	} {
		got := ValidateProjection(path, &corev1.PodCertificateProjection{SignerName: c.signer, KeyType: c.keyType}).ToAggregate()
		if (got == nil) != (c.want == "") || got != nil && got.Error() != c.want {
			t.Errorf("%s %s:\n got %v\nwant %s", c.signer, c.keyType, got, c.want)
		}
	}
}

// TestUnknownSignerReportedOncePerRequest: a request pending for a signer that has
// answered nothing is reported once, after unknownSignerAfter, with the nearest signer
// that has answered; a pending request of an answering signer is not.
func TestUnknownSignerReportedOncePerRequest(t *testing.T) {
	h := newHarness(t, "ECDSAP256")
	h.mustHandle()
	h.clock.Step(unknownSignerAfter - time.Second)
	h.mustHandle()
	if got := h.drain(); got[certificates.ReasonUnknownSigner] != 0 {
		t.Fatalf("reported before a signer had time to answer: %v", got)
	}
	h.clock.Step(time.Second)
	for range 3 {
		h.mustHandle()
		h.clock.Step(time.Minute)
	}
	if got := h.drain(); got[certificates.ReasonUnknownSigner] != 1 {
		t.Fatalf("events %v, want one %s", got, certificates.ReasonUnknownSigner)
	}

	// example.com/signer answers; a pod of the same node asks for example.com/signr.
	h.issue(24 * time.Hour)
	h.mustHandle()
	typo := h.pod.DeepCopy()
	typo.Name, typo.UID = "typo", "typo-uid"
	typo.Spec.Volumes[0].Projected.Sources[1].PodCertificate.SignerName = "example.com/signr"
	typoKey := Key{Namespace: "ns", PodName: "typo", PodUID: "typo-uid", VolumeName: "creds", SourceIndex: 1}
	for range 3 {
		if err := h.m.Handle(context.Background(), typo, typoKey); err != nil {
			t.Fatal(err)
		}
		h.clock.Step(time.Minute)
	}
	reports := unknownSignerEvents(h)
	if len(reports) != 1 {
		t.Fatalf("reports of the misspelled signer: %q, want one", reports)
	}
	for _, want := range []string{`waiting for signer "example.com/signr"`, `did you mean "example.com/signer"?`, "stays pending"} {
		if !strings.Contains(reports[0], want) {
			t.Errorf("the report %q does not say %q", reports[0], want)
		}
	}

	// The answering signer's refresh request pending for long: nothing to report.
	h.clock.Step(13 * time.Hour)
	h.mustHandle()
	h.clock.Step(time.Minute)
	h.mustHandle()
	if reports := unknownSignerEvents(h); len(reports) != 0 {
		t.Errorf("a signer that answers reported: %q", reports)
	}
}

// unknownSignerEvents takes the events emitted so far and returns the UnknownSigner ones.
func unknownSignerEvents(h *harness) []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			if strings.Fields(e)[1] == certificates.ReasonUnknownSigner {
				out = append(out, e)
			}
		default:
			return out
		}
	}
}

// TestChangedProjectionRequestsAgain: a projection from annotations can change under a
// running pod; a request for the old signer must not hold the corrected one back.
func TestChangedProjectionRequestsAgain(t *testing.T) {
	h := newHarness(t, "ECDSAP256")
	h.pod.Spec.Volumes[0].Projected.Sources[1].PodCertificate.SignerName = "example.com/signr"
	h.mustHandle()
	h.pod.Spec.Volumes[0].Projected.Sources[1].PodCertificate.SignerName = "example.com/signer"
	h.mustHandle()
	if h.api.created != 2 || h.latest().Spec.SignerName != "example.com/signer" {
		t.Fatalf("requests %d, the newest for %s", h.api.created, h.latest().Spec.SignerName)
	}
	h.issue(time.Hour)
	h.mustHandle()
	if _, _, err := h.m.Bundle(h.key); err != nil {
		t.Errorf("the corrected projection: %v", err)
	}
	h.mustHandle()
	if h.api.created != 2 {
		t.Errorf("an unchanged projection requested again: %d requests", h.api.created)
	}
}
