package relyingparty

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// maxExposition bounds what is read of one /metrics answer: kube-apiserver's is a few MiB.
const maxExposition = 32 << 20

// Endpoint is one relying party instance's metrics endpoint and how to reach it.
type Endpoint struct {
	// MetricsURL is the https URL of its /metrics.
	MetricsURL string
	// CAPEM verifies its serving certificate; nil: the system's roots.
	CAPEM []byte
	// Token is the bearer token that may get /metrics; "": none.
	Token string
}

// Client probes and scrapes relying parties. Its zero value waits at most 10 s for each.
type Client struct {
	// Timeout bounds one request (0: 10 s).
	Timeout time.Duration
}

// Error is a relying party that could not be read: Reason is one word for conditions
// (Unreachable, Refused, Unparsable), Message says what happened, never the answer's body.
type Error struct {
	Reason, Message string
}

func (e *Error) Error() string { return e.Message }

// Scrape reads the relying party's metrics and what it reports of issuer's set.
func (c Client) Scrape(ctx context.Context, ep Endpoint, issuer string) ([]Fetch, error) {
	body, err := c.get(ctx, ep, ep.Token, http.StatusOK)
	if err != nil {
		return nil, err
	}
	fetches, err := Parse(bytes.NewReader(body), issuer)
	if err != nil {
		return nil, &Error{Reason: "Unparsable", Message: fmt.Sprintf("%s answers what is not Prometheus metrics: %v", ep.MetricsURL, err)}
	}
	return fetches, nil
}

// Probe presents token (see ProbeToken) to the relying party, which refuses it, and in
// doing so refetches the set when its cache is due. Any answer is a probe done: only a
// request that never got one is an error.
func (c Client) Probe(ctx context.Context, ep Endpoint, token string) error {
	_, err := c.get(ctx, ep, token, 0)
	return err
}

// get sends GET MetricsURL with token and reads the body; want is the status expected (0:
// any).
func (c Client) get(ctx context.Context, ep Endpoint, token string, want int) ([]byte, error) {
	httpClient, err := c.httpClient(ep)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep.MetricsURL, nil)
	if err != nil {
		return nil, &Error{Reason: "Unreachable", Message: fmt.Sprintf("%s: %v", ep.MetricsURL, err)}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, &Error{Reason: "Unreachable", Message: fmt.Sprintf("%s cannot be read: %v", ep.MetricsURL, unwrapURLError(err))}
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxExposition+1))
	switch {
	case err != nil:
		return nil, &Error{Reason: "Unreachable", Message: fmt.Sprintf("%s: reading the answer: %v", ep.MetricsURL, err)}
	case want != 0 && resp.StatusCode != want:
		return nil, &Error{Reason: "Refused", Message: fmt.Sprintf("%s answers %s%s", ep.MetricsURL, resp.Status, hintFor(resp.StatusCode))}
	case len(body) > maxExposition:
		return nil, &Error{Reason: "Unparsable", Message: fmt.Sprintf("%s answers more than %d MiB", ep.MetricsURL, maxExposition>>20)}
	}
	return body, nil
}

func hintFor(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return ": the token in the credentials Secret is not accepted"
	case http.StatusForbidden:
		return ": the token in the credentials Secret may not get /metrics (RBAC: nonResourceURLs [/metrics], verbs [get])"
	}
	return ""
}

// unwrapURLError drops net/http's "Get <url>:" prefix, which the message already names.
func unwrapURLError(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}

func (c Client) httpClient(ep Endpoint) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(ep.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ep.CAPEM) {
			return nil, &Error{Reason: "Unreachable", Message: fmt.Sprintf("%s: the credentials Secret's ca.crt holds no PEM certificate", ep.MetricsURL)}
		}
		cfg.RootCAs = pool
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	return &http.Client{
		Timeout: timeout,
		// No proxy from the environment, no keep-alive across scrapes (one request
		// every scrape interval), no redirect: the URL named is the one read.
		Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// ProbeToken is a token that makes a relying party of issuer and audience look kid up,
// and that it cannot accept: it is signed with a throwaway key of alg's kind that no set
// holds. It passes the checks go-oidc makes before looking the key up (issuer, audience,
// expiry, algorithm), so the relying party refetches the set if its cache allows.
func ProbeToken(issuer, audience, kid, alg string, now time.Time) (string, error) {
	key, err := throwawayKey(alg)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return "", fmt.Errorf("a probe signer for %s: %w", alg, err)
	}
	claims := jwt.Claims{
		Issuer:   issuer,
		Subject:  "trustplane-promotion-probe",
		Audience: jwt.Audience{audience},
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(time.Minute)),
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

var (
	throwawayMu   sync.Mutex
	throwawayKeys = map[string]crypto.Signer{}
)

// throwawayKey is a key of alg's kind made for probes once per process; it is never
// published, so nothing verifies what it signs.
func throwawayKey(alg string) (crypto.Signer, error) {
	throwawayMu.Lock()
	defer throwawayMu.Unlock()
	if k, ok := throwawayKeys[alg]; ok {
		return k, nil
	}
	var (
		k   crypto.Signer
		err error
	)
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ES384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ES512":
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	default:
		return nil, fmt.Errorf("no probe for algorithm %q: kube-apiserver accepts RS, PS and ES algorithms only", alg)
	}
	if err != nil {
		return nil, fmt.Errorf("a throwaway %s key: %w", alg, err)
	}
	throwawayKeys[alg] = k
	return k, nil
}
