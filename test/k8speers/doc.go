// Package k8speers holds tests only: trustplane's pod certificates beside kubelet's own
// PodCertificate manager and Kubernetes' hermetic test signer.
package k8speers
