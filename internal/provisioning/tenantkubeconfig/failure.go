package tenantkubeconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Class is what kind of failure a call to a tenant's server had.
type Class string

const (
	// Unreachable: no connection, or no answer in time.
	Unreachable Class = "unreachable"
	// TLS: the TLS handshake failed (unknown authority, wrong name, bad certificate).
	TLS Class = "tls"
	// Unauthorized: the server answered 401: it does not accept the credentials.
	Unauthorized Class = "unauthorized"
	// Forbidden: the server answered 403: the credentials may not do what is needed.
	Forbidden Class = "forbidden"
	// TooLarge: the answer was longer than --cluster-target-max-response-bytes, or in a
	// content encoding that was not asked for.
	TooLarge Class = "too-large"
	// Other: any other answer, or one that is not a Kubernetes API answer.
	Other Class = "other"
)

// TargetError is a failed call to a tenant-chosen server as a tenant may read it: the
// class, the host and the HTTP status code, never the server's answer. The API machinery
// puts response bodies (a Status message, or the raw text of a non-Status answer) into
// its errors, and the server is the tenant's choice: it may be an internal endpoint whose
// answer the tenant must not read through the manager. So a TargetError keeps no cause.
type TargetError struct {
	Class Class
	Host  string
	// Code is the HTTP status code of the answer; 0 when there was none.
	Code int
	// Limit is the answer size limit a TooLarge answer passed; 0 for an encoding refused.
	Limit int64
}

func (e *TargetError) Error() string {
	switch e.Class {
	case Unreachable:
		return fmt.Sprintf("cluster at %s is unreachable (no connection or no answer in time)", e.Host)
	case TLS:
		return fmt.Sprintf("TLS handshake with the cluster at %s failed (check certificate-authority-data and the server name)", e.Host)
	case Unauthorized:
		return fmt.Sprintf("the cluster at %s does not accept the kubeconfig's credentials (401)", e.Host)
	case Forbidden:
		return fmt.Sprintf("the cluster at %s does not allow the kubeconfig's user what is needed (403)", e.Host)
	case TooLarge:
		if e.Limit == 0 {
			return fmt.Sprintf("the cluster at %s answered in a content encoding that was not asked for", e.Host)
		}
		return fmt.Sprintf("the cluster at %s sent an answer larger than %d bytes (--cluster-target-max-response-bytes)", e.Host, e.Limit)
	}
	if e.Code != 0 {
		return fmt.Sprintf("the cluster at %s answered HTTP %d %s", e.Host, e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("the cluster at %s gave an answer that is not a Kubernetes API answer", e.Host)
}

// Failure classifies err, from a call to the tenant's server at host, into a TargetError;
// nil stays nil. Only err's types are looked at, never its text, which may carry the
// server's answer.
func Failure(host string, err error) error {
	if err == nil {
		return nil
	}
	if te := (*TargetError)(nil); errors.As(err, &te) {
		return te
	}
	if tooLarge := (*ResponseTooLargeError)(nil); errors.As(err, &tooLarge) {
		return &TargetError{Class: TooLarge, Host: host, Limit: tooLarge.Limit}
	}
	if encoding := (*UnrequestedEncodingError)(nil); errors.As(err, &encoding) {
		return &TargetError{Class: TooLarge, Host: host}
	}
	return &TargetError{Class: classify(err), Host: host, Code: codeOf(err)}
}

func classify(err error) Class {
	var (
		status       apierrors.APIStatus
		unknownAuth  x509.UnknownAuthorityError
		hostname     x509.HostnameError
		invalid      x509.CertificateInvalidError
		verification *tls.CertificateVerificationError
		recordHeader tls.RecordHeaderError
		alert        tls.AlertError
		netErr       net.Error
		opErr        *net.OpError
		dnsErr       *net.DNSError
	)
	switch {
	case errors.As(err, &status):
		switch status.Status().Code {
		case http.StatusUnauthorized:
			return Unauthorized
		case http.StatusForbidden:
			return Forbidden
		}
		if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
			return Unreachable
		}
		return Other
	case errors.As(err, &unknownAuth), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &verification), errors.As(err, &recordHeader), errors.As(err, &alert):
		return TLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &netErr):
		return Unreachable
	}
	// client-go wraps some transport failures in plain strings; these are its own words
	// (Go's, not the server's): a handshake that timed out, a connection that ended.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "TLS handshake timeout"), strings.Contains(msg, "Client.Timeout exceeded"),
		strings.Contains(msg, "connection refused"), strings.Contains(msg, "EOF"), strings.Contains(msg, "connection reset"):
		return Unreachable
	case strings.Contains(msg, "tls: "), strings.Contains(msg, "x509: "):
		return TLS
	}
	return Other
}

func codeOf(err error) int {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return int(status.Status().Code)
	}
	return 0
}
