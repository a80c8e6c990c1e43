package testenv

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReviewKubeconfigToken is what the API server c reaches says of the token of a
// kubeconfig as a KubeconfigRequest's status holds it (base64): the user it authenticates
// as, and its credential ID(s) (authentication.kubernetes.io/credential-id, joined by
// commas); both empty when it refuses the token.
func ReviewKubeconfigToken(tb testing.TB, c client.Client, kubeconfig string) (user, credentialID string) {
	tb.Helper()
	raw, err := base64.StdEncoding.DecodeString(kubeconfig)
	if err != nil {
		tb.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		tb.Fatal(err)
	}
	review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: cfg.BearerToken}}
	if err := c.Create(context.Background(), review); err != nil {
		tb.Fatal(err)
	}
	if !review.Status.Authenticated {
		return "", ""
	}
	return review.Status.User.Username, strings.Join(review.Status.User.Extra["authentication.kubernetes.io/credential-id"], ",")
}
