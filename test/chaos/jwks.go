package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// The jwks system: JWKSConfigs with a signing Secret (publish first, sign later) whose
// certificate Secrets are rotated, sometimes to something invalid, while configs come and
// go. Every one is rolling with keepOldKeys and maxKeys 20; the "steady" ones keep retired
// keys for 24h, so no key may leave the set within a run (but by the maxKeys cap: a config
// is replaced after jwksMaxRotations valid rotations, long before), and the "short" one for
// jwksShortTTL, so retirements end inside the run. updateStrategy immediate is not part of
// the workload: by design it drops the old key from the set before the signing Secret
// stops naming it (docs/jwks.md, "a compromised key must stop signing at once").
//
// Each revision at which a JWKS ConfigMap or a signing Secret changed (their watches say
// which) is checked against the JWKSConfigs, ConfigMaps and signing Secrets as they were at
// exactly that revision (lists with resourceVersionMatch=Exact: one etcd snapshot), so the
// order of two writes is never guessed from the time they were seen. Every serving
// endpoint — each manager replica's built-in JWKS server, and a standalone `trustplane
// jwks-server` run as config/jwks-server ships it (its Deployment's args, under its own
// ServiceAccount; killed with kill -9 among the faults); the run has no kubelet to run
// nginx — is asked for every set every jwksSampleEvery, across its restarts, and its
// answers are judged against the ConfigMaps' and signing Secrets' watch timelines
// (jwkstimeline.go):
//   - jwks: promoted key served for cacheMaxAge + margin before: every answer an endpoint
//     began within cacheMaxAge + margin (less jwksPromotionTolerance) before a
//     promotion holds the promoted key (jwksJudgePromotion);
//   - jwks: served set lags the ConfigMap by at most cacheMaxAge: an answer holds every
//     key a relying party may need — the signing key and the retired keys inside their
//     TTL: every key that had signed — that the ConfigMap held throughout the cacheMaxAge
//     before it (jwksLagging); a key waiting for its promotion is not needed yet (the
//     promotion waits for every server to answer it);
//   - jwks: retired key kept for its TTL: judged on every transition of a ConfigMap's
//     watch, the first after a plain create included (jwksDroppedEarly).
const (
	jwksNamespace    = "chaos-jwks"
	jwksShortTTL     = 20 * time.Second
	jwksLongTTL      = 24 * time.Hour
	jwksMaxKeys      = 20
	jwksMaxRotations = 15
	jwksMaxConfigs   = 5
	jwksCacheMaxAge  = 10 * time.Second
	// jwksPromotionMargin is the run's --jwks-promotion-margin.
	jwksPromotionMargin = 2 * time.Second
	// jwksCalmRotation spaces the rotations of a calm config: longer than cacheMaxAge +
	// margin, and the update interval, so most of its keys are promoted.
	jwksCalmRotation = 20 * time.Second
)

// The names of the invariants the jwks system checks.
const (
	jwksInvPromotion = "jwks: promoted key served for cacheMaxAge + margin before"
	jwksInvLag       = "jwks: served set lags the ConfigMap by at most cacheMaxAge"
	jwksInvPublished = "jwks: server serves a published set"
	jwksInvTTL       = "jwks: retired key kept for its TTL"
	jwksInvSigning   = "jwks: signing key served"
)

// newJWKS is the jwks system.
func newJWKS() System { return &jwksSystem{} }

type jwksSystem struct {
	mu      sync.Mutex
	configs map[string]*jwksModel // by name, the live ones
	created int                   // configs made so far (names are never reused)
	// deleted is when the deletion of each deleted JWKSConfig was asked for: answers for
	// it from then on are not judged (its set is taken away on purpose).
	deleted map[string]time.Time
	// revisions are the revisions still to check.
	revisions []int64
	// cmStates are the states of each JWKS ConfigMap (by JWKSConfig name) as its watch
	// delivered them, in order.
	cmStates map[string][]jwksCMState
	// signingKids is the kid each signing Secret (by JWKSConfig name) named last;
	// signedAt when the watch first saw it name each kid (by JWKSConfig name, then kid).
	signingKids map[string]string
	signedAt    map[string]map[string]time.Time
	// promotions wait to be judged until every answer begun before them is in.
	promotions []jwksPromotion
	// runs are each endpoint's answers (by address, then JWKSConfig name); answered is
	// the last incarnation of each endpoint that answered at all.
	runs     map[string]map[string][]jwksRun
	answered map[string]int
	// silent counts the requests an endpoint's incarnation that had answered before left
	// unanswered since its last answer: checks not judged if the same incarnation answers
	// again, none if it never does (it was stopping).
	silent map[string]jwksSilence
	// pending are answers waiting for the ConfigMap watch to catch up with them.
	pending []jwksAnswer
	// revisionsChecked, promotionsJudged and answersJudged count for the run's output.
	revisionsChecked, promotionsJudged, answersJudged int

	// server is the standalone `trustplane jwks-server`, serverProbes its probes' address.
	server       *Proc
	serverProbes string

	cms, signing *ckRevWatch
	sampling     sync.Once
	stopSampling context.CancelFunc
	sampled      chan struct{}
}

type jwksModel struct {
	name      string
	ttl       time.Duration
	rotations int
	validKid  string // the kid of the last valid certificate written
	lastValid bool   // the last write was valid
	// calm: rotated at most every jwksCalmRotation, so that its keys get promoted (a
	// key replaced before its promotion never is); the others rotate as fast as the
	// workload goes. lastRotation is when it was last rotated (or made).
	calm         bool
	lastRotation time.Time
}

func (s *jwksSystem) Name() string { return "jwks" }

// ManagerArgs: updates of a set spaced by 5s instead of the default minute, and a 2s
// promotion margin, so that a run of minutes sees many publications and promotions (each
// still folded and delayed as shipped). The issuer claims and the JWKS servers' reports
// are in the manager's namespace, as a pod reads it from its token mount: where the
// standalone server's Role lets it report.
func (s *jwksSystem) ManagerArgs(*Harness) []string {
	return []string{"--jwks-min-update-interval=5s", "--jwks-promotion-margin=" + jwksPromotionMargin.String(),
		"--jwks-issuer-claim-namespace=" + ManagerNamespace}
}

func (s *jwksSystem) Setup(ctx context.Context, h *Harness) error {
	s.configs, s.deleted, s.cmStates, s.signingKids = map[string]*jwksModel{}, map[string]time.Time{}, map[string][]jwksCMState{}, map[string]string{}
	s.signedAt = map[string]map[string]time.Time{}
	s.runs, s.answered, s.silent, s.sampled = map[string]map[string][]jwksRun{}, map[string]int{}, map[string]jwksSilence{}, make(chan struct{})
	if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: jwksNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	for _, short := range []bool{false, false, true} {
		if err := s.createConfig(ctx, h, short); err != nil {
			return err
		}
	}
	wc, err := client.NewWithWatch(h.Env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	owned := []client.ListOption{client.InNamespace(jwksNamespace), client.HasLabels{jwksv1alpha1.OwnerLabel}}
	s.cms = &ckRevWatch{h: h, c: wc, what: "JWKS ConfigMaps", list: func() client.ObjectList { return &corev1.ConfigMapList{} }, opts: owned, onObject: s.observeConfigMap}
	s.signing = &ckRevWatch{h: h, c: wc, what: "signing Secrets", list: func() client.ObjectList { return &corev1.SecretList{} }, opts: owned, onObject: s.observeSigning}
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.T.Cleanup(stop)
	go s.cms.run(watchCtx)
	go s.signing.run(watchCtx)
	s.startServer(h)
	return nil
}

// startServer runs `trustplane jwks-server` as config/jwks-server's Deployment runs it: its
// args, under its ServiceAccount's token with the RBAC that install grants it (installed
// here: config/default has none of it), each address on a free loopback port. It serves
// from its own watches, as the manager replicas' servers do from theirs, and reports what
// it serves in its Lease, as they do.
func (s *jwksSystem) startServer(h *Harness) {
	const name = "trustplane-jwks-server"
	var install []*unstructured.Unstructured
	for _, obj := range testenv.Rendered(h.T, "config/jwks-server") {
		if obj.GetName() == name {
			install = append(install, obj)
		}
	}
	h.Env.Install(h.T, install)
	pod := testenv.PodSpecOf(h.T, install, "Deployment", name)
	addr, probes := testenv.FreeAddr(h.T), testenv.FreeAddr(h.T)
	args := testenv.ArgsOf(h.T, testenv.ContainerOf(h.T, pod, "jwks-server"), nil,
		"--kubeconfig="+h.Env.ServiceAccountKubeconfig(h.T, ManagerNamespace, pod.ServiceAccountName),
		// A pod reads its namespace from its token mount; a process is told.
		"--jwks-issuer-claim-namespace="+ManagerNamespace,
		"--metrics-bind-address="+testenv.FreeAddr(h.T), "--health-probe-bind-address="+probes, "--jwks-server-bind-address="+addr)
	s.server, s.serverProbes = h.Run("jwks-server", args...), probes
	h.AddJWKSServer(JWKSServer{Addr: addr, Proc: s.server})
}

// Faults adds the standalone JWKS server killed: the restarted process must serve every
// promoted key from its first answer (its first-served times are the run's memory, not
// the process's: jwksJudgePromotion across incarnations).
func (s *jwksSystem) Faults(*Harness) []Fault {
	return []Fault{{
		Kind: "kill -9 jwks-server",
		Inject: func(ctx context.Context, h *Harness, _ *rand.Rand) (string, error) {
			if err := s.server.Restart(syscall.SIGKILL); err != nil {
				return "", err
			}
			return fmt.Sprintf("jwks-server, start %d", s.server.Starts()), nil
		},
		Recovered: func(ctx context.Context, _ *Harness) bool {
			_, ok := httpGet(ctx, "http://"+s.serverProbes+"/readyz")
			return ok
		},
	}}
}

// createConfig makes a JWKSConfig and its certificate Secret.
func (s *jwksSystem) createConfig(ctx context.Context, h *Harness, short bool) error {
	s.mu.Lock()
	s.created++
	m := &jwksModel{name: fmt.Sprintf("steady-%d", s.created), ttl: jwksLongTTL, calm: s.created%2 == 0}
	if short {
		m.name, m.ttl = fmt.Sprintf("short-%d", s.created), jwksShortTTL
	}
	s.mu.Unlock()
	chain, kid, err := jwksChain(testcerts.P256)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name + "-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}}
	if err := h.Client.Create(ctx, secret); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name}, Spec: jwksv1alpha1.JWKSConfigSpec{
		CertificateSecret: m.name + "-tls", SigningSecret: m.name + "-signing",
		UpdateStrategy: jwksv1alpha1.UpdateStrategyRolling, KeepOldKeys: ptr.To(true), OldKeysTTL: jwksv1alpha1.DurationOf(m.ttl),
		MaxKeys: ptr.To(int32(jwksMaxKeys)), CacheMaxAge: jwksv1alpha1.DurationOf(jwksCacheMaxAge), CleanupOnDelete: true,
		// The run has no kubelet: nothing would ever run nginx.
		Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)},
	}}
	if err := h.Client.Create(ctx, cfg); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	m.validKid, m.lastValid = kid, true
	s.mu.Lock()
	s.configs[m.name] = m
	s.mu.Unlock()
	return nil
}

// jwksChain is a new certificate chain for a new key, and the key's kid.
func jwksChain(t testcerts.KeyType) (testcerts.Chain, string, error) {
	key, err := testcerts.NewKey(t)
	if err != nil {
		return testcerts.Chain{}, "", err
	}
	chain, err := testcerts.NewChain(key, "issuer.chaos.example", time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour))
	if err != nil {
		return testcerts.Chain{}, "", err
	}
	kid, err := jwkset.KeyIDOf(chain.PEM())
	return chain, kid, err
}

// Step rotates a certificate (mostly to a new valid key, sometimes to bad input that must
// lose nothing), or replaces a config that rotated enough, or adds or deletes one.
func (s *jwksSystem) Step(ctx context.Context, h *Harness, rng *rand.Rand) error {
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.configs))
	s.mu.Unlock()
	p := rng.IntN(100)
	switch {
	case p < 5 && len(names) < jwksMaxConfigs:
		return s.createConfig(ctx, h, rng.IntN(3) == 0)
	case p < 8 && len(names) > 2:
		// A calm config lives until it has rotated enough: long enough for promotions.
		if name := names[rng.IntN(len(names))]; !s.isCalm(name) {
			return s.deleteConfig(ctx, h, name)
		}
		return nil
	}
	s.mu.Lock()
	m := s.configs[names[rng.IntN(len(names))]]
	done := m.rotations >= jwksMaxRotations
	calm := m.calm && time.Since(m.lastRotation) < jwksCalmRotation
	if !calm {
		m.lastRotation = time.Now()
	}
	s.mu.Unlock()
	if calm && !done {
		return nil
	}
	if done {
		// Its set would soon reach maxKeys, where keys may leave before their TTL.
		if err := s.deleteConfig(ctx, h, m.name); err != nil {
			return err
		}
		return s.createConfig(ctx, h, strings.HasPrefix(m.name, "short-"))
	}
	data, kid, err := jwksInput(rng)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name + "-tls"}}
	patch, _ := json.Marshal(map[string]any{"data": data})
	err = h.Client.Patch(ctx, secret, client.RawPatch("application/merge-patch+json", patch))
	if err != nil {
		// Whether it took effect is read back by the next rotation's Settle repair; the
		// invariants do not depend on it (they read what the API server holds).
		s.mu.Lock()
		m.lastValid = false
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m.lastValid = kid != ""
	if kid != "" {
		m.validKid = kid
		m.rotations++
	}
	return nil
}

// jwksInput is the next tls.crt/tls.key: a new key (P-256 mostly, RSA, Ed25519), or bad
// input: garbage, a key where the certificate belongs, a weak RSA key, an expired leaf.
// kid is "" for bad input.
func jwksInput(rng *rand.Rand) (data map[string][]byte, kid string, err error) {
	switch p := rng.IntN(100); {
	case p < 6:
		return map[string][]byte{corev1.TLSCertKey: []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")}, "", nil
	case p < 10:
		chain, _, err := jwksChain(testcerts.P256)
		return map[string][]byte{corev1.TLSCertKey: chain.KeyPEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, "", err
	case p < 13:
		chain, _, err := jwksChain(testcerts.RSA1024)
		return map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, "", err
	case p < 16:
		key, err := testcerts.NewKey(testcerts.P256)
		if err != nil {
			return nil, "", err
		}
		chain, err := testcerts.NewChain(key, "expired.chaos.example", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
		return map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, "", err
	}
	kind := testcerts.P256
	switch rng.IntN(10) {
	case 0:
		kind = testcerts.RSA2048
	case 1:
		kind = testcerts.Ed25519
	}
	chain, kid, err := jwksChain(kind)
	return map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}, kid, err
}

func (s *jwksSystem) isCalm(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.configs[name] != nil && s.configs[name].calm
}

func (s *jwksSystem) deleteConfig(ctx context.Context, h *Harness, name string) error {
	s.mu.Lock()
	delete(s.configs, name) // whatever the answer: its invariants stop at its deletion
	s.deleted[name] = time.Now()
	s.mu.Unlock()
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: name}}
	return client.IgnoreNotFound(h.Client.Delete(ctx, cfg))
}

// observeConfigMap queues the revision of every change of a JWKS ConfigMap, records
// each state with the time it was seen, and judges its transition from the state before:
// a key leaves only once its TTL has passed (jwksDroppedEarly).
func (s *jwksSystem) observeConfigMap(h *Harness, typ watch.EventType, obj client.Object) {
	seen := time.Now()
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	rv, name := s.queue(cm)
	s.mu.Lock()
	defer s.mu.Unlock()
	states := s.cmStates[name]
	if n := len(states); n > 0 && states[n-1].rv >= rv && typ != watch.Deleted {
		return // a list delivering what was seen already
	}
	st := jwksCMState{rv: rv, observed: seen, writtenAfter: jwksWrittenAfter(cm), listed: typ == ckListed, deleted: typ == watch.Deleted}
	if !st.deleted {
		doc := cm.Data[jwkset.DocumentKey]
		kids, err := jwksKids(doc)
		if err != nil {
			h.Check("jwks: set parses", false, "ConfigMap %s at revision %d: %v", cm.Name, rv, err)
			return
		}
		slices.Sort(kids)
		st.kids, st.docHash = kids, jwksHash(doc)
		st.retired, _ = jwkset.DecodeRetirements(cm.Annotations[jwksv1alpha1.RetirementsAnnotation])
	}
	s.cmStates[name] = append(states, st)
	if len(states) == 0 || states[len(states)-1].deleted || st.deleted {
		return
	}
	prev := states[len(states)-1]
	ttl := jwksTTLOf(name)
	early := jwksDroppedEarly(prev, st, ttl)
	for _, e := range early {
		h.Check(jwksInvTTL, false,
			"JWKSConfig %s: kid %s (retired at %s, recorded: %v) left the set between revisions %d and %d, by %s at the latest (the watch saw it then), before its oldKeysTTL %v; the set now holds %v",
			name, e.kid, e.since.UTC().Format(time.RFC3339), e.recorded, prev.rv, rv, e.removed.UTC().Format(time.RFC3339Nano), ttl, st.kids)
	}
	for _, kid := range prev.kids {
		if !slices.Contains(st.kids, kid) && !slices.ContainsFunc(early, func(e jwksEarlyRemoval) bool { return e.kid == kid }) {
			h.Check(jwksInvTTL, true, "")
		}
	}
}

// queue queues obj's revision for the exact-revision checks, and says which JWKSConfig
// it belongs to.
func (s *jwksSystem) queue(obj client.Object) (rv int64, config string) {
	rv = ckRV(obj.GetResourceVersion())
	s.mu.Lock()
	s.revisions = append(s.revisions, rv)
	s.mu.Unlock()
	return rv, obj.GetLabels()[jwksv1alpha1.OwnerLabel]
}

// jwksTTLOf is the oldKeysTTL the workload gives the JWKSConfig named name.
func jwksTTLOf(name string) time.Duration {
	if strings.HasPrefix(name, "short-") {
		return jwksShortTTL
	}
	return jwksLongTTL
}

// jwksWrittenAfter is the latest time obj carries of its writes: its last write happened
// then or later.
func jwksWrittenAfter(obj client.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

func jwksHash(doc string) uint64 {
	f := fnv.New64a()
	_, _ = f.Write([]byte(doc))
	return f.Sum64()
}

// observeSigning queues the revision of every change of a signing Secret, and records a
// promotion whenever one names another key than the kid seen before. The first key of a
// JWKSConfig is promoted at once by design (docs/jwks.md): a Secret first seen by the
// watch is no promotion, and one first seen by a list after a gap cannot be judged.
func (s *jwksSystem) observeSigning(h *Harness, typ watch.EventType, obj client.Object) {
	seen := time.Now()
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	rv, name := s.queue(secret)
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ == watch.Deleted {
		delete(s.signingKids, name)
		return
	}
	kid, err := jwkset.KeyIDOf(secret.Data[corev1.TLSCertKey])
	if err != nil {
		return
	}
	previous, known := s.signingKids[name]
	s.signingKids[name] = kid
	if s.signedAt[name] == nil {
		s.signedAt[name] = map[string]time.Time{}
	}
	if _, ok := s.signedAt[name][kid]; !ok {
		s.signedAt[name][kid] = seen
	}
	switch {
	case !known && typ == ckListed && s.signing.progress.Load() > 0:
		h.NotJudged(jwksInvPromotion, "JWKSConfig %s: signing Secret first seen by a list after a watch gap (kid %s): whether it was a promotion is unknown", name, kid)
	case known && previous != kid:
		s.promotions = append(s.promotions, jwksPromotion{config: name, kid: kid, previous: previous, at: seen, rv: rv})
	}
}

// Check checks every revision queued, then judges what the endpoints answered and the
// promotions seen.
func (s *jwksSystem) Check(ctx context.Context, h *Harness) {
	s.sampling.Do(func() {
		// The managers run from the first Check on: their servers are sampled from now.
		sampleCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		s.stopSampling = stop
		h.T.Cleanup(stop)
		go func() {
			defer close(s.sampled)
			s.sample(sampleCtx, h)
		}()
	})
	s.mu.Lock()
	revs := slices.Compact(slices.Sorted(slices.Values(s.revisions)))
	s.revisions = nil
	s.mu.Unlock()
	for i, rv := range revs {
		if err := s.checkRevision(ctx, h, rv); err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				h.NotJudged(jwksInvSigning, "revision %d compacted before it was checked", rv)
				continue
			}
			// The API server is away: check these again next time.
			s.mu.Lock()
			s.revisions = append(s.revisions, revs[i:]...)
			s.mu.Unlock()
			break
		}
	}
	s.judgeAnswers(ctx, h)
	s.judgePromotions(h, false)
}

// checkRevision checks the invariants on the objects as they were at revision rv.
func (s *jwksSystem) checkRevision(ctx context.Context, h *Harness, rv int64) error {
	at := &client.ListOptions{Namespace: jwksNamespace, Raw: &metav1.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact}}
	configs, cms, secrets := &jwksv1alpha1.JWKSConfigList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}
	for _, l := range []client.ObjectList{configs, cms, secrets} {
		if err := h.Client.List(ctx, l, at); err != nil {
			return err
		}
	}
	for i := range configs.Items {
		cfg := &configs.Items[i]
		if !cfg.DeletionTimestamp.IsZero() {
			continue // finalizing: its set is taken away on purpose (cleanupOnDelete)
		}
		cm := jwksFind(cms.Items, cfg.Name+"-jwks")
		signing := jwksFind(secrets.Items, cfg.Spec.SigningSecret)
		if cm == nil {
			if signing != nil {
				kid, _ := jwkset.KeyIDOf(signing.Data[corev1.TLSCertKey])
				h.Check(jwksInvSigning, false, "JWKSConfig %s at revision %d: signing Secret %s (revision %s) names kid %s and there is no ConfigMap %s-jwks",
					cfg.Name, rv, signing.Name, signing.ResourceVersion, kid, cfg.Name)
			}
			continue
		}
		kids, err := jwksKids(cm.Data[jwkset.DocumentKey])
		if err != nil {
			h.Check("jwks: set parses", false, "ConfigMap %s at revision %d: %v", cm.Name, rv, err)
			continue
		}
		if signing != nil {
			kid, err := jwkset.KeyIDOf(signing.Data[corev1.TLSCertKey])
			h.Check(jwksInvSigning, err == nil && slices.Contains(kids, kid),
				"JWKSConfig %s at revision %d: signing Secret %s (revision %s) names kid %s (%v), absent from ConfigMap %s (revision %s), which holds %v",
				cfg.Name, rv, signing.Name, signing.ResourceVersion, kid, err, cm.Name, cm.ResourceVersion, kids)
		}
	}
	s.mu.Lock()
	s.revisionsChecked++
	s.mu.Unlock()
	return nil
}

func jwksFind[T any, P interface {
	*T
	client.Object
}](items []T, name string) P {
	for i := range items {
		if P(&items[i]).GetName() == name {
			return &items[i]
		}
	}
	return nil
}

func jwksKids(doc string) ([]string, error) {
	if doc == "" {
		return nil, nil
	}
	keys, err := jwkset.Unmarshal([]byte(doc))
	if err != nil {
		return nil, err
	}
	kids := make([]string, 0, len(keys))
	for _, k := range keys {
		kids = append(kids, k.KeyID)
	}
	return kids, nil
}

// sample asks every endpoint for every live JWKSConfig's set every jwksSampleEvery, each
// endpoint on its own (one that hangs does not slow the sampling of another), until ctx
// ends.
func (s *jwksSystem) sample(ctx context.Context, h *Harness) {
	var endpoints sync.WaitGroup
	for _, server := range h.JWKSServers() {
		endpoints.Go(func() {
			for ctx.Err() == nil {
				tick := time.Now()
				s.mu.Lock()
				names := slices.Sorted(maps.Keys(s.configs))
				s.mu.Unlock()
				var wg sync.WaitGroup
				for _, name := range names {
					wg.Go(func() { s.ask(ctx, h, server, name) })
				}
				wg.Wait()
				sleep(ctx, jwksSampleEvery-time.Since(tick))
			}
		})
	}
	endpoints.Wait()
}

// jwksEndpoint names an endpoint in the run's output and its timelines: its process and
// address ("jwks-server@127.0.0.1:40123").
func jwksEndpoint(ep JWKSServer) string { return ep.Proc.Name() + "@" + ep.Addr }

// jwksSilence is a stretch of requests an endpoint's incarnation left unanswered.
type jwksSilence struct {
	life, n     int
	first, last time.Time
}

// ask asks one endpoint for one set and records the answer. No answer is no check while
// the process is down, before its incarnation first answers (it accepts connections only
// once its table is full) and after its last answer (it is stopping); between two answers
// of one incarnation, it is a check that cannot be judged.
func (s *jwksSystem) ask(ctx context.Context, h *Harness, ep JWKSServer, name string) {
	proc, server := ep.Proc, jwksEndpoint(ep)
	life, running := proc.Starts(), proc.Running()
	a := jwksAnswer{endpoint: server, config: name, life: life, start: time.Now()}
	var body string
	a.status, body = jwksGet(ctx, fmt.Sprintf("http://%s/%s/%s/jwks.json", ep.Addr, jwksNamespace, name))
	a.end = time.Now()
	if ctx.Err() != nil {
		return
	}
	down := !running || !proc.Running() || proc.Starts() != life
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, gone := s.deleted[name]; gone && !a.end.Before(d) {
		return
	}
	if a.status == 0 {
		if q := s.silent[server]; !down && s.answered[server] == life {
			if q.life != life || q.n == 0 {
				q = jwksSilence{life: life, first: a.start}
			}
			q.n++
			q.last = a.start
			s.silent[server] = q
		}
		return
	}
	if q := s.silent[server]; q.n > 0 {
		if q.life == life {
			h.NotJudgedN(int64(q.n), jwksInvLag, "%s (incarnation %d) left %d requests unanswered within %v from %s to %s, then answered again",
				server, life, q.n, jwksSampleTimeout, q.first.UTC().Format(time.RFC3339Nano), q.last.UTC().Format(time.RFC3339Nano))
		}
		delete(s.silent, server)
	}
	switch {
	case a.status == http.StatusServiceUnavailable:
		// Repairing: relying parties keep what they cached (docs/jwks.md).
		s.answered[server] = life
		h.Check(jwksInvLag, true, "")
		return
	case !a.servesSet():
		s.answered[server] = life
		h.Check(jwksInvLag, false, "%s (incarnation %d) answered %d for %s", server, life, a.status, name)
		return
	}
	s.answered[server] = life
	if a.status == http.StatusOK {
		kids, err := jwksKids(body)
		if err != nil {
			h.Check("jwks: set parses", false, "%s served for %s: %v", server, name, err)
			return
		}
		slices.Sort(kids)
		a.kids, a.docHash = kids, jwksHash(body)
	}
	s.pending = append(s.pending, a)
	if s.runs[server] == nil {
		s.runs[server] = map[string][]jwksRun{}
	}
	s.runs[server][name] = jwksAddRun(s.runs[server][name], a)
}

// jwksGet fetches url within jwksSampleTimeout: the status (0 when no answer came) and
// the body.
func jwksGet(ctx context.Context, url string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, jwksSampleTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := jwksClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, ""
	}
	return resp.StatusCode, string(body)
}

// jwksClient keeps a connection per request the sampler makes at once (the default keeps
// two per host: a long run would use up the local ports), and closes idle ones before
// the server does (--jwks-server-idle-timeout, 30s), so no request meets a closing one.
var jwksClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * jwksMaxConfigs, IdleConnTimeout: 20 * time.Second}}

// judgeAnswers judges each answer once the ConfigMap watch has delivered every write it
// could reflect (its ConfigMap's revision in a list made after the answer says which):
// its set is one the ConfigMap held, and it lags the ConfigMap by at most cacheMaxAge.
func (s *jwksSystem) judgeAnswers(ctx context.Context, h *Harness) {
	listed := time.Now()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := h.Client.List(ctx, list, client.InNamespace(jwksNamespace), client.HasLabels{jwksv1alpha1.OwnerLabel}); err == nil {
		revs := map[string]int64{}
		for _, cm := range list.Items {
			revs[cm.Labels[jwksv1alpha1.OwnerLabel]] = ckRV(cm.ResourceVersion)
		}
		s.mu.Lock()
		for i := range s.pending {
			if a := &s.pending[i]; !a.listed && a.end.Before(listed) {
				a.listed, a.listRV = true, revs[a.config]
			}
		}
		s.mu.Unlock()
	}
	_, gapFrom := s.cms.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = slices.DeleteFunc(s.pending, func(a jwksAnswer) bool {
		states := s.cmStates[a.config]
		if !a.listed || (a.listRV > 0 && (len(states) == 0 || states[len(states)-1].rv < a.listRV)) {
			return false
		}
		if d, gone := s.deleted[a.config]; gone && !a.end.Before(d) {
			return true
		}
		s.answersJudged++
		if a.status == http.StatusOK {
			switch {
			case slices.ContainsFunc(states, func(st jwksCMState) bool { return !st.deleted && st.docHash == a.docHash }):
				h.Check(jwksInvPublished, true, "")
			case gapFrom > 0 && gapFrom < a.listRV:
				h.NotJudged(jwksInvPublished, "%s served a %s set not seen in the ConfigMap, but the watch missed events", a.endpoint, a.config)
			default:
				h.Check(jwksInvPublished, false, "server %s (incarnation %d) served for JWKSConfig %s a set the ConfigMap never held: kids %v (%d states seen)",
					a.endpoint, a.life, a.config, a.kids, len(states))
			}
		}
		missing := jwksLagging(a, states, s.signedAt[a.config])
		h.Check(jwksInvLag, len(missing) == 0,
			"server %s (incarnation %d) answered %d for JWKSConfig %s at %s (in %.2fs) with set %s, without %s, which the ConfigMap held throughout the cacheMaxAge (%v) before: %s",
			a.endpoint, a.life, a.status, a.config, a.start.UTC().Format(time.RFC3339Nano), a.end.Sub(a.start).Seconds(), jwksKidList(a.kids), jwksKidList(missing), jwksCacheMaxAge,
			s.roles(a.config, missing))
		return true
	})
}

// roles says what each kid was to the JWKSConfig name: signing now, retired (and when),
// or neither. The caller holds s.mu.
func (s *jwksSystem) roles(name string, kids []string) string {
	states := s.cmStates[name]
	var out []string
	for _, kid := range kids {
		role := "current or pending"
		switch {
		case s.signingKids[name] == kid:
			role = "signing"
		case len(states) > 0:
			if t, ok := states[len(states)-1].retired[kid]; ok {
				role = "retired at " + t.UTC().Format(time.RFC3339)
			}
		}
		out = append(out, kid[:min(len(kid), 12)]+" "+role)
	}
	return strings.Join(out, "; ")
}

// judgePromotions judges each promotion against every endpoint's answers once every
// answer begun before it is in (all of them when final).
func (s *jwksSystem) judgePromotions(h *Harness, final bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	window := jwksCacheMaxAge + jwksPromotionMargin
	s.promotions = slices.DeleteFunc(s.promotions, func(p jwksPromotion) bool {
		if !final && time.Since(p.at) < jwksSampleTimeout+jwksSampleEvery {
			return false
		}
		if d, gone := s.deleted[p.config]; gone && d.Before(p.at) {
			// Its deletion was asked for (maybe refused: the API server was away) before:
			// no endpoint was asked for its set since, and its invariants stop there.
			return true
		}
		s.promotionsJudged++
		for _, ep := range h.JWKSServers() {
			server := jwksEndpoint(ep)
			v := jwksJudgePromotion(s.runs[server][p.config], p, window)
			if !v.judged {
				h.NotJudged(jwksInvPromotion, "JWKSConfig %s: promotion of %s (revision %d): %s: %s", p.config, p.kid, p.rv, server, v.why)
				continue
			}
			h.Check(jwksInvPromotion, v.ok, "JWKSConfig %s: promotion of kid %s (was %s) seen at %s (revision %d): endpoint %s %s",
				p.config, p.kid, p.previous, p.at.UTC().Format(time.RFC3339Nano), p.rv, server, v.why)
		}
		return true
	})
}

// Settle: a config whose last input is bad gets a valid certificate (as an operator
// fixes it); then every config is Ready with the newest valid key current and signing, and
// the ConfigMap and every server hold exactly the keys of its status.
func (s *jwksSystem) Settle(ctx context.Context, h *Harness) {
	s.mu.Lock()
	models := make([]*jwksModel, 0, len(s.configs))
	for _, name := range slices.Sorted(maps.Keys(s.configs)) {
		models = append(models, s.configs[name])
	}
	s.mu.Unlock()
	for _, m := range models {
		if m.lastValid {
			continue
		}
		chain, kid, err := jwksChain(testcerts.P256)
		if err != nil {
			h.Logf("jwks: %v", err)
			continue
		}
		patch, _ := json.Marshal(map[string]any{"data": map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}})
		h.Eventually(ctx, "progress: jwks certificate repaired", func(ctx context.Context) bool {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: jwksNamespace, Name: m.name + "-tls"}}
			return h.Client.Patch(ctx, secret, client.RawPatch("application/merge-patch+json", patch)) == nil
		})
		m.validKid = kid
	}
	for _, m := range models {
		var seen string
		if !h.Eventually(ctx, "progress: JWKSConfig Ready with its newest key signing and served", func(ctx context.Context) bool {
			var ok bool
			seen, ok = s.settled(ctx, h, m)
			return ok
		}) {
			h.Logf("jwks: JWKSConfig %s: %s", m.name, seen)
		}
	}
	s.Check(ctx, h)
	if s.stopSampling != nil {
		s.stopSampling()
		<-s.sampled
	}
	s.Check(ctx, h)
	s.judgePromotions(h, true)
	s.mu.Lock()
	for _, a := range s.pending {
		h.NotJudged(jwksInvLag, "what %s answered for %s at %s: the ConfigMap watch never caught up", a.endpoint, a.config, a.start.UTC().Format(time.RFC3339Nano))
	}
	h.Logf("jwks: %d JWKSConfigs made, %d revisions checked at their exact state, %d answers and %d promotions judged",
		s.created, s.revisionsChecked, s.answersJudged, s.promotionsJudged)
	s.mu.Unlock()
}

// settled says whether m has settled, and if not what was seen.
func (s *jwksSystem) settled(ctx context.Context, h *Harness, m *jwksModel) (string, bool) {
	cfg := &jwksv1alpha1.JWKSConfig{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: m.name}, cfg); err != nil {
		return err.Error(), false
	}
	ready := meta.FindStatusCondition(cfg.Status.Conditions, "Ready")
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != cfg.Generation {
		return fmt.Sprintf("Ready: %+v", ready), false
	}
	if cfg.Status.LastKeyID != m.validKid || cfg.Status.SigningKeyID != m.validKid {
		return fmt.Sprintf("lastKeyID %s, signingKeyID %s; the newest valid key is %s", cfg.Status.LastKeyID, cfg.Status.SigningKeyID, m.validKid), false
	}
	var status []string
	for _, k := range cfg.Status.Keys {
		status = append(status, k.KeyID)
	}
	sort.Strings(status)
	cm := &corev1.ConfigMap{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: m.name + "-jwks"}, cm); err != nil {
		return err.Error(), false
	}
	kids, err := jwksKids(cm.Data[jwkset.DocumentKey])
	if err != nil {
		return err.Error(), false
	}
	sort.Strings(kids)
	if !slices.Equal(kids, status) {
		return fmt.Sprintf("ConfigMap holds %v, status.keys %v", kids, status), false
	}
	signing := &corev1.Secret{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: jwksNamespace, Name: cfg.Spec.SigningSecret}, signing); err != nil {
		return err.Error(), false
	}
	if kid, _ := jwkset.KeyIDOf(signing.Data[corev1.TLSCertKey]); kid != m.validKid {
		return fmt.Sprintf("signing Secret names %s, want %s", kid, m.validKid), false
	}
	for _, server := range h.JWKSServers() {
		body, ok := httpGet(ctx, fmt.Sprintf("http://%s/%s/%s/jwks.json", server.Addr, jwksNamespace, m.name))
		if !ok || body != cm.Data[jwkset.DocumentKey] {
			return fmt.Sprintf("server %s serves another set than the ConfigMap's %v", jwksEndpoint(server), kids), false
		}
	}
	return "", true
}
