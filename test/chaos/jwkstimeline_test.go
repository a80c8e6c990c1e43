package chaos

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// These tests feed made-up timelines to the jwks system's judging functions: each
// strengthened invariant fails on the bug it names, and passes on what the design allows.
// They need no control plane (TestMain starts one only for TestChaos).

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func at(seconds float64) time.Time { return t0.Add(time.Duration(seconds * float64(time.Second))) }

// answers samples one endpoint every jwksSampleEvery from from to to (seconds after t0),
// each answer 10ms long, serving kids from incarnation life.
func answers(endpoint string, life int, from, to float64, kids ...string) []jwksAnswer {
	var out []jwksAnswer
	for t := at(from); t.Before(at(to)); t = t.Add(jwksSampleEvery) {
		out = append(out, jwksAnswer{endpoint: endpoint, config: "steady-1", life: life, start: t, end: t.Add(10 * time.Millisecond), status: 200, kids: kids})
	}
	return out
}

func runsOf(as ...[]jwksAnswer) []jwksRun {
	var runs []jwksRun
	for _, a := range as {
		for _, x := range a {
			runs = jwksAddRun(runs, x)
		}
	}
	return runs
}

const window = jwksCacheMaxAge + jwksPromotionMargin // 12s in the run

// The key "new" is published at 20s. Replica B is restarted at 21s and its new
// incarnation serves the set with "new" from its first answer at 22s. A manager that
// loses the pending promotion time in the restart and promotes at 24s (4s after
// publication, not 12s) is caught on both endpoints: each answered without "new" within
// the 12s before the promotion, B in its previous incarnation.
func TestEarlyPromotionAfterRestartIsCaught(t *testing.T) {
	a := runsOf(answers("a", 1, 0, 20.1, "old"), answers("a", 1, 20.1, 40, "new", "old"))
	b := runsOf(answers("b", 1, 0, 20.1, "old"), answers("b", 1, 20.1, 21, "new", "old"), answers("b", 2, 22, 40, "new", "old"))
	early := jwksPromotion{config: "steady-1", kid: "new", previous: "old", at: at(24)}
	for name, runs := range map[string][]jwksRun{"a": a, "b": b} {
		v := jwksJudgePromotion(runs, early, window)
		if !v.judged || v.ok {
			t.Errorf("endpoint %s: promotion 4s after publication: got %+v, want a violation", name, v)
		}
		if !strings.Contains(v.why, "without key new") || !strings.Contains(v.why, "incarnation 1") {
			t.Errorf("endpoint %s: the violation should name the key and the incarnation that answered without it: %s", name, v.why)
		}
	}
	// The same restart with the promotion on time (12s after the last answer without the
	// key, plus one sampling interval) passes: B's new incarnation served "new" from its
	// first answer.
	onTime := jwksPromotion{config: "steady-1", kid: "new", previous: "old", at: at(20.1 + 12 + 0.3)}
	for name, runs := range map[string][]jwksRun{"a": a, "b": b} {
		if v := jwksJudgePromotion(runs, onTime, window); !v.judged || !v.ok {
			t.Errorf("endpoint %s: promotion on time: got %+v, want it to pass", name, v)
		}
	}
}

// An incarnation that came up after the window opened and served the key from its first
// answer answered no relying party without it: that passes. One that came up serving a
// set without the key (a stale table) within the window is caught, though the endpoint
// first served the key, in an earlier incarnation, long before.
func TestPromotionJudgesEachIncarnation(t *testing.T) {
	p := jwksPromotion{config: "steady-1", kid: "new", previous: "old", at: at(40)}
	fresh := runsOf(answers("b", 1, 0, 10, "old"), answers("b", 1, 10, 25, "new", "old"), answers("b", 2, 33, 45, "new", "old"))
	if v := jwksJudgePromotion(fresh, p, window); !v.judged || !v.ok {
		t.Errorf("an incarnation serving the key from its first answer: got %+v, want it to pass", v)
	}
	stale := runsOf(answers("b", 1, 0, 10, "old"), answers("b", 1, 10, 25, "new", "old"), answers("b", 2, 33, 35, "old"), answers("b", 2, 35, 45, "new", "old"))
	v := jwksJudgePromotion(stale, p, window)
	if !v.judged || v.ok || !strings.Contains(v.why, "incarnation 2") || !strings.Contains(v.why, "first served 30.00s before") {
		t.Errorf("an incarnation serving a set without the key inside the window: got %+v, want a violation naming incarnation 2 and the first time the endpoint served the key", v)
	}
	// An endpoint that did not answer at all in the window cannot be judged.
	down := runsOf(answers("b", 1, 0, 25, "new", "old"), answers("b", 2, 41, 45, "new", "old"))
	if v := jwksJudgePromotion(down, p, window); v.judged {
		t.Errorf("an endpoint silent through the window: got %+v, want not judged", v)
	}
}

// The ConfigMap holds "k1" from the start and "k2" from 5s on; k2 is promoted at 17s.
// A replica still answering the stale set without k2 more than cacheMaxAge (10s) after
// the ConfigMap held it, once k2 signs, is caught; within cacheMaxAge it is not, nor
// while k2 has not signed yet (its promotion waits for every server: no token needs it).
func TestStaleServerWithoutSigningKeyIsCaught(t *testing.T) {
	states := []jwksCMState{
		{rv: 10, observed: at(0.05), writtenAfter: at(0), kids: []string{"k1"}},
		{rv: 20, observed: at(5.05), writtenAfter: at(5), kids: []string{"k1", "k2"}},
	}
	signed := map[string]time.Time{"k1": at(0.1), "k2": at(17)}
	stale := func(start float64) jwksAnswer {
		return jwksAnswer{endpoint: "b", config: "steady-1", life: 1, start: at(start), end: at(start + 0.01), status: 200, kids: []string{"k1"}}
	}
	if missing := jwksLagging(stale(18), states, signed); len(missing) != 1 || missing[0] != "k2" {
		t.Errorf("a stale answer 13s after the ConfigMap held the signing key k2: missing %v, want [k2]", missing)
	}
	if missing := jwksLagging(stale(14), states, signed); len(missing) != 0 {
		t.Errorf("a stale answer 9s after the ConfigMap held k2 (within cacheMaxAge): missing %v, want none", missing)
	}
	if missing := jwksLagging(stale(16.5), states, signed); len(missing) != 0 {
		t.Errorf("a stale answer 11.5s after the ConfigMap held k2, before k2 signs: missing %v, want none", missing)
	}
	// A 404 (no set at all) long after the set was published lacks every key.
	notFound := jwksAnswer{endpoint: "b", config: "steady-1", life: 2, start: at(30), end: at(30.01), status: 404}
	if missing := jwksLagging(notFound, states, signed); len(missing) != 2 {
		t.Errorf("a 404 20s after the set held k1 and k2: missing %v, want both", missing)
	}
	// A key that left the set (its TTL over) is not required after its removal was
	// written; and after a watch gap the removal is placed as early as it can have been.
	removed := append(states, jwksCMState{rv: 30, observed: at(40.05), writtenAfter: at(40), kids: []string{"k2"}})
	late := jwksAnswer{endpoint: "b", config: "steady-1", life: 2, start: at(40.5), end: at(40.51), status: 200, kids: []string{"k2"}}
	if missing := jwksLagging(late, removed, signed); len(missing) != 0 {
		t.Errorf("an answer after k1's removal: missing %v, want none", missing)
	}
	gap := append(states, jwksCMState{rv: 30, observed: at(60), writtenAfter: at(40), kids: []string{"k2"}, listed: true})
	early := jwksAnswer{endpoint: "b", config: "steady-1", life: 2, start: at(20), end: at(20.01), status: 200, kids: []string{"k2"}}
	if missing := jwksLagging(early, gap, signed); len(missing) != 0 {
		t.Errorf("after a watch gap k1 may have left any time after 5s: missing %v, want none", missing)
	}
}

// A JWKSConfig without an issuer gets its ConfigMap by a plain create: no Apply entry in
// managedFields, which the old check needed for the time of the write before a removal.
// The key dropped on the first change after the create is caught from the
// creationTimestamp and the time the watch saw the change.
func TestKeyDroppedOnTheFirstChangeAfterAPlainCreateIsCaught(t *testing.T) {
	created := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		CreationTimestamp: metav1.NewTime(at(0)),
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "trustplane-jwks", Operation: metav1.ManagedFieldsOperationUpdate, Time: ptrTime(at(0))}},
	}}
	prev := jwksCMState{rv: 10, observed: at(0.05), writtenAfter: jwksWrittenAfter(created), kids: []string{"k1"}}
	if !prev.writtenAfter.Equal(at(0)) {
		t.Fatalf("written after %v, want the creation time", prev.writtenAfter)
	}
	dropped := jwksCMState{rv: 20, observed: at(6.05), writtenAfter: at(6), kids: []string{"k2"}}
	early := jwksDroppedEarly(prev, dropped, jwksShortTTL)
	if len(early) != 1 || early[0].kid != "k1" || early[0].recorded {
		t.Errorf("k1 dropped 6s after the create, TTL %v: got %+v, want k1 caught", jwksShortTTL, early)
	}
	// What the design does: k1 retired (recorded) on the change, removed once its TTL
	// has passed.
	retired := jwksCMState{rv: 20, observed: at(6.05), writtenAfter: at(6), kids: []string{"k1", "k2"}, retired: map[string]time.Time{"k1": at(6)}}
	if early := jwksDroppedEarly(prev, retired, jwksShortTTL); len(early) != 0 {
		t.Errorf("k1 retired, not dropped: got %+v", early)
	}
	removed := jwksCMState{rv: 30, observed: at(26.1), writtenAfter: at(26), kids: []string{"k2"}}
	if early := jwksDroppedEarly(retired, removed, jwksShortTTL); len(early) != 0 {
		t.Errorf("k1 removed 20s after its retirement: got %+v", early)
	}
	tooSoon := jwksCMState{rv: 30, observed: at(15), writtenAfter: at(15), kids: []string{"k2"}}
	if early := jwksDroppedEarly(retired, tooSoon, jwksShortTTL); len(early) != 1 || !early[0].recorded {
		t.Errorf("k1 removed 9s after its recorded retirement: got %+v, want it caught", early)
	}
}

func ptrTime(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

// More than 5% of the checks not judged fails the run; the summary line says how many.
func TestNotJudgedShareOverTheLimitFailsTheRun(t *testing.T) {
	within := Result{Seed: 7, Faults: 3, Checks: 1000, Violations: 0, NotJudged: 50}
	if within.TooLittleJudged() {
		t.Errorf("50 of 1000 not judged (5%%) should pass")
	}
	over := Result{Seed: 7, Faults: 3, Checks: 1000, Violations: 0, NotJudged: 51}
	if !over.TooLittleJudged() {
		t.Errorf("51 of 1000 not judged should fail the run")
	}
	if got, want := over.String(), "chaos: seed 7, faults 3, invariant checks 1000, violations 0, not judged 51"; got != want {
		t.Errorf("summary line %q, want %q", got, want)
	}
}
