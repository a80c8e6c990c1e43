package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

// The checksum system: versioned TLS Secrets (Tengine-Ingress's "<name>-<ID>" with the
// version annotation) churn in two namespaces, under the manager's cluster and namespace
// scopes (the harness runs it with --secret-checksum-scopes=cluster,namespace, as
// test/e2e does), and the data-plane agent runs as the gateway's sidecar of
// test/e2e/testdata/gateway runs it: --namespace=edge, under its ServiceAccount.
//
// The workload is the only writer of versioned Secrets. It writes one Secret at a time and
// records every version it wrote with the resourceVersion of the write, so the states the
// Secrets went through are exactly the prefixes of that log: a published checksum must be
// the checksum of one of them (internal/checksum's formula, which the controller uses),
// of a state that existed before the checksum object was created. A write whose outcome is
// unknown (the API server went away mid-request) is resolved by reading the Secret back
// before the next write; until then, and while a write is in flight, an observation that
// matches no known state waits instead of being judged.
const (
	// checksumGateway is the gateway's namespace (test/e2e/testdata/gateway): the agent
	// follows it alone, as its sidecar does.
	checksumGateway = "edge"
	// checksumOther is a second namespace, covered by the cluster scope and its own.
	checksumOther = "chaos-web"
	// checksumIDs is how many numeric IDs the workload uses per namespace.
	checksumIDs = 6
)

// newChecksum is the checksum system.
func newChecksum() System { return &checksumSystem{} }

type checksumSystem struct {
	agent        *Proc
	dir          string
	agentMetrics string
	agentProbes  string

	mu sync.Mutex
	// current is the model: every Secret the workload keeps, by namespace/name.
	current map[string]*ckSecret
	// foreign are versioned Secrets found at Setup that are not the workload's: they
	// count in the cluster scope (nobody is expected to change them).
	foreign map[string]*ckSecret
	// cluster and byNS are the states the Secrets went through, in the order of writes.
	cluster []ckState
	byNS    map[string][]ckState
	// inflight is a write sent whose answer is not in yet; pending one whose outcome is
	// unknown (resolved before the next write).
	inflight, pending *ckWrite
	// published are the checksums of the SecretCheckSums seen, by namespace.
	published map[string]map[string]bool
	// seen are the checksum objects already judged (by UID).
	seen map[string]bool
	// waiting are observations that could not be judged yet.
	waiting []*ckObservation
	// lastSnapshot is the agent's last snapshot judged (its SHA-256 envelope's body).
	lastSnapshot string
	// judgedFiles are the agent's files already judged, by name and content hash.
	judgedFiles map[string]bool

	watch *ckRevWatch
	// nextV is the next version annotation's value (versions only grow, as Tengine's do).
	nextV int
}

// ckSecret is one version of a Secret as the workload wrote it.
type ckSecret struct {
	annotations map[string]string
	data        map[string][]byte
}

// ckWrite is one write of the workload: after is nil for a delete; before is the
// resourceVersion the write was based on (0 for a create).
type ckWrite struct {
	ns, name string
	after    *ckSecret
	before   int64
}

// ckState is the Secrets after a prefix of the writes: rv is the revision of its last
// write (a lower bound when that write's outcome was learned from a read), secrets the
// counted ones of the scope by namespace/name (each with its ID).
type ckState struct {
	rv      int64
	sum     string
	ids     []string
	secrets map[string]ckCounted
}

type ckCounted struct {
	id                string
	crt, key, ca, crl []byte
}

// ckObservation is something seen that is judged once the model can tell.
type ckObservation struct {
	what  string
	judge func(decided bool) (done bool)
}

func (s *checksumSystem) Name() string { return "checksum" }

func (s *checksumSystem) Setup(ctx context.Context, h *Harness) error {
	s.current, s.foreign, s.byNS = map[string]*ckSecret{}, map[string]*ckSecret{}, map[string][]ckState{}
	s.published, s.seen, s.judgedFiles = map[string]map[string]bool{}, map[string]bool{}, map[string]bool{}
	// The gateway with the sidecar component: namespace edge, the agent's ServiceAccount,
	// Role and RoleBinding, as test/e2e installs them.
	gateway := testenv.Rendered(h.T, "test/e2e/testdata/gateway")
	h.Env.Install(h.T, gateway)
	if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: checksumOther}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	existing := &corev1.SecretList{}
	if err := h.Client.List(ctx, existing); err != nil {
		return err
	}
	for _, sec := range existing.Items {
		if _, versioned := sec.Annotations[checksum.DefaultVersionAnnotation]; versioned {
			s.foreign[sec.Namespace+"/"+sec.Name] = &ckSecret{annotations: sec.Annotations, data: sec.Data}
		}
	}
	s.record(0, "") // the state before any write
	// A few Secrets to start from, so the first checksums are not empty.
	rng := rand.New(rand.NewPCG(h.Seed, 29))
	for _, ns := range []string{checksumGateway, checksumOther} {
		for id := 1; id <= 3; id++ {
			if err := s.write(ctx, h, ckWrite{ns: ns, name: ckName(ns, id), after: s.valid(rng)}); err != nil {
				return err
			}
		}
	}
	wc, err := client.NewWithWatch(h.Env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	s.watch = &ckRevWatch{h: h, c: wc, what: "SecretCheckSums", list: func() client.ObjectList { return &tenginev1.SecretCheckSumList{} },
		onObject: s.observeChecksum}
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	h.T.Cleanup(stop)
	go s.watch.run(watchCtx)

	s.dir = h.T.TempDir()
	s.agentMetrics, s.agentProbes = testenv.FreeAddr(h.T), testenv.FreeAddr(h.T)
	pod := testenv.PodSpecOf(h.T, gateway, "Deployment", "gateway")
	args := testenv.ArgsOf(h.T, testenv.ContainerOf(h.T, pod, "trustplane-dataplane"), map[string]string{"metadata.namespace": checksumGateway},
		"--kubeconfig="+h.Env.ServiceAccountKubeconfig(h.T, checksumGateway, pod.ServiceAccountName),
		"--dir="+s.dir, "--metrics-bind-address="+s.agentMetrics, "--health-probe-bind-address="+s.agentProbes,
		// Fail-open (Tengine's default) trusts the local view while no checksum exists in
		// the namespace, before the manager's first publication: closed, every set the
		// agent ever writes must have matched a published checksum.
		"--fail-open=false")
	s.agent = h.Run("dataplane", args...)
	return nil
}

// ManagerArgs: none beyond the harness's (--secret-checksum-scopes=cluster,namespace and
// the publish namespace, as test/e2e passes them).
func (s *checksumSystem) ManagerArgs(*Harness) []string { return nil }

// Faults adds the data-plane agent killed: it must restore its last verified set from
// disk and never write an unverified one.
func (s *checksumSystem) Faults(*Harness) []Fault {
	return []Fault{{
		Kind: "kill -9 data-plane agent",
		Inject: func(ctx context.Context, h *Harness, _ *rand.Rand) (string, error) {
			if err := s.agent.Restart(syscall.SIGKILL); err != nil {
				return "", err
			}
			return fmt.Sprintf("dataplane, start %d", s.agent.Starts()), nil
		},
		Recovered: func(ctx context.Context, _ *Harness) bool {
			_, ok := httpGet(ctx, "http://"+s.agentProbes+"/readyz")
			return ok
		},
	}}
}

func ckName(ns string, id int) string {
	prefix := "web-tls-"
	if ns == checksumGateway {
		prefix = "edge-tls-"
	}
	return prefix + strconv.Itoa(id)
}

// valid is a new certificate and its key, at the next version.
func (s *checksumSystem) valid(rng *rand.Rand) *ckSecret {
	key, err := testcerts.NewKey(testcerts.P256)
	if err != nil {
		panic(err) // crypto/rand failing is not a state the run can go on from
	}
	chain, err := testcerts.NewChain(key, fmt.Sprintf("chaos-%d.example.com", rng.IntN(1000)), time.Now().Add(-time.Hour), time.Now().Add(30*24*time.Hour))
	if err != nil {
		panic(err)
	}
	s.nextV++
	return &ckSecret{annotations: map[string]string{checksum.DefaultVersionAnnotation: strconv.Itoa(s.nextV)},
		data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}}
}

// Step resolves a write of unknown outcome first, then changes one Secret: a renewal, a
// version bump, a broken pair (left out: the key is another's), the version annotation
// taken away, a CA-only Secret, a new ID or a deleted one.
func (s *checksumSystem) Step(ctx context.Context, h *Harness, rng *rand.Rand) error {
	if err := s.resolve(ctx, h); err != nil {
		return err
	}
	ns := []string{checksumGateway, checksumOther}[rng.IntN(2)]
	name := ckName(ns, 1+rng.IntN(checksumIDs))
	s.mu.Lock()
	old := s.current[ns+"/"+name]
	s.mu.Unlock()
	before := int64(0)
	if old != nil {
		before = ckRV(old.annotations[ckRVKey])
	}
	w := ckWrite{ns: ns, name: name, before: before}
	switch p := rng.IntN(100); {
	case old == nil:
		w.after = s.valid(rng)
	case p < 10:
		// deleted
	case p < 45:
		w.after = s.valid(rng)
	case p < 65:
		w.after = ckClone(old)
		s.nextV++
		w.after.annotations[checksum.DefaultVersionAnnotation] = strconv.Itoa(s.nextV)
	case p < 75:
		// A pair that does not load: the certificate kept, another key.
		w.after = ckClone(old)
		w.after.data[corev1.TLSPrivateKeyKey] = s.valid(rng).data[corev1.TLSPrivateKeyKey]
	case p < 85:
		w.after = ckClone(old)
		delete(w.after.annotations, checksum.DefaultVersionAnnotation)
	default:
		// CA-only: counts as "<id>-<version>-".
		ca := s.valid(rng)
		w.after = &ckSecret{annotations: ca.annotations, data: map[string][]byte{checksum.KeyCACrt: ca.data[corev1.TLSCertKey]}}
	}
	return s.write(ctx, h, w)
}

// ckRVKey is where the model keeps the resourceVersion of a Secret's last write (never
// written to the API server).
const ckRVKey = "chaos.trustplane.io/rv"

func ckRV(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

func ckClone(s *ckSecret) *ckSecret {
	out := &ckSecret{annotations: map[string]string{}, data: map[string][]byte{}}
	for k, v := range s.annotations {
		if k != ckRVKey {
			out.annotations[k] = v
		}
	}
	for k, v := range s.data {
		out.data[k] = v
	}
	return out
}

// write performs w and records it; a write whose outcome is unknown stays pending.
func (s *checksumSystem) write(ctx context.Context, h *Harness, w ckWrite) error {
	s.mu.Lock()
	s.inflight = &w
	s.mu.Unlock()
	obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: w.name}}
	var err error
	switch {
	case w.after == nil:
		obj.ResourceVersion = strconv.FormatInt(w.before, 10)
		err = h.Client.Delete(ctx, obj, client.Preconditions{ResourceVersion: &obj.ResourceVersion})
	case w.before == 0:
		obj.Annotations, obj.Data = ckClone(w.after).annotations, w.after.data
		err = h.Client.Create(ctx, obj)
	default:
		obj.Annotations, obj.Data = ckClone(w.after).annotations, w.after.data
		obj.ResourceVersion = strconv.FormatInt(w.before, 10)
		err = h.Client.Update(ctx, obj)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight = nil
	switch {
	case err == nil && w.after == nil:
		// The client does not return the deleted object: its revision is after before.
		s.apply(w, w.before+1)
		return nil
	case err == nil:
		s.apply(w, ckRV(obj.ResourceVersion))
		return nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err):
		// Refused: nothing changed. The model was wrong about the Secret only if someone
		// else wrote it; the read-back puts it right.
		s.pending = &ckWrite{ns: w.ns, name: w.name, after: w.after, before: -1}
		return err
	default:
		s.pending = &w
		return err
	}
}

// resolve reads back the Secret of a write whose outcome is unknown: the workload is its
// only writer, so a resourceVersion other than the one the write was based on is that
// write's (or, with before -1, the Secret as it is).
func (s *checksumSystem) resolve(ctx context.Context, h *Harness) error {
	s.mu.Lock()
	w := s.pending
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	list := &corev1.SecretList{}
	if err := h.Client.List(ctx, list, client.InNamespace(w.ns), client.MatchingFields{"metadata.name": w.name}); err != nil {
		return fmt.Errorf("reading back Secret %s/%s: %w", w.ns, w.name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = nil
	if len(list.Items) == 0 {
		if s.current[w.ns+"/"+w.name] != nil {
			// Deleted at a revision after the one it was based on: that is a lower bound.
			s.apply(ckWrite{ns: w.ns, name: w.name}, max(w.before, 0)+1)
		}
		return nil
	}
	got := list.Items[0]
	rv := ckRV(got.ResourceVersion)
	if old := s.current[w.ns+"/"+w.name]; old != nil && ckRV(old.annotations[ckRVKey]) == rv {
		return nil // not applied
	}
	s.apply(ckWrite{ns: w.ns, name: w.name, after: &ckSecret{annotations: got.Annotations, data: got.Data}}, rv)
	return nil
}

// apply records a write that took effect at revision rv. The caller holds s.mu.
func (s *checksumSystem) apply(w ckWrite, rv int64) {
	key := w.ns + "/" + w.name
	if w.after == nil {
		delete(s.current, key)
	} else {
		v := ckClone(w.after)
		v.annotations[ckRVKey] = strconv.FormatInt(rv, 10)
		s.current[key] = v
	}
	s.record(rv, w.ns)
}

// record appends the states after a write in ns ("" for the initial state, which starts
// every namespace). The caller holds s.mu (or runs before anything else does).
func (s *checksumSystem) record(rv int64, ns string) {
	all := map[string]*ckSecret{}
	for k, v := range s.foreign {
		all[k] = v
	}
	for k, v := range s.current {
		all[k] = v
	}
	s.cluster = append(s.cluster, ckStateOf(rv, all, ""))
	for _, n := range []string{checksumGateway, checksumOther} {
		if ns == "" || ns == n {
			s.byNS[n] = append(s.byNS[n], ckStateOf(rv, all, n))
		}
	}
}

// ckStateOf computes a scope's state (ns "" for every namespace) with the formula the
// controller uses.
func ckStateOf(rv int64, secrets map[string]*ckSecret, ns string) ckState {
	st := ckState{rv: rv, secrets: map[string]ckCounted{}}
	for key, sec := range secrets {
		secNS, name, _ := strings.Cut(key, "/")
		if ns != "" && secNS != ns {
			continue
		}
		annotations := ckCopy(sec.annotations)
		delete(annotations, ckRVKey)
		id, err := checksum.SecretID(name, annotations, checksum.DefaultVersionAnnotation, sec.data)
		if err != nil {
			continue
		}
		st.ids = append(st.ids, id)
		c := ckCounted{id: id, ca: sec.data[checksum.KeyCACrt], crl: sec.data[checksum.KeyCACRL]}
		if crt, key := sec.data[checksum.KeyTLSCrt], sec.data[checksum.KeyTLSKey]; crt != nil && key != nil {
			c.crt, c.key = crt, key
		}
		st.secrets[key] = c
	}
	sort.Strings(st.ids)
	st.sum = checksum.Sum(st.ids)
	return st
}

func ckCopy(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// decided says whether every write that took effect is in the model. The caller holds s.mu.
func (s *checksumSystem) decided() bool { return s.inflight == nil && s.pending == nil }

// observeChecksum is called for every SecretCheckSum the watch delivers (added, or
// found by a relist): each is judged once.
func (s *checksumSystem) observeChecksum(h *Harness, typ watch.EventType, obj client.Object) {
	o, ok := obj.(*tenginev1.SecretCheckSum)
	if !ok || typ == watch.Deleted {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.published[o.Namespace] == nil {
		s.published[o.Namespace] = map[string]bool{}
	}
	s.published[o.Namespace][o.Spec.Checksum] = true
	if s.seen[string(o.UID)] {
		return
	}
	s.seen[string(o.UID)] = true
	cluster := o.Labels["checksum.trustplane.io/scope-kind"] == "cluster"
	if !cluster && o.Namespace != checksumGateway && o.Namespace != checksumOther {
		return // another namespace's: the workload writes nothing there
	}
	created := ckRV(o.ResourceVersion)
	_, omitted := o.Annotations[checksum.IDsOmittedAnnotation]
	what := fmt.Sprintf("SecretCheckSum %s/%s (revision %d, checksum %s)", o.Namespace, o.Name, created, o.Spec.Checksum)
	ids := slices.Clone(o.Spec.IDs)
	sort.Strings(ids)
	s.waiting = append(s.waiting, &ckObservation{what: what, judge: func(decided bool) bool {
		states := s.byNS[o.Namespace]
		if cluster {
			states = s.cluster
		}
		for _, st := range states {
			if st.rv < created && st.sum == o.Spec.Checksum {
				h.Check("checksum: published checksum is of a state that existed", true, "")
				h.Check("checksum: published IDs are the state's", omitted || slices.Equal(ids, st.ids),
					"%s: spec.ids %v, but the Secrets' state with that checksum (after revision %d) has IDs %v", what, ids, st.rv, st.ids)
				return true
			}
		}
		if !decided {
			return false
		}
		newest := states[len(states)-1]
		h.Check("checksum: published checksum is of a state that existed", false,
			"%s, spec.ids %v: no state of the Secrets written before that revision has it (%d states; the newest, after revision %d: %s, IDs %v)",
			what, ids, len(states), newest.rv, newest.sum, newest.ids)
		return true
	}})
}

// Check judges what is waiting, then the agent's directory: its snapshot must be a state
// of the gateway's Secrets that existed and whose checksum was published, and every file
// a version of its Secret inside such a state.
func (s *checksumSystem) Check(ctx context.Context, h *Harness) {
	s.judge()
	s.checkAgentDir(ctx, h)
}

func (s *checksumSystem) judge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	decided := s.decided()
	s.waiting = slices.DeleteFunc(s.waiting, func(o *ckObservation) bool { return o.judge(decided) })
}

func (s *checksumSystem) checkAgentDir(ctx context.Context, h *Harness) {
	snap, err := (dataplane.Store{Dir: s.dir}).Load()
	switch {
	case errors.Is(err, os.ErrNotExist):
		return // nothing verified yet
	case errors.Is(err, dataplane.ErrCorruptSnapshot):
		h.Check("checksum: data plane snapshot intact", false, "%s: %v", filepath.Join(s.dir, dataplane.SnapshotFile), err)
		return
	case err != nil:
		return // a read racing the rename: the next round reads it
	}
	h.Check("checksum: data plane snapshot intact", true, "")
	served := map[string]ckCounted{}
	for _, sec := range snap.Secrets {
		served[checksumGateway+"/"+sec.Name] = ckCounted{id: sec.ID, crt: sec.Crt, key: sec.Key, ca: sec.CA, crl: sec.CRL}
	}
	key := fmt.Sprintf("%s %v", snap.Checksum, served)
	files := s.agentFiles()
	s.mu.Lock()
	newSnapshot := key != s.lastSnapshot
	s.lastSnapshot = key
	var newFiles []string
	for name, content := range files {
		if !s.judgedFiles[name+"\x00"+string(content)] {
			s.judgedFiles[name+"\x00"+string(content)] = true
			newFiles = append(newFiles, name)
		}
	}
	s.mu.Unlock()
	// Whether a checksum was published is asked of the watch, which may not have
	// delivered it yet: the list's revision is what it must have reached to tell.
	var listRV int64
	if newSnapshot || len(newFiles) > 0 {
		list := &tenginev1.SecretCheckSumList{}
		if err := h.Client.List(ctx, list, client.InNamespace(checksumGateway)); err != nil {
			return
		}
		listRV = ckRV(list.ResourceVersion)
		for i := range list.Items {
			s.observeChecksum(h, watch.Added, &list.Items[i])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if newSnapshot {
		what := fmt.Sprintf("the agent's snapshot (checksum %s, %d secrets)", snap.Checksum, len(snap.Secrets))
		s.waiting = append(s.waiting, &ckObservation{what: what, judge: func(decided bool) bool {
			return s.judgeServed(h, what, snap.Checksum, served, listRV, decided)
		}})
	}
	for _, name := range newFiles {
		content := files[name]
		what := fmt.Sprintf("the agent's file %s (%d bytes)", name, len(content))
		s.waiting = append(s.waiting, &ckObservation{what: what, judge: func(decided bool) bool {
			return s.judgeFile(h, what, name, content, listRV, decided)
		}})
	}
	s.waiting = slices.DeleteFunc(s.waiting, func(o *ckObservation) bool { return o.judge(s.decided()) })
}

// agentFiles are the agent's certificate and key files (not the CA files: the gateway's
// Secrets carry none of them unless CA-only, which the snapshot check covers).
func (s *checksumSystem) agentFiles() map[string][]byte {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	out := map[string][]byte{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || name == dataplane.SnapshotFile {
			continue
		}
		content, err := os.ReadFile(filepath.Join(s.dir, name))
		if err == nil { // a file removed since the listing was not served any more
			out[name] = content
		}
	}
	return out
}

// watchCaughtUp says whether the checksum watch has delivered everything up to rv, or
// cannot ever (a gap: events it missed), in which case gap is true. The caller holds s.mu.
func (s *checksumSystem) watchCaughtUp(rv int64) (caughtUp, gap bool) {
	progress, gapFrom := s.watch.state()
	return progress >= rv, gapFrom > 0 && gapFrom < rv
}

// judgeServed: the snapshot must be the counted Secrets of a state of the gateway
// namespace, with that state's checksum, and a SecretCheckSum with it must have been
// published in the namespace (the agent trusts only a match). Beside them it may hold
// Secrets that state does not count, each exactly as an earlier state counted it: the
// last verified files of a Secret that lost its version annotation, which the agent keeps
// until an operator confirms the removal (docs/checksum.md). The caller holds s.mu.
func (s *checksumSystem) judgeServed(h *Harness, what, sum string, served map[string]ckCounted, listRV int64, decided bool) bool {
	states := s.byNS[checksumGateway]
	existed := -1
	for i, st := range states {
		if st.sum == sum && ckServesState(states[:i], st.secrets, served) {
			existed = i
			break
		}
	}
	if existed < 0 {
		if !decided {
			return false
		}
		newest := states[len(states)-1]
		h.Check("checksum: data plane serves a state that existed", false,
			"%s: %v is no state the gateway's Secrets were in (%d states; the newest, after revision %d: %s %v)",
			what, ckDescribe(served), len(states), newest.rv, newest.sum, newest.ids)
		return true
	}
	h.Check("checksum: data plane serves a state that existed", true, "")
	return s.judgePublished(h, what, sum, listRV)
}

func (s *checksumSystem) judgePublished(h *Harness, what, sum string, listRV int64) bool {
	if s.published[checksumGateway][sum] {
		h.Check("checksum: data plane serves only a verified state", true, "")
		return true
	}
	caughtUp, gap := s.watchCaughtUp(listRV)
	switch {
	case gap:
		h.NotJudged("checksum: data plane serves only a verified state", "%s: checksum %s not seen published, but the SecretCheckSum watch missed events (API server restart)", what, sum)
		return true
	case !caughtUp:
		return false
	}
	h.Check("checksum: data plane serves only a verified state", false,
		"%s: checksum %s was never published in %s (published there: %v)", what, sum, checksumGateway, slices.Sorted(maps.Keys(s.published[checksumGateway])))
	return true
}

// judgeFile: a file must hold its Secret's tls.crt or tls.key (or ca.crt, ca.crl) as in a
// state whose checksum was published. The caller holds s.mu.
func (s *checksumSystem) judgeFile(h *Harness, what, file string, content []byte, listRV int64, decided bool) bool {
	base, part := ckSplitFile(file)
	var sums []string
	for _, st := range s.byNS[checksumGateway] {
		c, ok := st.secrets[checksumGateway+"/"+base]
		if ok && bytes.Equal(ckPart(c, part), content) {
			sums = append(sums, st.sum)
		}
	}
	if len(sums) == 0 {
		if !decided {
			return false
		}
		h.Check("checksum: data plane files are verified versions", false,
			"%s: no state of the gateway's Secrets holds this %s for Secret %s", what, part, base)
		return true
	}
	for _, sum := range sums {
		if s.published[checksumGateway][sum] {
			h.Check("checksum: data plane files are verified versions", true, "")
			return true
		}
	}
	caughtUp, gap := s.watchCaughtUp(listRV)
	switch {
	case gap:
		h.NotJudged("checksum: data plane files are verified versions", "%s: no state holding it seen published, but the SecretCheckSum watch missed events", what)
		return true
	case !caughtUp:
		return false
	}
	h.Check("checksum: data plane files are verified versions", false,
		"%s: the states holding it (checksums %v) were never published in %s", what, sums, checksumGateway)
	return true
}

func ckSplitFile(name string) (base, part string) {
	for _, suffix := range []string{".ca.crt", ".ca.crl", ".crt", ".key"} {
		if b, ok := strings.CutSuffix(name, suffix); ok {
			return b, suffix
		}
	}
	return name, ""
}

func ckPart(c ckCounted, part string) []byte {
	switch part {
	case ".crt":
		return c.crt
	case ".key":
		return c.key
	case ".ca.crt":
		return c.ca
	case ".ca.crl":
		return c.crl
	}
	return nil
}

// confirmUncounted annotates every Secret of the gateway namespace that the final state
// does not count — it lost its version annotation, or its content does not load — with
// dataplane.RemoveUnversionedAnnotation: the agent keeps the last verified files of such
// a Secret until then (UnversionedKept, UncountedKept).
func (s *checksumSystem) confirmUncounted(ctx context.Context, h *Harness) error {
	s.mu.Lock()
	states := s.byNS[checksumGateway]
	counted := states[len(states)-1].secrets
	s.mu.Unlock()
	list := &corev1.SecretList{}
	if err := h.Client.List(ctx, list, client.InNamespace(checksumGateway)); err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, dataplane.RemoveUnversionedAnnotation)
	for i := range list.Items {
		sec := &list.Items[i]
		if _, ok := counted[sec.Namespace+"/"+sec.Name]; ok || sec.Annotations[dataplane.RemoveUnversionedAnnotation] == "true" {
			continue
		}
		if err := h.Client.Patch(ctx, sec, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// ckServesState says whether served is state plus, for Secrets state does not count,
// versions some earlier state counted.
func ckServesState(earlier []ckState, state, served map[string]ckCounted) bool {
	counted := map[string]ckCounted{}
	for k, c := range served {
		if _, ok := state[k]; ok {
			counted[k] = c
			continue
		}
		if !slices.ContainsFunc(earlier, func(st ckState) bool { c0, ok := st.secrets[k]; return ok && ckSameVersion(c0, c) }) {
			return false
		}
	}
	return ckSameCounted(state, counted)
}

func ckSameVersion(x, y ckCounted) bool {
	return x.id == y.id && bytes.Equal(x.crt, y.crt) && bytes.Equal(x.key, y.key) && bytes.Equal(x.ca, y.ca) && bytes.Equal(x.crl, y.crl)
}

func ckSameCounted(a, b map[string]ckCounted) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || !ckSameVersion(x, y) {
			return false
		}
	}
	return true
}

func ckDescribe(secrets map[string]ckCounted) []string {
	var out []string
	for k, c := range secrets {
		out = append(out, k+"="+c.id)
	}
	sort.Strings(out)
	return out
}

// Settle: once the last write is resolved, each scope's newest SecretCheckSum is the
// final Secrets' checksum and stands alone, and the agent serves exactly the final
// Secrets of its namespace and says it is consistent.
func (s *checksumSystem) Settle(ctx context.Context, h *Harness) {
	h.Eventually(ctx, "progress: checksum workload's last write resolved", func(ctx context.Context) bool {
		return s.resolve(ctx, h) == nil
	})
	// An operator confirms the removal of the Secrets no longer counted: the agent keeps
	// their last verified files until then (docs/checksum.md).
	h.Eventually(ctx, "progress: uncounted gateway Secrets confirmed for removal", func(ctx context.Context) bool {
		return s.confirmUncounted(ctx, h) == nil
	})
	s.mu.Lock()
	final := map[string]ckState{"": s.cluster[len(s.cluster)-1]}
	for _, ns := range []string{checksumGateway, checksumOther} {
		final[ns] = s.byNS[ns][len(s.byNS[ns])-1]
	}
	s.mu.Unlock()
	scopes := []struct{ ns, publishedIn, kind string }{{"", ManagerNamespace, "cluster"}, {checksumGateway, checksumGateway, "namespace"}, {checksumOther, checksumOther, "namespace"}}
	for _, sc := range scopes {
		var last string
		ok := h.Eventually(ctx, "progress: checksum published for the final Secrets", func(ctx context.Context) bool {
			list := &tenginev1.SecretCheckSumList{}
			if err := h.Client.List(ctx, list, client.InNamespace(sc.publishedIn), client.MatchingLabels{"checksum.trustplane.io/scope-kind": sc.kind}); err != nil {
				return false
			}
			var got []string
			for _, o := range list.Items {
				got = append(got, o.Name+"="+o.Spec.Checksum)
			}
			last = strings.Join(got, ", ")
			return len(list.Items) == 1 && list.Items[0].Spec.Checksum == final[sc.ns].sum
		})
		if !ok {
			h.Logf("checksum: %s scope in %s: published [%s], want exactly one with %s (IDs %v)", sc.kind, sc.publishedIn, last, final[sc.ns].sum, final[sc.ns].ids)
		}
	}
	want := final[checksumGateway]
	var seen string
	if !h.Eventually(ctx, "progress: data plane serves the final Secrets", func(context.Context) bool {
		snap, err := (dataplane.Store{Dir: s.dir}).Load()
		if err != nil {
			seen = err.Error()
			return false
		}
		served := map[string]ckCounted{}
		for _, sec := range snap.Secrets {
			served[checksumGateway+"/"+sec.Name] = ckCounted{id: sec.ID, crt: sec.Crt, key: sec.Key, ca: sec.CA, crl: sec.CRL}
		}
		seen = fmt.Sprintf("%s %v", snap.Checksum, ckDescribe(served))
		if snap.Checksum != want.sum || !ckSameCounted(served, want.secrets) {
			return false
		}
		files := s.agentFiles()
		wantFiles := 0
		for key, c := range want.secrets {
			_, name, _ := strings.Cut(key, "/")
			for _, part := range []string{".crt", ".key", ".ca.crt", ".ca.crl"} {
				if content := ckPart(c, part); len(content) > 0 {
					wantFiles++
					if !bytes.Equal(files[name+part], content) {
						seen += "; file " + name + part + " differs"
						return false
					}
				}
			}
		}
		if len(files) != wantFiles {
			seen += fmt.Sprintf("; %d files, want %d", len(files), wantFiles)
		}
		return len(files) == wantFiles
	}) {
		h.Logf("checksum: the agent serves %s; want %s %v", seen, want.sum, ckDescribe(want.secrets))
	}
	h.Eventually(ctx, "progress: data plane consistent", func(ctx context.Context) bool {
		body, ok := httpGet(ctx, "http://"+s.agentMetrics+"/metrics")
		return ok && strings.Contains(body, `trustplane_dataplane_consistent{track="secrets"} 1`)
	})
	s.judge()
	s.mu.Lock()
	for _, o := range s.waiting {
		h.NotJudged("checksum: observation judged by the end of the run", "%s", o.what)
	}
	h.Logf("checksum: %d Secret states written, %d SecretCheckSums judged, %d agent files judged", len(s.cluster), len(s.seen), len(s.judgedFiles))
	s.mu.Unlock()
}

// ckRevWatch follows one kind through API server restarts: it resumes from the last
// revision it saw, and when the API server cannot (410 Gone: a restarted API server's
// watch cache starts later) it lists again and records the gap, the revisions whose
// events it may have missed.
type ckRevWatch struct {
	h        *Harness
	c        client.WithWatch
	what     string
	list     func() client.ObjectList
	opts     []client.ListOption
	onObject func(h *Harness, typ watch.EventType, obj client.Object)

	progress atomic.Int64 // the revision delivered up to
	gapFrom  atomic.Int64 // the earliest revision after which events may be missing (0: none)
}

// ckListed is the event type ckRevWatch gives the objects of a list (at the start, and
// again after a gap): unlike a watch's Added, the object may have changed more than once
// since the state seen before it.
const ckListed watch.EventType = "LISTED"

func (w *ckRevWatch) state() (progress, gapFrom int64) { return w.progress.Load(), w.gapFrom.Load() }

func (w *ckRevWatch) run(ctx context.Context) {
	relist := true
	for ctx.Err() == nil {
		if relist {
			list := w.list()
			if err := w.c.List(ctx, list, w.opts...); err != nil {
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			listRV := ckRV(list.(metav1.ListInterface).GetResourceVersion())
			if last := w.progress.Load(); last > 0 && w.gapFrom.Load() == 0 {
				w.gapFrom.Store(last)
			}
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				w.onObject(w.h, ckListed, o.(client.Object))
				return nil
			})
			w.progress.Store(listRV)
		}
		opts := append(slices.Clone(w.opts), &client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: strconv.FormatInt(w.progress.Load(), 10), AllowWatchBookmarks: true}})
		wi, err := w.c.Watch(ctx, w.list(), opts...)
		if err != nil {
			relist = apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		relist = w.drain(ctx, wi)
		wi.Stop()
	}
}

// drain delivers a watch's events until it ends; it says whether to list again.
func (w *ckRevWatch) drain(ctx context.Context, wi watch.Interface) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return false
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
			case watch.Bookmark:
				if o, ok := ev.Object.(client.Object); ok {
					w.progress.Store(max(w.progress.Load(), ckRV(o.GetResourceVersion())))
				}
			default:
				o, ok := ev.Object.(client.Object)
				if !ok {
					continue
				}
				w.onObject(w.h, ev.Type, o)
				w.progress.Store(max(w.progress.Load(), ckRV(o.GetResourceVersion())))
			}
		}
	}
}
