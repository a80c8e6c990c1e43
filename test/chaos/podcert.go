package chaos

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/nodeagent"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

// The pod-certificate workload: two Nodes, each with a `trustplane node-agent` run from
// config/node-agent's DaemonSet under a token bound to a stand-in pod on that node (the
// agent's admission policy requires the node in the token), and pods that ask for two
// certificates each: one through the signer-name annotation (a projection kubelet never
// sees) and one through a podCertificate projected volume served by the agent
// (podcert.trustplane.io/serve: agent). The manager's signer rotates its CA every few
// minutes, and the workload also supplies CAs by hand (next.crt/next.key), so that leaves
// of several CAs are live while the trust bundle changes.
const (
	podcertNamespace = "chaos-podcert"
	podcertSigner    = "trustplane.io/pod-identity" // the manager's default signer
	podcertAccount   = "chaos"
	podcertCASecret  = "trustplane-pod-identity-ca" // --podcertificate-signer-ca-secret's default
	agentNamespace   = "trustplane-node-agent"
	agentAccount     = "trustplane-node-agent"
	// podcertMaxPods bounds the live pods, so that the workload keeps deleting as well.
	podcertMaxPods = 8
	// projectionLabel, in the volume source's userAnnotations (copied to the request's
	// spec.unverifiedUserAnnotations), tells a volume projection's requests from the
	// annotation projection's: a request names only its pod, not the projection.
	projectionLabel = "chaos.trustplane.io/projection"
	volumeName      = "certs"
	// The agent's directories: <volume>-<source index>.
	annotationDir = "podcert-annotation-0"
	volumeDir     = volumeName + "-0"
)

// Fast key types only: RSA keys take the agent seconds to generate and test nothing more.
var podcertKeyTypes = []string{"ECDSAP256", "ECDSAP384", "ED25519"}

type podcertSystem struct {
	nodes []*agentNode

	mu   sync.Mutex
	pods map[string]*podcertPod // by name: names are never reused
	// probes are pods a fault follows (podcertfaults.go): the workload leaves them alone.
	probes map[string]bool
	// judgedEvents are the expiry warnings judged (checkWarnings), by UID and time.
	judgedEvents  map[string]bool
	warningsAfter time.Time // the next checkWarnings, which lists every event
	// agentChecks counts the checks of the node agent faults' invariants (agentCheck).
	countMu     sync.Mutex
	agentChecks map[string]int
	next        int
	leaves      map[string]*issuedLeaf // by the PCR's namespace/name
	// revisions are the trust bundles seen: every watch event, and a consistent list in
	// every Check.
	revisions []bundleRevision
	// supplied are the next CAs supplyNextCA wrote into the CA Secret, by fingerprint,
	// with the time just before the write: the signer cannot have seen one earlier.
	supplied map[string]time.Time
	// overlapJudged and issuanceJudged count the leaves judged against their CA's overlap
	// (a supplied CA's) and against the trust bundle at their issuance.
	overlapJudged, issuanceJudged int
}

type agentNode struct {
	name, dir, probes, metrics string
	// offsetFile is the agent's --testing-clock-offset-file; jumps are the offsets the
	// clock-jump fault gave it (under podcertSystem.mu).
	offsetFile string
	jumps      []clockJump
	tmpfs      bool // dir is a tmpfs of its own: the disk-full fault can fill it
	proc       *Proc
}

// podcertPod is what the workload did to one pod.
type podcertPod struct {
	name string
	node *agentNode
	// firstStart is the node agent's Starts() read before the pod was created: no
	// incarnation before it can have seen the pod.
	firstStart int
	created    time.Time // just before the create was sent
	// versions counts the annotation projections the pod was given (its creation, then
	// each key-type change), counted before the write is sent.
	versions int
	keyType  string
}

// issuedLeaf is a certificate a PodCertificateRequest carries in its status.
type issuedLeaf struct {
	pcr       string
	pod, kind string // the request's pod, and projection ("annotation" or "volume")
	// beginRefreshAt and notAfter are the request's status: what the agent judges by.
	beginRefreshAt, notAfter time.Time
	leaf                     *x509.Certificate
	ca                       string // SHA-256 of the chain's CA certificate, hex
	// rv is the request's resourceVersion when seen issued: no earlier than the issuance.
	rv int64
	// seenAt is when the list that first showed it issued returned: no earlier than the
	// issuance.
	seenAt  time.Time
	checked int // revisions[:checked] were checked against it
	// atIssuance: the trust bundle in effect at rv was judged (or could not be).
	atIssuance bool
}

// bundleRevision is the signer's trust (the union of its ClusterTrustBundles) at one
// etcd revision, exactly.
type bundleRevision struct {
	rv         int64
	observedAt time.Time
	// stream: the watch's list or one of its events. The watch's revisions are every
	// revision of the bundles from its list on, so the bundle in effect at any revision
	// between two of them is the earlier's, unless the later is a list (restart): the
	// watch broke, and revisions between were missed.
	stream, restart bool
	cas             map[string]*x509.Certificate // by SHA-256 of the DER, hex
}

func newPodcert() System {
	return &podcertSystem{pods: map[string]*podcertPod{}, leaves: map[string]*issuedLeaf{}, probes: map[string]bool{}, judgedEvents: map[string]bool{},
		agentChecks: map[string]int{}, supplied: map[string]time.Time{}}
}

func (s *podcertSystem) Name() string { return "podcert" }

// podcertCAOverlap is the manager's --podcertificate-signer-ca-overlap: how long a new CA
// is in the trust bundle before it signs.
const podcertCAOverlap = 75 * time.Second

// ManagerArgs: the shortest leaves the API allows (1h), and a CA rotation every three
// minutes whose overlap is longer than the minute a leaf's notBefore is backdated, so a
// new CA is in the bundle before any leaf it signs is valid.
func (s *podcertSystem) ManagerArgs(*Harness) []string {
	return []string{"--podcertificate-signer-max-lifetime=1h", "--podcertificate-signer-ca-rotation=3m",
		"--podcertificate-signer-ca-overlap=" + podcertCAOverlap.String()}
}

// progressBundle is a ClusterTrustBundle of no signer that Check writes to when leaves
// wait for their judgement at issuance: the watch of the bundles then shows a revision
// after theirs (bundles of the signer change only with its CAs).
const progressBundle = "chaos-progress"

func (s *podcertSystem) Setup(ctx context.Context, h *Harness) error {
	marker, err := podcert.NewCA("chaos progress marker", time.Now(), time.Hour)
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podcertNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: podcertNamespace, Name: podcertAccount}},
		&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: progressBundle},
			Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(marker.CertPEM)}},
	} {
		if err := h.Client.Create(ctx, obj); err != nil {
			return err
		}
	}
	daemonSet := testenv.PodSpecOf(h.T, testenv.Rendered(h.T, "config/node-agent"), "DaemonSet", "trustplane-node-agent")
	container := testenv.ContainerOf(h.T, daemonSet, "node-agent")
	for i := range 2 {
		name := fmt.Sprintf("chaos-node-%d", i)
		if err := h.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return err
		}
		n := &agentNode{name: name, dir: h.T.TempDir(), probes: testenv.FreeAddr(h.T), metrics: testenv.FreeAddr(h.T),
			offsetFile: filepath.Join(h.T.TempDir(), "clock-offset")}
		n.tmpfs = mountAgentDir(h, n.dir)
		if err := os.WriteFile(n.offsetFile, []byte("0s\n"), 0o600); err != nil {
			return err
		}
		n.proc = h.Run("node-agent-"+name, testenv.ArgsOf(h.T, container, map[string]string{"spec.nodeName": name},
			// A DaemonSet pod's token, which names its node (the agent's admission policy).
			"--kubeconfig="+h.Env.PodServiceAccountKubeconfig(h.T, agentNamespace, agentAccount, name),
			"--dir="+n.dir, "--metrics-bind-address="+n.metrics, "--health-probe-bind-address="+n.probes,
			// The test hook the clock-jump fault moves the agent's clock with.
			"--testing-clock-offset-file="+n.offsetFile)...)
		s.nodes = append(s.nodes, n)
	}
	go s.watchBundles(ctx, h)
	return nil
}

// Faults: a node agent killed, its clock jumped, its disk full (podcertfaults.go; not
// without a tmpfs). A killed agent's successor knows nothing of its predecessor's
// requests (the state is in memory, as kubelet's is) and requests afresh.
func (s *podcertSystem) Faults(*Harness) []Fault {
	faults := []Fault{s.killAgentFault(), s.clockJumpFault()}
	if !slices.ContainsFunc(s.nodes, func(n *agentNode) bool { return !n.tmpfs }) {
		faults = append(faults, s.diskFullFault())
	}
	return faults
}

func (s *podcertSystem) killAgentFault() Fault {
	return Fault{
		Kind: "kill -9 node agent",
		Inject: func(_ context.Context, _ *Harness, rng *rand.Rand) (string, error) {
			n := s.nodes[rng.IntN(len(s.nodes))]
			return n.proc.Name(), n.proc.Restart(syscall.SIGKILL)
		},
		Recovered: func(ctx context.Context, _ *Harness) bool {
			for _, n := range s.nodes {
				if _, ok := httpGet(ctx, "http://"+n.probes+"/readyz"); !ok {
					return false
				}
			}
			return true
		},
	}
}

func (s *podcertSystem) Step(ctx context.Context, h *Harness, rng *rand.Rand) error {
	pods := &corev1.PodList{}
	if err := h.Client.List(ctx, pods, client.InNamespace(podcertNamespace)); err != nil {
		return err
	}
	var live, terminating []corev1.Pod
	for _, p := range pods.Items {
		switch {
		case s.isProbe(p.Name): // a fault follows it
		case p.DeletionTimestamp == nil:
			live = append(live, p)
		default:
			terminating = append(terminating, p)
		}
	}
	if len(terminating) > podcertMaxPods {
		// The kubelet stand-in keeps up: a node holds as many terminating pods as live
		// ones at most. Graceful deletes outnumber the removals below, and pods left
		// terminating for good filled the node agent's tmpfs in a 40-minute run.
		p := terminating[rng.IntN(len(terminating))]
		return client.IgnoreNotFound(h.Client.Delete(ctx, &p, client.GracePeriodSeconds(0)))
	}
	switch roll := rng.IntN(100); {
	case roll < 35 && len(live) < podcertMaxPods:
		return s.createPod(ctx, h, rng)
	case roll < 50 && len(live) > 0:
		// A graceful delete: with no kubelet the pod stays terminating, and the agent keeps
		// refreshing its credentials until it is gone (as kubelet does).
		p := live[rng.IntN(len(live))]
		return h.Client.Delete(ctx, &p, client.GracePeriodSeconds(int64(30+rng.IntN(60))))
	case roll < 60 && len(terminating) > 0:
		// The kubelet stand-in: a terminating pod is removed for good.
		p := terminating[rng.IntN(len(terminating))]
		return client.IgnoreNotFound(h.Client.Delete(ctx, &p, client.GracePeriodSeconds(0)))
	case roll < 65 && len(live) > 0:
		p := live[rng.IntN(len(live))]
		return client.IgnoreNotFound(h.Client.Delete(ctx, &p, client.GracePeriodSeconds(0)))
	case roll < 85 && len(live) > 0:
		return s.changeKeyType(ctx, h, rng, live[rng.IntN(len(live))])
	case roll < 90:
		return s.supplyNextCA(ctx, h)
	}
	return nil
}

func (s *podcertSystem) createPod(ctx context.Context, h *Harness, rng *rand.Rand) error {
	n := s.nodes[rng.IntN(len(s.nodes))]
	return s.createPodObject(ctx, h, s.newPod(n, podcertKeyTypes[rng.IntN(len(podcertKeyTypes))]))
}

// newPod records a new pod on n, before it is created: a create whose answer is lost may
// still have happened.
func (s *podcertSystem) newPod(n *agentNode, keyType string) *podcertPod {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	p := &podcertPod{name: fmt.Sprintf("pod-%03d", s.next), node: n, firstStart: n.proc.Starts(), created: time.Now(), versions: 1, keyType: keyType}
	s.pods[p.name] = p
	return p
}

// createPodObject creates pod p, asking for two certificates.
func (s *podcertSystem) createPodObject(ctx context.Context, h *Harness, p *podcertPod) error {
	return h.Client.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: podcertNamespace, Name: p.name, Annotations: map[string]string{
			nodeagent.SignerAnnotation: podcertSigner, nodeagent.KeyTypeAnnotation: p.keyType,
			nodeagent.ServeAnnotation: nodeagent.ServeAgent,
		}},
		Spec: corev1.PodSpec{
			NodeName: p.node.name, ServiceAccountName: podcertAccount, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: "app"}},
			Volumes: []corev1.Volume{{Name: volumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
					SignerName: podcertSigner, KeyType: "ED25519", MaxExpirationSeconds: ptr.To[int32](3600),
					CredentialBundlePath: "bundle.pem", UserAnnotations: map[string]string{projectionLabel: "volume"},
				}}},
			}}}},
		},
	})
}

// changeKeyType changes the annotation projection's key type: the agent starts that
// projection afresh (a new key, a new request), which is one more issuance.
func (s *podcertSystem) changeKeyType(ctx context.Context, h *Harness, rng *rand.Rand, pod corev1.Pod) error {
	current := pod.Annotations[nodeagent.KeyTypeAnnotation]
	choices := slices.DeleteFunc(slices.Clone(podcertKeyTypes), func(k string) bool { return k == current })
	keyType := choices[rng.IntN(len(choices))]
	s.mu.Lock()
	p := s.pods[pod.Name]
	if p != nil {
		// Counted before the write: a write whose answer is lost may have happened.
		p.versions++
	}
	s.mu.Unlock()
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	pod.Annotations[nodeagent.KeyTypeAnnotation] = keyType
	if err := h.Client.Patch(ctx, &pod, patch); err != nil {
		return err
	}
	s.mu.Lock()
	if p != nil {
		p.keyType = keyType
	}
	s.mu.Unlock()
	return nil
}

// supplyNextCA does what an operator does to bring in a CA of their own: it writes
// next.crt/next.key into the CA Secret, when no next CA is waiting (replacing a waiting
// one is another operation). The signer publishes it and lets it sign one overlap later.
func (s *podcertSystem) supplyNextCA(ctx context.Context, h *Harness) error {
	secret := &corev1.Secret{}
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: ManagerNamespace, Name: podcertCASecret}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if len(secret.Data[podcert.NextCertKey]) != 0 {
		return nil
	}
	ca, err := podcert.NewCA("chaos supplied CA", time.Now(), 3*time.Hour)
	if err != nil {
		return err
	}
	secret.Data[podcert.NextCertKey], secret.Data[podcert.NextKeyKey] = ca.CertPEM, ca.KeyPEM
	// Recorded before the write, whatever its answer: a write whose answer is lost may
	// have happened, and none can have happened before now.
	s.mu.Lock()
	s.supplied[fingerprint(ca.Cert)] = time.Now()
	s.mu.Unlock()
	return h.Client.Update(ctx, secret) // optimistic: conflicts with the signer's own writes
}

// watchBundles records every revision of the signer's trust bundle: each watch event is
// the state of every ClusterTrustBundle at that event's revision, exactly.
func (s *podcertSystem) watchBundles(ctx context.Context, h *Harness) {
	wc, err := client.NewWithWatch(h.Env.Config, client.Options{Scheme: h.Client.Scheme()})
	if err != nil {
		h.Logf("podcert: no watch client: %v", err)
		return
	}
	for ctx.Err() == nil {
		list := &certificatesv1.ClusterTrustBundleList{}
		if err := wc.List(ctx, list); err != nil {
			sleep(ctx, time.Second)
			continue
		}
		state := map[string]certificatesv1.ClusterTrustBundle{}
		for _, b := range list.Items {
			state[b.Name] = b
		}
		s.recordStream(list.ResourceVersion, state, true)
		w, err := wc.Watch(ctx, &certificatesv1.ClusterTrustBundleList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			b, ok := ev.Object.(*certificatesv1.ClusterTrustBundle)
			if !ok { // an error (the revision compacted, the server restarted): list again
				break
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				state[b.Name] = *b
			case watch.Deleted:
				delete(state, b.Name)
			default:
				continue
			}
			s.recordStream(b.ResourceVersion, state, false)
		}
		w.Stop()
	}
}

// record adds the signer's trust at revision rv, from a list of Check's.
func (s *podcertSystem) record(rv string, state map[string]certificatesv1.ClusterTrustBundle) {
	s.add(rv, state, bundleRevision{})
}

// recordStream adds the signer's trust at revision rv, from the watch: its list (restart)
// or an event.
func (s *podcertSystem) recordStream(rv string, state map[string]certificatesv1.ClusterTrustBundle, restart bool) {
	s.add(rv, state, bundleRevision{stream: true, restart: restart})
}

func (s *podcertSystem) add(rv string, state map[string]certificatesv1.ClusterTrustBundle, rev bundleRevision) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return
	}
	rev.rv, rev.observedAt, rev.cas = n, time.Now(), map[string]*x509.Certificate{}
	for _, b := range state {
		if b.Spec.SignerName != podcertSigner {
			continue
		}
		for _, c := range parseCerts([]byte(b.Spec.TrustBundle)) {
			rev.cas[fingerprint(c)] = c
		}
	}
	s.mu.Lock()
	// Most revisions repeat the last trust: they share its map, so a long run keeps one
	// small entry per revision.
	if n := len(s.revisions); n > 0 && sameKeys(s.revisions[n-1].cas, rev.cas) {
		rev.cas = s.revisions[n-1].cas
	}
	s.revisions = append(s.revisions, rev)
	s.mu.Unlock()
}

func sameKeys(a, b map[string]*x509.Certificate) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

func parseCerts(raw []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && b.Type == "CERTIFICATE" {
			out = append(out, c)
		}
	}
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func (s *podcertSystem) Check(ctx context.Context, h *Harness) {
	// The files first, then the requests: a bundle on disk was issued before it was
	// written, so the requests listed afterwards hold its leaf.
	files := s.readBundles()
	pcrs := &certificatesv1.PodCertificateRequestList{}
	if err := h.Client.List(ctx, pcrs, client.InNamespace(podcertNamespace)); err != nil {
		h.NotJudged("podcert: issued chain is a leaf and its CA", "listing the PodCertificateRequests: %v", err)
		return
	}
	seenAt := time.Now()
	s.checkRequestCount(h, pcrs.Items)
	s.collectLeaves(h, pcrs.Items, seenAt)
	s.checkFiles(h, files, pcrs.Items)
	// A consistent list of the bundles after the requests: its revision is no earlier
	// than any issuance just collected, so every leaf seen so far must verify against it.
	bundles := &certificatesv1.ClusterTrustBundleList{}
	if err := h.Client.List(ctx, bundles); err != nil {
		h.NotJudged("podcert: leaf's CA in the trust bundle", "listing the ClusterTrustBundles: %v", err)
		return
	}
	state := map[string]certificatesv1.ClusterTrustBundle{}
	for _, b := range bundles.Items {
		state[b.Name] = b
	}
	s.record(bundles.ResourceVersion, state)
	s.checkLeavesInBundle(h)
	s.bumpProgress(ctx, h)
	if time.Now().After(s.warningsAfter) { // every event listed: not on every pass
		s.warningsAfter = time.Now().Add(2 * time.Second)
		s.checkWarnings(ctx, h)
	}
}

// checkRequestCount: one request per projection per issuance. The agent keeps its
// state in memory (as kubelet does), so an issuance is one projection source (the pod's
// creation, each key-type change) as seen by one agent incarnation, plus a refresh per
// certificate past its beginRefreshAt by the agent's clock (real time, or as far ahead as
// a forward clock jump took it: it refreshes up to that much early), plus one per forward
// jump of 10 minutes during the pod's life: a request the agent's cache has not seen yet
// is presumed deleted (and asked again) once the agent's clock is 10 minutes plus its
// jitter past the request's creation, which such a jump makes true at once for a request
// the cache lags behind by more than the jitter (kubelet does the same). The incarnations that can have served a pod are
// the one running when it was created (firstStart) through the one running now, read
// after the list; several incarnations and versions chain, so their pairs number
// incarnations + versions - 1. With no agent restart during a pod's life this is exact:
// one request per key-type version, and one for the volume.
func (s *podcertSystem) checkRequestCount(h *Harness, pcrs []certificatesv1.PodCertificateRequest) {
	type projection struct{ pod, kind string }
	count := map[projection][]string{}
	refreshAt := map[projection][]time.Time{}
	now := time.Now()
	for i, pcr := range pcrs {
		p := projection{pcr.Spec.PodName, projectionKind(&pcrs[i])}
		count[p] = append(count[p], pcr.Name)
		if pcr.Status.BeginRefreshAt != nil {
			refreshAt[p] = append(refreshAt[p], pcr.Status.BeginRefreshAt.Time)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, names := range count {
		pod := s.pods[p.pod]
		if pod == nil {
			h.Check("podcert: one request per projection per issuance", false, "requests %v name pod %s, which the workload never created", names, p.pod)
			continue
		}
		// Due by the agent's clock, which a forward clock jump ran ahead of real time.
		dueBy := s.clockReached(pod.node, now)
		refreshable := 0
		for _, at := range refreshAt[p] {
			if !at.After(dueBy) {
				refreshable++
			}
		}
		incarnations := pod.node.proc.Starts() - pod.firstStart + 1
		versions := 1
		if p.kind == "annotation" {
			versions = pod.versions
		}
		presumedDeleted := s.forwardJumpsSince(pod.node, pod.created, now)
		allowed := incarnations + versions - 1 + refreshable + presumedDeleted
		h.Check("podcert: one request per projection per issuance", len(names) <= allowed,
			"pod %s/%s %s projection: %d requests %v, but only %d issuances (%d agent incarnations of %s, %d key-type versions, %d certificates due for refresh by %s, %d forward clock jumps)",
			podcertNamespace, p.pod, p.kind, len(names), names, allowed, incarnations, pod.node.name, versions, refreshable, dueBy.Format(time.RFC3339), presumedDeleted)
	}
}

// collectLeaves records the leaf and CA of every issued request not seen before, listed
// at seenAt. A leaf of a CA the workload supplied must come an overlap after the supply:
// the signer lets a new CA sign only once it has been in the trust bundle that long, so
// that relying parties holding the bundle from before know it.
func (s *podcertSystem) collectLeaves(h *Harness, pcrs []certificatesv1.PodCertificateRequest, seenAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pcr := range pcrs {
		key := pcr.Namespace + "/" + pcr.Name
		if pcr.Status.CertificateChain == "" || s.leaves[key] != nil {
			continue
		}
		chain := parseCerts([]byte(pcr.Status.CertificateChain))
		rv, err := strconv.ParseInt(pcr.ResourceVersion, 10, 64)
		ok := err == nil && len(chain) >= 2 && chain[0].CheckSignatureFrom(chain[1]) == nil
		h.Check("podcert: issued chain is a leaf and its CA", ok, "PodCertificateRequest %s (resourceVersion %s): %d certificates, the first not signed by the second", key, pcr.ResourceVersion, len(chain))
		if !ok {
			continue
		}
		beginRefreshAt, notAfter := leafTimes(&pcr)
		l := &issuedLeaf{pcr: key, pod: pcr.Spec.PodName, kind: projectionKind(&pcr), beginRefreshAt: beginRefreshAt, notAfter: notAfter,
			leaf: chain[0], ca: fingerprint(chain[1]), rv: rv, seenAt: seenAt}
		s.leaves[key] = l
		if supplied, ok := s.supplied[l.ca]; ok {
			s.overlapJudged++
			h.Check("podcert: a new CA signs only after its overlap in the trust bundle", !seenAt.Before(supplied.Add(podcertCAOverlap)),
				"leaf of PodCertificateRequest %s (serial %x) signed by CA %s, seen issued %.1fs after that CA was supplied as the next CA: the overlap is %v",
				key, l.leaf.SerialNumber, l.ca[:16], seenAt.Sub(supplied).Seconds(), podcertCAOverlap)
		}
	}
}

// checkLeavesInBundle: no leaf signed by a CA missing from the trust bundle while the
// leaf is valid. Every bundle revision at or after a leaf's issuance (the request's
// resourceVersion when seen issued is no earlier), observed before the leaf's notAfter,
// must hold its CA. Each pair is checked once, whichever was seen first.
func (s *podcertSystem) checkLeavesInBundle(h *Harness) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leaves {
		if !l.atIssuance {
			s.checkBundleAtIssuance(h, l)
		}
		for _, rev := range s.revisions[l.checked:] {
			if rev.rv < l.rv || !rev.observedAt.Before(l.leaf.NotAfter) {
				continue
			}
			_, ok := rev.cas[l.ca]
			h.Check("podcert: leaf's CA in the trust bundle", ok,
				"leaf of PodCertificateRequest %s (serial %x, issued by resourceVersion %d, valid until %s) signed by CA %s, missing from the ClusterTrustBundles of %s at resourceVersion %d (which hold %v)",
				l.pcr, l.leaf.SerialNumber, l.rv, l.leaf.NotAfter.Format(time.RFC3339), l.ca[:16], podcertSigner, rev.rv, short(rev.cas))
		}
		l.checked = len(s.revisions)
	}
}

// bumpProgress writes progressBundle when a leaf waits for the watch of the bundles to
// pass its revision, so that a later Check can judge it.
func (s *podcertSystem) bumpProgress(ctx context.Context, h *Harness) {
	s.mu.Lock()
	waiting := false
	for _, l := range s.leaves {
		waiting = waiting || !l.atIssuance
	}
	s.mu.Unlock()
	if !waiting {
		return
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"chaos.trustplane.io/progress":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	// A failed write is judged later: the leaves wait for the next one.
	_ = h.Client.Patch(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: progressBundle}}, client.RawPatch(types.MergePatchType, patch))
}

// leavesAwaitingJudgement counts the leaves not yet judged against the bundle at their
// issuance.
func (s *podcertSystem) leavesAwaitingJudgement() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.leaves {
		if !l.atIssuance {
			n++
		}
	}
	return n
}

// checkBundleAtIssuance: the leaf's CA was in the trust bundle in effect at the revision
// the leaf was issued by, the last revision of the watch at or before it (exact: the
// watch sees every revision of the bundles). A leaf whose revision the watch has not
// passed yet waits for a later Check. s.mu is held.
func (s *podcertSystem) checkBundleAtIssuance(h *Harness, l *issuedLeaf) {
	const invariant = "podcert: leaf's CA in the trust bundle"
	var before *bundleRevision
	for i := range s.revisions {
		rev := &s.revisions[i]
		if !rev.stream {
			continue
		}
		if rev.rv <= l.rv {
			before = rev
			continue
		}
		l.atIssuance = true
		if before == nil || rev.restart {
			h.NotJudged(invariant, "leaf of PodCertificateRequest %s issued by resourceVersion %d: the watch of the trust bundles missed the revisions around it", l.pcr, l.rv)
			return
		}
		_, ok := before.cas[l.ca]
		s.issuanceJudged++
		h.Check(invariant, ok,
			"leaf of PodCertificateRequest %s (serial %x) issued by resourceVersion %d, signed by CA %s, which the ClusterTrustBundles of %s did not hold then (resourceVersion %d holds %v)",
			l.pcr, l.leaf.SerialNumber, l.rv, l.ca[:16], podcertSigner, before.rv, short(before.cas))
		return
	}
}

func short(cas map[string]*x509.Certificate) []string {
	out := make([]string, 0, len(cas))
	for fp := range cas {
		out = append(out, fp[:16])
	}
	slices.Sort(out)
	return out
}

// agentFile is one credential bundle on disk.
type agentFile struct {
	path, pod, dir string
	node           *agentNode
	raw            []byte
}

// readBundles reads every credentialbundle.pem the agents wrote.
func (s *podcertSystem) readBundles() []agentFile {
	var out []agentFile
	for _, n := range s.nodes {
		root := filepath.Join(n.dir, podcertNamespace)
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != nodeagent.BundleFile {
				return nil // a directory going away while walked: the agent removed it
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return nil // removed meanwhile: the pod went away
			}
			rel, _ := filepath.Rel(root, path)
			parts := strings.Split(rel, string(filepath.Separator))
			if len(parts) != 3 {
				return nil
			}
			out = append(out, agentFile{path: path, pod: parts[0], dir: parts[1], node: n, raw: raw})
			return nil
		})
	}
	return out
}

// checkFiles: every bundle on disk is a key and the leaf of an issued request of that
// pod, for that projection, with the matching key; so the bundle check of the requests'
// leaves covers what pods read too.
func (s *podcertSystem) checkFiles(h *Harness, files []agentFile, pcrs []certificatesv1.PodCertificateRequest) {
	byLeaf := map[string]*certificatesv1.PodCertificateRequest{}
	for i, pcr := range pcrs {
		if chain := parseCerts([]byte(pcr.Status.CertificateChain)); len(chain) > 0 {
			byLeaf[string(chain[0].Raw)] = &pcrs[i]
		}
	}
	for _, f := range files {
		leaf, err := bundleLeaf(f.raw)
		if err != nil {
			h.Check("podcert: files hold an issued credential", false, "%s: %v", f.path, err)
			continue
		}
		pcr := byLeaf[string(leaf.Raw)]
		kind := "annotation"
		if f.dir == volumeDir {
			kind = "volume"
		}
		ok := pcr != nil && pcr.Spec.PodName == f.pod && (pcr.Spec.UnverifiedUserAnnotations[projectionLabel] == "volume") == (kind == "volume")
		h.Check("podcert: files hold an issued credential", ok,
			"%s: leaf serial %x is not the certificate of any PodCertificateRequest of pod %s/%s for its %s projection", f.path, leaf.SerialNumber, podcertNamespace, f.pod, kind)
	}
}

// bundleLeaf checks that a credential bundle is a key and its leaf, and returns the leaf.
func bundleLeaf(raw []byte) (*x509.Certificate, error) {
	keyBlock, rest := pem.Decode(raw)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" {
		return nil, errors.New("no PRIVATE KEY first")
	}
	certs := parseCerts(rest)
	if len(certs) == 0 {
		return nil, errors.New("no certificate after the key")
	}
	roots := x509.NewCertPool()
	roots.AddCert(certs[len(certs)-1])
	// CheckBundle verifies the key is the leaf's; the chain's own CA as the root.
	if _, err := testcerts.CheckBundle(raw, roots); err != nil {
		return nil, err
	}
	return certs[0], nil
}

// Settle: every pod has, for each projection, a credential bundle on disk issued by a CA
// in the current trust bundle, of the key type it asks for now; a gone pod's files are
// gone; no request is pending; and the continuous invariants once more.
func (s *podcertSystem) Settle(ctx context.Context, h *Harness) {
	h.Eventually(ctx, "progress: podcert: no pending PodCertificateRequest", func(ctx context.Context) bool {
		pcrs := &certificatesv1.PodCertificateRequestList{}
		if h.Client.List(ctx, pcrs, client.InNamespace(podcertNamespace)) != nil {
			return false
		}
		for _, pcr := range pcrs.Items {
			if len(pcr.Status.Conditions) == 0 {
				return false
			}
		}
		return true
	})
	pods := &corev1.PodList{}
	for h.Client.List(ctx, pods, client.InNamespace(podcertNamespace)) != nil && ctx.Err() == nil {
		sleep(ctx, time.Second)
	}
	present := map[string]bool{}
	for _, pod := range pods.Items {
		present[pod.Name] = true
		s.mu.Lock()
		p := s.pods[pod.Name]
		s.mu.Unlock()
		if p == nil {
			continue
		}
		keyType := pod.Annotations[nodeagent.KeyTypeAnnotation]
		var last string
		ok := h.Eventually(ctx, "progress: podcert: pod credentials on disk", func(ctx context.Context) bool {
			last = s.credentialsReady(ctx, h, p, keyType)
			return last == ""
		})
		if !ok {
			h.Logf("podcert: pod %s/%s on %s: %s", podcertNamespace, pod.Name, p.node.name, last)
		}
	}
	h.Eventually(ctx, "progress: podcert: a gone pod's files removed", func(context.Context) bool {
		for _, f := range s.readBundles() {
			if !present[f.pod] {
				return false
			}
		}
		return true
	})
	s.warningsAfter = time.Time{} // the events too, once more
	s.Check(ctx, h)
	// The last leaves wait for the watch to pass the progress write of that Check.
	h.Eventually(ctx, "progress: podcert: every leaf judged against the bundle at its issuance", func(ctx context.Context) bool {
		s.checkLeavesInBundle(h)
		if s.leavesAwaitingJudgement() == 0 {
			return true
		}
		s.bumpProgress(ctx, h)
		return false
	})
	s.mu.Lock()
	for _, l := range s.leaves {
		if !l.atIssuance {
			h.NotJudged("podcert: leaf's CA in the trust bundle", "leaf of PodCertificateRequest %s issued by resourceVersion %d: the watch of the trust bundles never passed it", l.pcr, l.rv)
		}
	}
	cas := map[string]bool{}
	for _, rev := range s.revisions {
		for fp := range rev.cas {
			cas[fp] = true
		}
	}
	h.Logf("podcert: %d pods created, %d leaves issued, checked against %d trust-bundle revisions holding %d CAs in all; %d leaves judged against the bundle at their issuance, %d leaves of the %d supplied CAs against the overlap",
		len(s.pods), len(s.leaves), len(s.revisions), len(cas), s.issuanceJudged, s.overlapJudged, len(s.supplied))
	s.mu.Unlock()
	s.logAgentChecks(h)
}

// credentialsReady says what is still missing of pod p's credentials ("" when nothing).
func (s *podcertSystem) credentialsReady(ctx context.Context, h *Harness, p *podcertPod, keyType string) string {
	bundles := &certificatesv1.ClusterTrustBundleList{}
	if err := h.Client.List(ctx, bundles); err != nil {
		return err.Error()
	}
	roots := x509.NewCertPool()
	for _, b := range bundles.Items {
		if b.Spec.SignerName == podcertSigner {
			roots.AppendCertsFromPEM([]byte(b.Spec.TrustBundle))
		}
	}
	for dir, want := range map[string]string{annotationDir: keyType, volumeDir: "ED25519"} {
		path := filepath.Join(p.node.dir, podcertNamespace, p.name, dir, nodeagent.BundleFile)
		raw, err := os.ReadFile(path)
		if err != nil {
			return err.Error()
		}
		leaf, err := testcerts.CheckBundle(raw, roots)
		if err != nil {
			return fmt.Sprintf("%s: against the trust bundle: %v", path, err)
		}
		if time.Now().After(leaf.NotAfter) {
			return fmt.Sprintf("%s: expired at %s", path, leaf.NotAfter)
		}
		if got := podcertsigner.KeyTypeOf(leaf.PublicKey); got != want {
			return fmt.Sprintf("%s: a %s key, the pod asks for %s", path, got, want)
		}
	}
	return ""
}
