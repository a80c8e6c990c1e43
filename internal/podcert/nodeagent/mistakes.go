package nodeagent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// handleProjection advances one projection of pod, unless the pod's own mistake stands in
// the way. The API server checks podCertificate volume sources as projectionProblem does,
// but nobody checks the opt-in annotations, and a pod may name a ServiceAccount that does
// not exist (or none, where no admission plugin defaults it): such a request would fail,
// and be retried and logged as an error, for ever. Instead each is reported once, at info
// and as an event; the returned error is for what a retry may fix.
func (a *Agent) handleProjection(ctx context.Context, pod *corev1.Pod, key podcert.Key, src *corev1.PodCertificateProjection) error {
	if problem := projectionProblem(pod, key, src); problem != "" {
		a.reportOnce(ctx, pod, key, certificates.ReasonInvalidProjection, problem)
		return nil
	}
	err := a.manager.Handle(ctx, pod, key)
	var missing *podcert.ServiceAccountNotFoundError
	if errors.As(err, &missing) {
		a.reportOnce(ctx, pod, key, certificates.ReasonServiceAccountNotFound,
			fmt.Sprintf("%s (a PodCertificateRequest names the pod's ServiceAccount); checked again every %s", missing, a.opts.RefreshInterval))
		return nil
	}
	a.mu.Lock()
	delete(a.problems, key) // a pod that goes wrong again is reported again
	a.mu.Unlock()
	return err
}

// projectionProblem is what keeps a request from being made for the projection, in the
// API server's words, or "".
func projectionProblem(pod *corev1.Pod, key podcert.Key, src *corev1.PodCertificateProjection) string {
	signerPath, keyTypePath := projectionFields(key)
	errs := append(podcert.ValidateSignerName(signerPath, src.SignerName), podcert.ValidateKeyType(keyTypePath, src.KeyType)...)
	if pod.Spec.ServiceAccountName == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "serviceAccountName"), "a PodCertificateRequest names the pod's ServiceAccount"))
	}
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

// reportOnce logs and records a Warning event on pod about a projection's problem, unless
// it was the last problem reported of that projection: the pod hears of a mistake once,
// and once more if it is corrected and made again.
func (a *Agent) reportOnce(ctx context.Context, pod *corev1.Pod, key podcert.Key, reason, problem string) {
	a.mu.Lock()
	reported := a.problems[key] == problem
	a.problems[key] = problem
	a.mu.Unlock()
	if reported {
		return
	}
	log.FromContext(ctx).Info("not requesting a pod certificate", "volume", key.VolumeName, "reason", reason, "problem", problem)
	a.recorder.Eventf(pod, nil, corev1.EventTypeWarning, reason, "RequestCertificate", "%s not requested: %s", projectionName(key), problem)
}

// projectionFields name the signer and key type of a projection as the user wrote them:
// the opt-in annotations, or the volume's podCertificate source.
func projectionFields(key podcert.Key) (signer, keyType *field.Path) {
	if key.VolumeName == podcert.AnnotationVolume {
		annotations := field.NewPath("metadata", "annotations")
		return annotations.Key(SignerAnnotation), annotations.Key(KeyTypeAnnotation)
	}
	source := field.NewPath("spec", "volumes").Key(key.VolumeName).Child("projected", "sources").Index(key.SourceIndex).Child("podCertificate")
	return source.Child("signerName"), source.Child("keyType")
}

func projectionName(key podcert.Key) string {
	if key.VolumeName == podcert.AnnotationVolume {
		return "pod certificate"
	}
	return fmt.Sprintf("pod certificate of volume %s source %d", key.VolumeName, key.SourceIndex)
}

// forgetProblems drops what was reported of a pod's projections (their mistakes, failed
// writes and certificates without a SPIFFE ID).
func (a *Agent) forgetProblems(pod types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.problems {
		if key.Namespace == pod.Namespace && key.PodName == pod.Name {
			delete(a.problems, key)
		}
	}
	for key := range a.writeFailed {
		if key.Namespace == pod.Namespace && key.PodName == pod.Name {
			delete(a.writeFailed, key)
		}
	}
	for key := range a.noSPIFFEID {
		if key.Namespace == pod.Namespace && key.PodName == pod.Name {
			delete(a.noSPIFFEID, key)
		}
	}
}
