package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The jwks system's timelines and the pure functions that judge them: what each serving
// endpoint answered (sampled every jwksSampleEvery), what each JWKS ConfigMap held (from
// its watch: every event with the time it was seen), and each promotion of a signing
// Secret. Nothing here reads the cluster, so jwkstimeline_test.go proves each judgement
// can fail on a made-up timeline.
//
// Times: the harness, the API server and the managers share one clock. A write happened
// no later than the moment its watch event was seen (observed), and no earlier than the
// times the object carries (creationTimestamp, managedFields[].time: the API server
// stamps them when the request arrives, in whole seconds). An answer was made at some
// moment between its request's start and the end of its body.

const (
	// jwksSampleEvery is how often every endpoint is asked for every live JWKSConfig's set.
	jwksSampleEvery = 250 * time.Millisecond
	// jwksSampleTimeout bounds one request: an endpoint that answers later is unreachable.
	jwksSampleTimeout = 2 * time.Second
	// jwksPromotionTolerance is how much later than cacheMaxAge + margin before a
	// promotion an endpoint may still have answered without the promoted key: one sampling
	// interval, for the skew between the replicas' watches, which the margin exists to
	// cover (the controller waits for its own replica only).
	jwksPromotionTolerance = jwksSampleEvery
)

// jwksAnswer is one request to one serving endpoint for one JWKSConfig's set.
type jwksAnswer struct {
	endpoint, config string
	// life is the endpoint's process incarnation (Proc.Starts) that answered.
	life       int
	start, end time.Time
	// status is the HTTP status; 0 when no answer came (refused, timed out).
	status int
	// kids are the keys of a 200 answer, sorted; a 404 answers no key.
	kids    []string
	docHash uint64
	// listed: a list of the ConfigMaps was made after the answer ended, in which its
	// ConfigMap had revision listRV (0: it had none). Once the ConfigMap watch has
	// delivered that revision, every write the answer could reflect is known.
	listed bool
	listRV int64
}

// servesSet says whether the answer is a set a relying party takes: 200, or 404 (no set
// at all; go-oidc and kube-apiserver fail, or cache nothing). 503 is not: relying parties
// keep what they cached on a 5xx (docs/jwks.md).
func (a jwksAnswer) servesSet() bool { return a.status == 200 || a.status == 404 }

// jwksCMState is a JWKS ConfigMap as one watch event (or list) delivered it.
type jwksCMState struct {
	rv int64
	// observed is when the harness received it: the write happened at or before.
	observed time.Time
	// writtenAfter is the latest time the object carries (creationTimestamp,
	// managedFields times): the write happened at or after.
	writtenAfter time.Time
	kids         []string
	retired      map[string]time.Time
	docHash      uint64
	// listed: delivered by a list after a watch gap, so writes between the state before
	// and this one may be unseen.
	listed  bool
	deleted bool
}

// jwksHeldThroughout is the kids the ConfigMap certainly held at every moment of
// [from, to]: in consecutive states from one seen by from until one that lacks them,
// written after to. states are in revision order, and the watch has delivered every
// write up to to (the caller's list revision).
func jwksHeldThroughout(states []jwksCMState, from, to time.Time) []string {
	var held []string
	for i := 0; i < len(states); i++ {
		st := states[i]
		if st.deleted || st.observed.After(from) {
			continue
		}
		for _, kid := range st.kids {
			if slices.Contains(held, kid) || (i > 0 && !states[i-1].deleted && slices.Contains(states[i-1].kids, kid)) {
				continue // judged from the first state of its run (seen earlier still)
			}
			// Follow kid's run from state i.
			until := time.Time{} // zero: still held at the last state
			for j := i + 1; j < len(states); j++ {
				next := states[j]
				if !next.deleted && slices.Contains(next.kids, kid) {
					continue
				}
				// Removed by the write of next, or, after a gap, by some write after the
				// state before it.
				until = next.writtenAfter
				if next.listed || next.deleted {
					until = states[j-1].writtenAfter
				}
				break
			}
			if until.IsZero() || until.After(to) {
				held = append(held, kid)
			}
		}
	}
	slices.Sort(held)
	return held
}

// jwksLagging is what an answer lacks of the keys a relying party may need that the
// ConfigMap held throughout the cacheMaxAge (the run's jwksCacheMaxAge) before it: a
// server may answer a set that lags the ConfigMap by at most cacheMaxAge (relying parties
// may cache for that long anyway), never by more. The keys a relying party may need are
// the signing key and the retired keys inside their TTL: every key that had signed by the
// answer's start (signedAt: when the signing Secret was first seen naming each kid). A key
// that has not signed yet (published, waiting for its promotion, which waits for every
// server: docs/jwks.md) verifies no token, so a server that lags without it refuses none.
// Only answers that serve a set are judged (servesSet).
func jwksLagging(a jwksAnswer, states []jwksCMState, signedAt map[string]time.Time) []string {
	var missing []string
	for _, kid := range jwksHeldThroughout(states, a.start.Add(-jwksCacheMaxAge), a.end) {
		if signed, ok := signedAt[kid]; !ok || signed.After(a.start) {
			continue
		}
		if !slices.Contains(a.kids, kid) {
			missing = append(missing, kid)
		}
	}
	return missing
}

// jwksRun is a run of consecutive answers of one endpoint, for one JWKSConfig, from one
// incarnation, that serve the same set (404 included: no key).
type jwksRun struct {
	life int
	kids []string
	// first is the start of the run's first answer, lastStart of its last one.
	first, lastStart time.Time
	n                int
}

// jwksAddRun adds an answer that serves a set to an endpoint's runs.
func jwksAddRun(runs []jwksRun, a jwksAnswer) []jwksRun {
	if n := len(runs); n > 0 && runs[n-1].life == a.life && slices.Equal(runs[n-1].kids, a.kids) {
		runs[n-1].lastStart = a.start
		runs[n-1].n++
		return runs
	}
	return append(runs, jwksRun{life: a.life, kids: a.kids, first: a.start, lastStart: a.start, n: 1})
}

// jwksPromotion is a signing Secret seen naming another key than before.
type jwksPromotion struct {
	config, kid, previous string
	// at is when the watch delivered it: the promotion happened at or before.
	at time.Time
	rv int64
}

// jwksVerdict is one judgement: judged false means it could not be judged (why says why);
// otherwise ok false is a violation (why says what was seen).
type jwksVerdict struct {
	judged, ok bool
	why        string
}

// jwksJudgePromotion judges one endpoint's answers (its runs, in time order) against a
// promotion: the promoted key must have been served by the endpoint for at least window
// (cacheMaxAge + promotion margin) before it. The rule, per endpoint, across restarts:
// every answer the endpoint began after at − window + jwksPromotionTolerance (and before the
// promotion) holds the key. So the endpoint first served the key, in the serving life it
// was in at at − window, by then; an incarnation that started later must have served it
// from its first answer. An endpoint that did not answer at all in the window (down,
// unreachable) cannot be judged.
//
// The answers that count start before at; one that lacks the key and started after at
// is later than at − window + tolerance as well.
func jwksJudgePromotion(runs []jwksRun, p jwksPromotion, window time.Duration) jwksVerdict {
	tolerance := jwksPromotionTolerance
	from := p.at.Add(-window)
	var lacking *jwksRun
	answered := false
	firstSeen, firstSeenLife := time.Time{}, 0
	for i := range runs {
		r := &runs[i]
		if !r.first.Before(p.at) {
			break
		}
		if !r.lastStart.Before(from) {
			answered = true
		}
		if slices.Contains(r.kids, p.kid) {
			if firstSeen.IsZero() {
				firstSeen, firstSeenLife = r.first, r.life
			}
			continue
		}
		lacking = r
	}
	if !answered {
		return jwksVerdict{why: fmt.Sprintf("no answer in the %v before the promotion (endpoint down or unreachable)", window)}
	}
	if lacking == nil {
		return jwksVerdict{judged: true, ok: true}
	}
	last := lacking.lastStart
	if last.After(p.at) {
		last = p.at
	}
	if !last.After(from.Add(tolerance)) {
		return jwksVerdict{judged: true, ok: true}
	}
	seen := "never before the promotion"
	if !firstSeen.IsZero() {
		seen = fmt.Sprintf("first served %.2fs before the promotion (incarnation %d)", p.at.Sub(firstSeen).Seconds(), firstSeenLife)
	}
	return jwksVerdict{judged: true, why: fmt.Sprintf(
		"answered without key %s %.2fs before its promotion (incarnation %d, set %s), later than cacheMaxAge + margin (%v, tolerance %v); %s",
		p.kid, p.at.Sub(last).Seconds(), lacking.life, jwksKidList(lacking.kids), window, tolerance, seen)}
}

// jwksEarlyRemoval is a key that left the set before its oldKeysTTL.
type jwksEarlyRemoval struct {
	kid      string
	since    time.Time // its retirement, or the earliest it can have been retired
	recorded bool      // since is the retirement recorded in the ConfigMap
	removed  time.Time // the latest the removal can have happened
}

// jwksDroppedEarly judges one transition of a JWKS ConfigMap, from prev to cur
// (consecutive states of its watch): a key leaves the set only once its oldKeysTTL has
// passed since its retirement, or when the set is full (jwksMaxKeys). The retirement is the
// time prev records for the key; a key prev does not record as retired was current or
// signing when prev was written, so it was retired no earlier than prev.writtenAfter. The
// removal happened no later than cur was observed. Every transition has both, the first
// after a plain create included (creationTimestamp).
func jwksDroppedEarly(prev, cur jwksCMState, ttl time.Duration) []jwksEarlyRemoval {
	if prev.deleted || cur.deleted || len(cur.kids) >= jwksMaxKeys {
		return nil
	}
	var early []jwksEarlyRemoval
	for _, kid := range prev.kids {
		if slices.Contains(cur.kids, kid) {
			continue
		}
		since, recorded := prev.retired[kid]
		if !recorded {
			since = prev.writtenAfter
		}
		if cur.observed.Before(since.Add(ttl)) {
			early = append(early, jwksEarlyRemoval{kid: kid, since: since, recorded: recorded, removed: cur.observed})
		}
	}
	return early
}

// maxNotJudgedShare is the most of a run's checks that may go unjudged (a read failed, a
// revision was compacted, a watch missed events, an endpoint did not answer): more, and
// the run proves too little to pass.
const maxNotJudgedShare = 0.05

// notJudgedOverLimit says whether notJudged is more than maxNotJudgedShare of checks.
func notJudgedOverLimit(checks, notJudged int64) bool {
	return float64(notJudged) > maxNotJudgedShare*float64(checks)
}

func jwksKidList(kids []string) string {
	if len(kids) == 0 {
		return "empty"
	}
	short := make([]string, len(kids))
	for i, k := range kids {
		short[i] = k[:min(len(k), 12)]
	}
	return "[" + strings.Join(short, " ") + "]"
}
