package testenv

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodCertificateRequestsOf lists the PodCertificateRequests made for one pod.
func PodCertificateRequestsOf(tb testing.TB, c client.Reader, ns, podName string) []certificatesv1.PodCertificateRequest {
	tb.Helper()
	list := &certificatesv1.PodCertificateRequestList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		tb.Fatal(err)
	}
	var out []certificatesv1.PodCertificateRequest
	for _, p := range list.Items {
		if p.Spec.PodName == podName {
			out = append(out, p)
		}
	}
	return out
}
