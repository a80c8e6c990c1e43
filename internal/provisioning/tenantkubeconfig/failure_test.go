package tenantkubeconfig

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const marker = "SECRET-MARKER-7f3a"

func TestFailureKeepsClassAndHostNeverTheAnswer(t *testing.T) {
	gr := schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}
	for _, tc := range []struct {
		name  string
		err   error
		class Class
	}{
		{"401 with a body", apierrors.NewGenericServerResponse(401, "get", gr, "x", marker, 0, true), Unauthorized},
		{"403 Status message", apierrors.NewForbidden(gr, "x", errors.New(marker)), Forbidden},
		{"500 HTML", apierrors.NewGenericServerResponse(500, "get", gr, "x", "<html>"+marker+"</html>", 0, true), Other},
		{"422 Status", apierrors.NewInvalid(schema.GroupKind{Kind: "X"}, marker, nil), Other},
		{"decode error of a 200", fmt.Errorf("couldn't get version/kind; json parse error: %s", "<html>"+marker), Other},
		{"connection refused", &url.Error{Op: "Get", URL: "https://10.0.0.1/" + marker, Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, Unreachable},
		{"deadline", fmt.Errorf("%s: %w", marker, context.DeadlineExceeded), Unreachable},
		{"unknown authority", &url.Error{Op: "Get", URL: "https://x/" + marker, Err: x509.UnknownAuthorityError{}}, TLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Failure("10.0.0.1:6443", fmt.Errorf("apply ClusterRoleBinding x: %w", tc.err))
			var te *TargetError
			if !errors.As(err, &te) || te.Class != tc.class {
				t.Fatalf("got %#v, want class %s", err, tc.class)
			}
			if strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), "10.0.0.1:6443") {
				t.Errorf("message %q: want the host and not the answer", err)
			}
			if errors.Unwrap(err) != nil {
				t.Errorf("the server's error is reachable through %T", err)
			}
		})
	}
	if Failure("h", nil) != nil {
		t.Error("nil is not nil")
	}
}
