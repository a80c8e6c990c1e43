package jwks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/jwks/relyingparty"
	"github.com/trustplane/trustplane/internal/status"
)

// Promotion on proof (spec.promotion). The timer of signing.go waits cacheMaxAge plus a
// margin because trustplane cannot see what its relying parties cached. kube-apiserver
// says it: per instance, the hash of the last set it fetched for an issuer
// (internal/jwks/relyingparty). While a key is pending, each scrape interval the
// controller probes every relying party (a token naming the key, which it refuses and
// refetches for once its cache is due) and reads its metrics; once every one reports a
// document published with the key (status.promotion.documentHashes), the key is promoted
// then, before its timer. A relying party that cannot be read, or reports anything else,
// holds promotion until the timer, never beyond: the timer promotes as before.

// maxDocumentHashes bounds status.promotion.documentHashes (the API's MaxItems).
const maxDocumentHashes = 8

// recordDocument keeps status.promotion.documentHashes: the documents published since
// the pending key was, each holding it (the current key is always in the set). Without
// spec.promotion, or with no key pending, there is nothing to prove and no status.
func recordDocument(cfg *jwksv1alpha1.JWKSConfig, pending bool, doc []byte) {
	if cfg.Spec.Promotion == nil {
		cfg.Status.Promotion = nil
		meta.RemoveStatusCondition(&cfg.Status.Conditions, jwksv1alpha1.ConditionRelyingParties)
		return
	}
	if cfg.Status.Promotion == nil {
		cfg.Status.Promotion = &jwksv1alpha1.PromotionStatus{}
	}
	p := cfg.Status.Promotion
	if !pending {
		p.DocumentHashes = nil
		return
	}
	h := relyingparty.Hash(doc)
	if len(p.DocumentHashes) > 0 && p.DocumentHashes[0] == h {
		return
	}
	p.DocumentHashes = append([]string{h}, slices.DeleteFunc(p.DocumentHashes, func(o string) bool { return o == h })...)
	if len(p.DocumentHashes) > maxDocumentHashes {
		p.DocumentHashes = p.DocumentHashes[:maxDocumentHashes]
	}
}

// proven reads every relying party and says whether all of them hold kid: each reports,
// for every instance it speaks for, a fetched set among the documentHashes. What each
// reported goes to status.promotion and the RelyingParties condition; a relying party
// that cannot be read gets a Warning event when its message changes.
func (r *Reconciler) proven(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, kid, alg string) bool {
	p := cfg.Status.Promotion
	now := r.Clock.Now()
	parties := cfg.Spec.Promotion.RelyingParties
	// All at once, within one scrape timeout: a slow relying party holds this worker for
	// that long at most, however many the JWKSConfig names.
	ctx, cancel := context.WithTimeout(ctx, r.scrapeTimeout())
	defer cancel()
	next := make([]jwksv1alpha1.RelyingPartyStatus, len(parties))
	errs := make([]error, len(parties))
	var wg sync.WaitGroup
	for i, rp := range parties {
		wg.Go(func() {
			next[i], errs[i] = r.readRelyingParty(ctx, cfg, rp, kid, alg, p.DocumentHashes, now, previousStatus(p, rp.Name))
		})
	}
	wg.Wait()
	var waiting, unreadable []string
	for i, rp := range parties {
		old, st, err := previousStatus(p, rp.Name), next[i], errs[i]
		switch {
		case err != nil:
			unreadable = append(unreadable, fmt.Sprintf("%s: %s", rp.Name, st.Message))
			if old == nil || old.Message != st.Message {
				r.Recorder.Eventf(cfg, nil, corev1.EventTypeWarning, jwksv1alpha1.ReasonRelyingPartyUnreadable, "Scrape",
					"Relying party %s: %s; key %s is promoted by its timer unless it can be read before", rp.Name, st.Message, kid)
			}
		case !st.HoldsPendingKey:
			waiting = append(waiting, fmt.Sprintf("%s: %s", rp.Name, st.Message))
		}
	}
	p.RelyingParties = next
	switch {
	case len(unreadable) > 0:
		status.Set(cfg, jwksv1alpha1.ConditionRelyingParties, metav1.ConditionFalse, jwksv1alpha1.ReasonRelyingPartyUnreadable,
			strings.Join(unreadable, "; ")+untilTimer(cfg))
	case len(waiting) > 0:
		status.Set(cfg, jwksv1alpha1.ConditionRelyingParties, metav1.ConditionFalse, jwksv1alpha1.ReasonKeyNotFetched,
			strings.Join(waiting, "; ")+untilTimer(cfg))
	default:
		status.Set(cfg, jwksv1alpha1.ConditionRelyingParties, metav1.ConditionTrue, jwksv1alpha1.ReasonRelyingPartiesHoldKey,
			fmt.Sprintf("every relying party reports a fetched set holding key %s", kid))
		return true
	}
	return false
}

func untilTimer(cfg *jwksv1alpha1.JWKSConfig) string {
	if t := cfg.Status.PendingPromotionTime; t != nil {
		return fmt.Sprintf("; key %s waits for them until its timer, %s", cfg.Status.PendingKeyID, t.UTC().Format(time.RFC3339))
	}
	return ""
}

func previousStatus(p *jwksv1alpha1.PromotionStatus, name string) *jwksv1alpha1.RelyingPartyStatus {
	for i := range p.RelyingParties {
		if p.RelyingParties[i].Name == name {
			return &p.RelyingParties[i]
		}
	}
	return nil
}

// readRelyingParty probes and reads one relying party; an error when it cannot be read,
// and then its status keeps what it reported last (lastScrapeTime says since when).
func (r *Reconciler) readRelyingParty(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, rp jwksv1alpha1.RelyingParty,
	kid, alg string, hashes []string, now time.Time, old *jwksv1alpha1.RelyingPartyStatus) (jwksv1alpha1.RelyingPartyStatus, error) {
	st := jwksv1alpha1.RelyingPartyStatus{Name: rp.Name}
	if old != nil {
		st.LastHash, st.LastFetchTime, st.LastScrapeTime = old.LastHash, old.LastFetchTime, old.LastScrapeTime
	}
	fetches, err := r.scrapeRelyingParty(ctx, cfg, rp, kid, alg, now)
	if err != nil {
		st.Message = status.Truncate(err.Error(), 1000)
		return st, err
	}
	st.LastScrapeTime = &metav1.Time{Time: now.Truncate(time.Second)}
	if len(fetches) == 0 {
		st.LastHash, st.LastFetchTime = "", nil
		st.Message = fmt.Sprintf("reports no JWKS fetch for issuer %s (is it a jwt issuer of its authentication configuration, and the feature gate StructuredAuthenticationConfigurationJWKSMetrics on?)", issuerOf(cfg, rp))
		return st, nil
	}
	// One instance, one ID: the last one reported speaks for it.
	last := fetches[len(fetches)-1]
	st.LastHash = last.KeySetHash
	if !last.LastSuccess.IsZero() {
		st.LastFetchTime = &metav1.Time{Time: last.LastSuccess.Truncate(time.Second)}
	}
	if st.HoldsPendingKey = relyingparty.Holds(fetches, hashes); !st.HoldsPendingKey {
		st.Message = "the set it last fetched does not hold the pending key yet"
	}
	return st, nil
}

// scrapeRelyingParty probes rp with kid and reads its metrics, as relyingparty.Error
// (or a Secret that cannot be used) when it cannot.
func (r *Reconciler) scrapeRelyingParty(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig, rp jwksv1alpha1.RelyingParty, kid, alg string, now time.Time) ([]relyingparty.Fetch, error) {
	if err := r.relyingPartyAllowed(rp.MetricsURL); err != nil {
		return nil, err
	}
	ep, err := r.endpointOf(ctx, cfg.Namespace, rp)
	if err != nil {
		return nil, err
	}
	issuer := issuerOf(cfg, rp)
	token, err := relyingparty.ProbeToken(issuer, rp.Audience, kid, alg, now)
	if err != nil {
		return nil, err
	}
	if err := r.RelyingParties.Probe(ctx, ep, token); err != nil {
		return nil, err
	}
	return r.RelyingParties.Scrape(ctx, ep, issuer)
}

// scrapeTimeout bounds the probes and scrapes of one reconcile: a worker is not held
// longer. kube-apiserver's /metrics is a few MiB.
func (r *Reconciler) scrapeTimeout() time.Duration { return 10 * time.Second }

func issuerOf(cfg *jwksv1alpha1.JWKSConfig, rp jwksv1alpha1.RelyingParty) string {
	if rp.Issuer != "" {
		return rp.Issuer
	}
	return cfg.Spec.Issuer
}

// endpointOf reads rp's credentials Secret: its token and CA, never logged.
func (r *Reconciler) endpointOf(ctx context.Context, namespace string, rp jwksv1alpha1.RelyingParty) (relyingparty.Endpoint, error) {
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: rp.CredentialsSecretName}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return relyingparty.Endpoint{}, fmt.Errorf("its credentials Secret %q does not exist", rp.CredentialsSecretName)
		}
		return relyingparty.Endpoint{}, fmt.Errorf("reading its credentials Secret %q: %w", rp.CredentialsSecretName, err)
	}
	token := strings.TrimSpace(string(secret.Data["token"]))
	if token == "" {
		return relyingparty.Endpoint{}, fmt.Errorf("its credentials Secret %q has no token", rp.CredentialsSecretName)
	}
	return relyingparty.Endpoint{MetricsURL: rp.MetricsURL, CAPEM: secret.Data["ca.crt"], Token: token}, nil
}

// relyingPartyAllowed says whether the operator lets a JWKSConfig have the manager read
// metricsURL (--jwks-relying-party-hosts).
func (r *Reconciler) relyingPartyAllowed(metricsURL string) error {
	u, err := url.Parse(metricsURL)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return fmt.Errorf("%s is not an https URL", metricsURL)
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	for _, allowed := range r.RelyingPartyHosts {
		if suffix, ok := strings.CutPrefix(allowed, "*."); ok && strings.HasSuffix(host, "."+suffix) || allowed == host {
			return nil
		}
	}
	if len(r.RelyingPartyHosts) == 0 {
		return fmt.Errorf("host %s is not allowed: the operator allows no relying party (--jwks-relying-party-hosts is empty)", host)
	}
	return fmt.Errorf("host %s is not allowed: the operator allows %s (--jwks-relying-party-hosts)", host, strings.Join(r.RelyingPartyHosts, ", "))
}

// validRelyingPartyHost checks one --jwks-relying-party-hosts entry: an IP address, a DNS
// name, or *. and a DNS name.
func validRelyingPartyHost(h string) error {
	name := strings.TrimPrefix(h, "*.")
	if net.ParseIP(h) != nil {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errors.New(h + " is neither an IP address, a host name nor *. and a domain, such as *.apiserver.example")
	}
	return nil
}

// publishedAlgorithm is the alg the set publishes kid with ("" when it is not there).
func publishedAlgorithm(keys []jwkset.PublishedKey, kid string) string {
	for _, k := range keys {
		if k.KeyID() == kid {
			return k.JWK.Algorithm
		}
	}
	return ""
}
