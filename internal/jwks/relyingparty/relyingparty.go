// Package relyingparty reads what a relying party says it fetched of a JWK Set, so that a
// key can be promoted to sign as soon as every relying party has it (JWKSConfig
// spec.promotion), rather than after a timer.
//
// kube-apiserver (since 1.35, feature gate StructuredAuthenticationConfigurationJWKSMetrics,
// beta and on by default) exports, for each jwt issuer of its structured authentication
// configuration and per API server instance:
//
//	apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info{jwt_issuer_hash, apiserver_id_hash, hash} 1
//	apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds{result, jwt_issuer_hash, apiserver_id_hash}
//
// where each *_hash is "sha256:<hex>" of the issuer URL, the instance's ID and the exact
// body of the last JWKS it fetched and accepted (k8s.io/apiserver v0.37.1,
// plugin/pkg/authenticator/token/oidc/metrics.go: getHash, metricsRoundTripper). The
// servers hand out the JWKS ConfigMap's document byte for byte, so Hash of that document
// is what the relying party reports once it holds it.
//
// kube-apiserver's key set (go-oidc v2's remoteKeySet) refetches only for a token whose
// kid it does not know, and only within 30 s of its cached set's expiry (max-age). Probe
// makes that happen: it presents a token naming the pending key, signed with a throwaway
// key no set holds, so it can never authenticate.
package relyingparty

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The metric families kube-apiserver exports about its JWKS fetches.
const (
	keySetInfoMetric = "apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info"
	timestampMetric  = "apiserver_authentication_jwt_authenticator_jwks_fetch_last_timestamp_seconds"
)

// Hash is how kube-apiserver names a string in its JWKS metrics: "sha256:<hex>".
func Hash(data []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(data)) }

// Fetch is what one API server instance reports of its fetches of one issuer's set.
type Fetch struct {
	// APIServerIDHash names the instance (the hash of its ID).
	APIServerIDHash string
	// KeySetHash is the Hash of the last set it fetched and accepted ("" if none yet).
	KeySetHash string
	// LastSuccess and LastFailure are its last successful and failed fetches (zero: none).
	LastSuccess, LastFailure time.Time
}

// Parse reads kube-apiserver's metrics exposition (the text format of /metrics) and
// returns, per instance, what it reports of its fetches of issuer's set, by instance ID
// hash. No series for the issuer is no error: an empty result (the issuer is not
// configured there, or the feature gate is off).
func Parse(r io.Reader, issuer string) ([]Fetch, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("not the Prometheus text format: %w", err)
	}
	issuerHash := Hash([]byte(issuer))
	byID := map[string]*Fetch{}
	var order []string
	fetch := func(labels map[string]string) *Fetch {
		id := labels["apiserver_id_hash"]
		f, ok := byID[id]
		if !ok {
			f = &Fetch{APIServerIDHash: id}
			byID[id] = f
			order = append(order, id)
		}
		return f
	}
	for _, m := range families[keySetInfoMetric].GetMetric() {
		labels := labelsOf(m)
		if labels["jwt_issuer_hash"] == issuerHash {
			fetch(labels).KeySetHash = labels["hash"]
		}
	}
	for _, m := range families[timestampMetric].GetMetric() {
		labels := labelsOf(m)
		if labels["jwt_issuer_hash"] != issuerHash {
			continue
		}
		at := unixSeconds(m.GetGauge().GetValue())
		switch labels["result"] {
		case "success":
			fetch(labels).LastSuccess = at
		case "failure":
			fetch(labels).LastFailure = at
		}
	}
	out := make([]Fetch, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
}

func labelsOf(m *dto.Metric) map[string]string {
	labels := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// unixSeconds turns a gauge of seconds since the epoch into a time, to the millisecond.
func unixSeconds(v float64) time.Time {
	if v <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(math.Round(v * 1000))).UTC()
}

// Holds says whether every instance reported has last fetched one of the documents
// named by hashes, and at least one instance is reported.
func Holds(fetches []Fetch, hashes []string) bool {
	if len(fetches) == 0 {
		return false
	}
	for _, f := range fetches {
		if f.KeySetHash == "" || !slices.Contains(hashes, f.KeySetHash) {
			return false
		}
	}
	return true
}
