package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// file is a file of a projection's directory: its name there, and what it holds.
type file struct {
	name    string
	content []byte
}

// writeBundle writes, in the projection's directory, the projection's credentialBundlePath
// (the PKCS#8 key then the chain, leaf first), keyPath (the key) and
// certificateChainPath (the chain), and the files of the --layout: credentialbundle.pem,
// or the SPIFFE credential folder's (spiffeFiles); trust bundle files no longer written,
// and the other layout's bundle, are removed; nothing before issuance. Denied or failed, the files of the last
// issued credential stay.
func (a *Agent) writeBundle(ctx context.Context, pod *corev1.Pod, key podcert.Key, src *corev1.PodCertificateProjection) error {
	privateKey, chain, err := a.manager.Bundle(key)
	if err != nil {
		return nil // not issued yet, or denied/failed: the events and metrics say so
	}
	bundle := append(append([]byte(nil), privateKey...), chain...)
	// The files are replaced together or not at all (a full disk changes none of them),
	// each atomically, in this order: the key and chain files first, the layout's bundle
	// last, so that its presence says the others are there.
	files := []file{{src.KeyPath, privateKey}, {src.CertificateChainPath, chain}, {src.CredentialBundlePath, bundle}}
	// The other layout's files are stale too: after --layout changed, a bundle no longer
	// refreshed must not stay beside the current one for a workload to read.
	stale := func(name string) bool { return isTrustBundleFile(name) || name == SPIFFECredentialBundleFile }
	if a.opts.Layout == LayoutSPIFFE {
		spiffe, err := a.spiffeFiles(ctx, pod, key, src.SignerName, privateKey, chain)
		if err != nil {
			return err
		}
		files = append(files, spiffe...)
		stale = func(name string) bool { return isTrustBundleFile(name) || name == BundleFile }
	} else {
		files = append(files, file{BundleFile, bundle})
	}
	dir := filepath.Join(key.Namespace, key.PodName, key.VolumeName+"-"+strconv.Itoa(key.SourceIndex))
	var set []fileContent
	for _, f := range files {
		if f.name == "" {
			continue
		}
		if !filepath.IsLocal(f.name) {
			return fmt.Errorf("pod %s/%s volume %s: path %q leaves the volume", key.Namespace, key.PodName, key.VolumeName, f.name)
		}
		set = append(set, fileContent{filepath.Join(dir, filepath.Clean(f.name)), f.content})
	}
	return a.files.replaceSet(dir, set, stale)
}

// refuse reports, once per pod and path, a bundle path the agent does not write through
// (a link planted in the pod's directory, say): in its log and as a Warning event on the
// pod. Nothing a retry could fix, so it is not retried before the refresh interval.
func (a *Agent) refuse(ctx context.Context, pod *corev1.Pod, key podcert.Key, refused *refusedError) {
	name := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	a.mu.Lock()
	if a.reported[name] == nil {
		a.reported[name] = map[string]bool{}
	}
	seen := a.reported[name][refused.Path]
	a.reported[name][refused.Path] = true
	a.mu.Unlock()
	if seen {
		return
	}
	log.FromContext(ctx).Info("not writing a credential bundle", "volume", key.VolumeName, "path", refused.Path, "reason", refused.Why)
	a.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificates.ReasonBundlePathRefused, "WriteBundle",
		"credential bundle of volume %s not written: %s below the agent's directory: %s", key.VolumeName, refused.Path, refused.Why)
}

// reportWriteFailure reports, once per projection until one of its writes succeeds, a
// bundle the agent could not write (a full disk, a failing device): in its log and as a
// Warning event on the pod, for the pod's owner cannot see the agent's log and the
// credential it uses stops being refreshed. The caller returns the error too, so the pod
// is retried with back-off; the files of the last written credential stay meanwhile.
func (a *Agent) reportWriteFailure(ctx context.Context, pod *corev1.Pod, key podcert.Key, err error) {
	a.mu.Lock()
	seen := a.writeFailed[key]
	a.writeFailed[key] = true
	a.mu.Unlock()
	if seen {
		return
	}
	why := err.Error()
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		why += " (the filesystem of the agent's --dir is full)"
	}
	log.FromContext(ctx).Info("could not write a credential bundle; the last written one stays, retrying", "volume", key.VolumeName, "error", why)
	a.recorder.Eventf(pod, nil, corev1.EventTypeWarning, certificates.ReasonBundleWriteFailed, "WriteBundle",
		"%s not written: %s; the last written credential stays in place and the write is retried", bundleName(key), why)
}

// bundleName names a projection's credential bundle in an event.
func bundleName(key podcert.Key) string {
	if key.VolumeName == podcert.AnnotationVolume {
		return "credential bundle of the pod certificate"
	}
	return fmt.Sprintf("credential bundle of volume %s source %d", key.VolumeName, key.SourceIndex)
}
