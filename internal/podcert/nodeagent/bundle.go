package nodeagent

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// writeBundle writes, in the projection's directory, credentialbundle.pem and the
// projection's credentialBundlePath (the PKCS#8 key then the chain, leaf first), keyPath
// (the key) and certificateChainPath (the chain); nothing before issuance. Denied or
// failed, the files of the last issued credential stay.
func (a *Agent) writeBundle(key podcert.Key, src *corev1.PodCertificateProjection) error {
	privateKey, chain, err := a.manager.Bundle(key)
	if err != nil {
		return nil // not issued yet, or denied/failed: the events and metrics say so
	}
	bundle := append(append([]byte(nil), privateKey...), chain...)
	// Each file is replaced atomically, not the set: the key and chain files first,
	// credentialbundle.pem last, so that its presence says the others are there.
	type file struct {
		name    string
		content []byte
	}
	var files []file
	for _, f := range []file{{src.KeyPath, privateKey}, {src.CertificateChainPath, chain}, {src.CredentialBundlePath, bundle}} {
		if f.name == "" {
			continue
		}
		if !filepath.IsLocal(f.name) {
			return fmt.Errorf("pod %s/%s volume %s: path %q leaves the volume", key.Namespace, key.PodName, key.VolumeName, f.name)
		}
		files = append(files, file{filepath.Clean(f.name), f.content})
	}
	files = append(files, file{BundleFile, bundle})
	dir := filepath.Join(key.Namespace, key.PodName, key.VolumeName+"-"+strconv.Itoa(key.SourceIndex))
	for _, f := range files {
		if err := a.files.write(filepath.Join(dir, f.name), f.content); err != nil {
			return err
		}
	}
	return nil
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
