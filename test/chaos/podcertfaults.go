package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
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
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
)

// The node agent's own faults besides its death: its disk full, and its clock jumped.

// agentDirSize is the tmpfs each node agent writes into: several times what the
// workload's pods need at most (podcertMaxPods live and as many terminating, the probes,
// two projections of a page per file each), small enough to fill at once.
const agentDirSize = "4m"

// fillerName is the file that fills a node agent's tmpfs, at its root (the agent never
// looks there: its tree is <namespace>/<pod>/...).
const fillerName = ".chaos-filler"

// mountAgentDir mounts a small tmpfs at dir, unmounted when the run ends (after the
// processes have stopped: cleanups run last-in first-out). Without it (not root) the
// disk-full fault is left out.
func mountAgentDir(h *Harness, dir string) bool {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+agentDirSize+",mode=0755"); err != nil {
		h.Logf("podcert: no tmpfs for the node agent's directory (%v): the disk-full fault is left out", err)
		return false
	}
	h.T.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return true
}

// diskFull is the fault "node agent disk full": a node agent's tmpfs is filled (and kept
// full) for a few seconds while a new pod on that node (the probe) is issued its
// certificates, which the agent then cannot write. What must hold, besides the
// continuous checks (every file on disk holds an issued credential, whole):
//   - the agent reports the failed write: a Warning event BundleWriteFailed on the probe
//     naming ENOSPC (it cannot write the probe's first bundle, so the event is due);
//   - nothing is lost: every credential file on that node before the fault is still there
//     at its end, unless its pod is gone;
//   - a failed write leaves no temporary file behind;
//   - it recovers (Recovered): once space frees, the probe's credentials are written and
//     verify against the trust bundle.
type diskFull struct {
	s *podcertSystem

	mu     sync.Mutex
	node   *agentNode
	probe  *podcertPod // nil: none could be created during the fault
	starts int         // the agent's Starts() when the fault began
	tmps   map[string]bool
}

func (s *podcertSystem) diskFullFault() Fault {
	d := &diskFull{s: s}
	return Fault{Kind: "node agent disk full", Inject: d.inject, Recovered: d.recovered}
}

func (d *diskFull) inject(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
	n := d.s.nodes[rng.IntN(len(d.s.nodes))]
	hold := time.Duration(2000+rng.IntN(3000)) * time.Millisecond
	keyType := podcertKeyTypes[rng.IntN(len(podcertKeyTypes))]
	before, tmpsBefore := d.s.filesOf(n), tempFiles(n.dir)
	d.mu.Lock()
	d.node, d.probe, d.starts, d.tmps = n, nil, n.proc.Starts(), nil
	d.mu.Unlock()

	filler, err := fill(n.dir)
	if err != nil {
		return "", err
	}
	start := time.Now()
	stopFilling := keepFull(filler)
	probe := d.s.createProbe(ctx, h, n, keyType, 20*time.Second)
	issued := probe != nil && d.s.waitIssued(ctx, h, probe, 30*time.Second)
	sleep(ctx, hold)
	d.checkReported(ctx, h, n, probe, issued)
	d.checkNothingLost(ctx, h, n, before)
	stopFilling()
	size, _ := filler.Seek(0, io.SeekCurrent)
	if err := errors.Join(filler.Close(), os.Remove(filler.Name())); err != nil {
		return "", fmt.Errorf("freeing %s: %w", n.dir, err)
	}

	d.mu.Lock()
	d.probe, d.tmps = probe, map[string]bool{}
	for t := range tempFiles(n.dir) {
		if !tmpsBefore[t] {
			d.tmps[t] = true
		}
	}
	d.mu.Unlock()
	probeName := "none (the API server did not take it)"
	if probe != nil {
		probeName = probe.name
	}
	return fmt.Sprintf("%s full for %.1fs (%d KiB filled), probe pod %s", n.proc.Name(), time.Since(start).Seconds(), size>>10, probeName), nil
}

// tmpfsMagic is statfs's f_type of a tmpfs.
const tmpfsMagic = 0x01021994

// fill fills dir's filesystem with a file, until ENOSPC; it returns the file, open. Only
// a tmpfs: never the host's disk.
func fill(dir string) (*os.File, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("not filling %s: %w", dir, err)
	}
	if st.Type != tmpfsMagic {
		return nil, fmt.Errorf("not filling %s: not a tmpfs", dir)
	}
	f, err := os.OpenFile(filepath.Join(dir, fillerName), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("filling %s: %w", dir, err)
	}
	if err := fillUp(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("filling %s: %w", dir, err)
	}
	return f, nil
}

// fillUp writes to f until its filesystem has no page left.
func fillUp(f *os.File) error {
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); errors.Is(err, syscall.ENOSPC) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// keepFull fills f's filesystem up again every 50ms (the agent frees pages as it removes
// a gone pod's files), until the returned function is called.
func keepFull(f *os.File) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
				_ = fillUp(f)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// checkReported: the agent, unable to write the probe's first bundle, says so on the
// pod. Not judged when the probe was never issued during the fault (a killed leader, a
// restarting API server), when its bundle got written after all (the agent freed pages
// by removing a gone pod's files before the filler took them), or when the agent was
// restarted meanwhile (the event may have died with it).
func (d *diskFull) checkReported(ctx context.Context, h *Harness, n *agentNode, probe *podcertPod, issued bool) {
	const invariant = "podcert: a full disk is reported on the pod"
	if !issued {
		h.NotJudged(invariant, "the probe pod was not issued its certificates while %s's disk was full", n.name)
		return
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		found, err := d.s.writeFailedEvent(ctx, h, probe.name)
		switch {
		case found:
			d.s.agentCheck(h, invariant, true, "")
			return
		case err != nil && time.Now().After(deadline):
			h.NotJudged(invariant, "listing the events of pod %s: %v", probe.name, err)
			return
		case time.Now().After(deadline):
			if d.s.anyBundleOf(probe) || n.proc.Starts() != d.starts {
				h.NotJudged(invariant, "pod %s: its bundle was written after all, or %s was restarted meanwhile", probe.name, n.proc.Name())
				return
			}
			d.s.agentCheck(h, invariant, false, "pod %s/%s on %s, issued while its disk was full, has no bundle on disk and no Warning event %s naming ENOSPC after 15s",
				podcertNamespace, probe.name, n.name, certificates.ReasonBundleWriteFailed)
			return
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// writeFailedEvent says whether pod has a Warning event BundleWriteFailed naming ENOSPC.
func (s *podcertSystem) writeFailedEvent(ctx context.Context, h *Harness, pod string) (bool, error) {
	list := &eventsv1.EventList{}
	if err := h.Client.List(ctx, list, client.InNamespace(podcertNamespace)); err != nil {
		return false, err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == pod && e.Reason == certificates.ReasonBundleWriteFailed && e.Type == corev1.EventTypeWarning &&
			strings.Contains(e.Note, "no space left on device") {
			return true, nil
		}
	}
	return false, nil
}

// checkNothingLost: every credential file on n before the fault is there at its end,
// unless its pod is gone (the agent removes a gone pod's files). Files read first, then
// the pods: a pod that exists after a file was found missing existed when it went
// missing (names are never reused).
func (d *diskFull) checkNothingLost(ctx context.Context, h *Harness, n *agentNode, before []string) {
	const invariant = "podcert: a full disk loses no credential"
	var missing []string
	for _, path := range before {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, path)
		}
	}
	for _, path := range missing {
		pod := strings.Split(strings.TrimPrefix(path, filepath.Join(n.dir, podcertNamespace)+string(filepath.Separator)), string(filepath.Separator))[0]
		err := h.Client.Get(ctx, client.ObjectKey{Namespace: podcertNamespace, Name: pod}, &corev1.Pod{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			h.NotJudged(invariant, "reading pod %s: %v", pod, err)
			continue
		}
		d.s.agentCheck(h, invariant, false, "%s was on disk before %s's disk filled and is gone at the fault's end, while pod %s still exists", path, n.name, pod)
	}
	d.s.agentCheck(h, invariant, true, "")
}

// recovered: the probe's credentials on disk and valid (an agent that gave up on a failed
// write, or wrote it torn, never gets there); then no temporary file the fault's failed
// writes made is left. With no probe (the API server did not take it during the fault)
// one is made now: the agent still has to write into the freed space.
func (d *diskFull) recovered(ctx context.Context, h *Harness) bool {
	d.mu.Lock()
	n, probe := d.node, d.probe
	d.mu.Unlock()
	if probe == nil {
		probe = d.s.createProbe(ctx, h, n, podcertKeyTypes[0], 5*time.Second)
		d.mu.Lock()
		d.probe = probe
		d.mu.Unlock()
		return false
	}
	if d.s.credentialsReady(ctx, h, probe, probe.keyType) != "" {
		return false
	}
	d.s.releaseProbe(probe)
	d.checkNoTemporaryFiles(h, n)
	return true
}

// checkNoTemporaryFiles: a temporary file that appeared during the fault and is still
// there once the agent has written again was left by a failed write. One left by a
// killed agent (an overlapping kill -9 mid-write) is not the disk's doing: not judged.
func (d *diskFull) checkNoTemporaryFiles(h *Harness, n *agentNode) {
	const invariant = "podcert: a failed write leaves no temporary file"
	d.mu.Lock()
	var stale []string
	for t := range tempFiles(n.dir) {
		if d.tmps[t] {
			stale = append(stale, t)
		}
	}
	restarted := n.proc.Starts() != d.starts
	d.mu.Unlock()
	if len(stale) > 0 && restarted {
		h.NotJudged(invariant, "%s was restarted during the fault; temporary files %v may be a crash's", n.proc.Name(), stale)
		return
	}
	d.s.agentCheck(h, invariant, len(stale) == 0, "temporary files left on %s after its disk was full: %v", n.name, stale)
}

// tempFiles are the agent's temporary files (.<name>.tmp-<random>) below dir.
func tempFiles(dir string) map[string]bool {
	out := map[string]bool{}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".tmp-") {
			out[path] = true
		}
		return nil
	})
	return out
}

// filesOf are the paths of the credential bundles on n now.
func (s *podcertSystem) filesOf(n *agentNode) []string {
	var out []string
	for _, f := range s.readBundles() {
		if f.node == n {
			out = append(out, f.path)
		}
	}
	return out
}

// anyBundleOf says whether a bundle of pod p is on disk.
func (s *podcertSystem) anyBundleOf(p *podcertPod) bool {
	for _, f := range s.readBundles() {
		if f.pod == p.name {
			return true
		}
	}
	return false
}

// createProbe creates a pod on n for a fault to follow, retried for up to timeout (the
// API server may be restarting); nil when it could not. The workload leaves a probe
// alone (no delete, no key-type change) until releaseProbe.
func (s *podcertSystem) createProbe(ctx context.Context, h *Harness, n *agentNode, keyType string, timeout time.Duration) *podcertPod {
	p := s.newPod(n, keyType)
	s.mu.Lock()
	s.probes[p.name] = true
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		err := s.createPodObject(ctx, h, p)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return p
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			// Perhaps created after all (a lost answer): the workload may have it back.
			s.releaseProbe(p)
			return nil
		}
		sleep(ctx, time.Second)
	}
}

func (s *podcertSystem) releaseProbe(p *podcertPod) {
	s.mu.Lock()
	delete(s.probes, p.name)
	s.mu.Unlock()
}

func (s *podcertSystem) isProbe(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probes[name]
}

// waitIssued waits, at most timeout, for both of p's projections to have an issued
// request.
func (s *podcertSystem) waitIssued(ctx context.Context, h *Harness, p *podcertPod, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pcrs := &certificatesv1.PodCertificateRequestList{}
		if h.Client.List(ctx, pcrs, client.InNamespace(podcertNamespace)) == nil {
			issued := map[string]bool{}
			for i, pcr := range pcrs.Items {
				if pcr.Spec.PodName == p.name && pcr.Status.CertificateChain != "" {
					issued[projectionKind(&pcrs.Items[i])] = true
				}
			}
			if issued["volume"] && issued["annotation"] {
				return true
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return false
}

// agentCheck records a check of an invariant of the node agent's faults, counted by
// invariant for the summary Settle prints: a fault whose checks never ran proves nothing.
// Its own lock: checkWarnings calls it under s.mu.
func (s *podcertSystem) agentCheck(h *Harness, invariant string, ok bool, format string, args ...any) {
	h.Check(invariant, ok, format, args...)
	s.countMu.Lock()
	s.agentChecks[invariant]++
	s.countMu.Unlock()
}

// logAgentChecks prints how often each invariant of the node agent's faults was checked.
func (s *podcertSystem) logAgentChecks(h *Harness) {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	for _, invariant := range slices.Sorted(maps.Keys(s.agentChecks)) {
		h.Logf("podcert: %6d checks of %q", s.agentChecks[invariant], invariant)
	}
}

// clockApplyLag bounds how long after the offset file changes the agent may still run
// on the offset before: it reads the file every 250ms, and a restarted agent at start.
const clockApplyLag = 5 * time.Second

// clockJump is one offset of a node agent's clock: from start until end (zero while it
// lasts) plus clockApplyLag.
type clockJump struct {
	offset     time.Duration
	start, end time.Time
}

// clockJumpFault is "node agent clock jump": a node agent's clock (its injected clock,
// through the hidden --testing-clock-offset-file: faketime cannot move a Go process's
// clock) jumps 10 minutes ahead or back for 5-15s, then returns. The agent reads every
// time it judges through that clock: refresh (beginRefreshAt plus jitter), the
// CertificateOverdueForRefresh event (10 minutes past that), CertificateExpired
// (notAfter), the states metric, and when a request it cannot find is presumed deleted.
// Each is a comparison of that clock with a time of the certificate or request, so a
// skew of 10 minutes may make the agent do each up to 10 minutes early (forward) or late
// (back), and nothing more: that is what a node whose clock is off by that much does, and
// what the checks below allow, exactly (a skew applied twice or the wrong way round
// breaks them; the agent's log line for each offset applied shows the hook is wired).
// With the run's 1-hour leaves, no certificate is expired or overdue even 10 minutes
// ahead, so in a short run any such warning is a violation. What must hold:
//   - while it lasts, the agent's states metric counts no projection expired, or overdue
//     for refresh, unless one of its certificates is by the skewed clock (its notAfter,
//     or beginRefreshAt + 10m, before real time + the offset);
//   - at all times (Check), every CertificateExpired or CertificateOverdueForRefresh
//     event names a pod with a certificate expired, or overdue, by its agent's clock when
//     the event was made (real time plus the largest offset in effect then);
//   - requests: a certificate counts as due for refresh once its beginRefreshAt is before
//     the furthest its agent's clock has been, and a forward jump may make the agent
//     presume one request of each projection deleted and ask again (checkRequestCount);
//   - files still hold issued credentials (Check), and after the clock returns the agent
//     still requests and writes: a pod created then gets its credentials (Recovered).
type clockJumpFault struct {
	s *podcertSystem

	mu    sync.Mutex
	node  *agentNode
	probe *podcertPod // made by recovered once the clock has returned
}

func (s *podcertSystem) clockJumpFault() Fault {
	c := &clockJumpFault{s: s}
	return Fault{Kind: "node agent clock jump", Inject: c.inject, Recovered: c.recovered}
}

func (c *clockJumpFault) inject(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
	n := c.s.nodes[rng.IntN(len(c.s.nodes))]
	offset := 10 * time.Minute
	if rng.IntN(2) == 0 {
		offset = -offset
	}
	hold := time.Duration(5000+rng.IntN(10000)) * time.Millisecond
	c.mu.Lock()
	c.node, c.probe = n, nil
	c.mu.Unlock()

	c.s.mu.Lock()
	n.jumps = append(n.jumps, clockJump{offset: offset, start: time.Now()})
	c.s.mu.Unlock()
	applied, err := c.setOffset(ctx, h, n, offset)
	if err != nil {
		return "", err
	}
	start := time.Now()
	sleep(ctx, hold/2)
	c.s.checkStatesUnderSkew(ctx, h, n, offset)
	sleep(ctx, hold-hold/2)
	_, err = c.setOffset(ctx, h, n, 0)
	c.s.mu.Lock()
	n.jumps[len(n.jumps)-1].end = time.Now()
	c.s.mu.Unlock()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s for %.1fs (applied after %.1fs)", n.proc.Name(), signed(offset), time.Since(start).Seconds(), applied.Seconds()), nil
}

// signed is d with its sign: +10m0s, -10m0s.
func signed(d time.Duration) string {
	if d > 0 {
		return "+" + d.String()
	}
	return d.String()
}

// setOffset writes offset into n's offset file (atomically: the agent must never read a
// half-written one) and waits, at most 10s, for the agent to log that it applied it.
// An agent that keeps running and never does breaks the hook the fault stands on.
func (c *clockJumpFault) setOffset(ctx context.Context, h *Harness, n *agentNode, offset time.Duration) (time.Duration, error) {
	mark, starts := len(n.proc.Output()), n.proc.Starts()
	tmp := n.offsetFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(offset.String()+"\n"), 0o600); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, n.offsetFile); err != nil {
		return 0, err
	}
	start := time.Now()
	logged := fmt.Sprintf(`"offset":%q`, offset.String())
	for time.Since(start) < 10*time.Second && ctx.Err() == nil {
		out := n.proc.Output()
		if n.proc.Starts() != starts || len(out) < mark {
			mark = 0 // another incarnation: it reads the file at start
		}
		if strings.Contains(out[mark:], logged) {
			c.s.agentCheck(h, "podcert: the node agent's clock follows its offset file", true, "")
			return time.Since(start), nil
		}
		sleep(ctx, 50*time.Millisecond)
	}
	if n.proc.Starts() != starts {
		h.NotJudged("podcert: the node agent's clock follows its offset file", "%s restarted while its clock was set to %v", n.proc.Name(), offset)
	} else {
		c.s.agentCheck(h, "podcert: the node agent's clock follows its offset file", false, "%s did not log applying the offset %v within 10s", n.proc.Name(), offset)
	}
	return time.Since(start), nil
}

// recovered: the agent answers /readyz, and a pod created on its node after the clock
// returned gets its credentials (the agent still requests and writes on the real clock).
func (c *clockJumpFault) recovered(ctx context.Context, h *Harness) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := httpGet(ctx, "http://"+c.node.probes+"/readyz"); !ok {
		return false
	}
	if c.probe == nil {
		c.probe = c.s.createProbe(ctx, h, c.node, podcertKeyTypes[0], 5*time.Second)
		return false
	}
	if c.s.credentialsReady(ctx, h, c.probe, c.probe.keyType) != "" {
		return false
	}
	c.s.releaseProbe(c.probe)
	return true
}

// checkStatesUnderSkew scrapes n's agent while its clock is offset: the projections it
// counts expired (overdue for refresh) are at most those of its pods with a certificate
// expired (overdue) by the skewed clock.
func (s *podcertSystem) checkStatesUnderSkew(ctx context.Context, h *Harness, n *agentNode, offset time.Duration) {
	const invariant = "podcert: a clock skew marks no valid certificate expired or overdue"
	body, ok := httpGet(ctx, "http://"+n.metrics+"/metrics")
	if !ok {
		h.NotJudged(invariant, "scraping %s", n.proc.Name())
		return
	}
	skewed := time.Now().Add(offset)
	expired, overdue := s.projectionsPast(n, skewed)
	gotExpired, gotOverdue := stateCount(body, "expired"), stateCount(body, "overdue_for_refresh")
	s.agentCheck(h, invariant, gotExpired <= expired && gotOverdue <= overdue,
		"%s with its clock at %s: %d projections expired and %d overdue for refresh, but only %d and %d of its pods' certificates are by that clock",
		n.proc.Name(), signed(offset), gotExpired, gotOverdue, expired, overdue)
}

// projectionsPast counts the projections of n's pods with a certificate expired, and with
// one overdue for refresh (10 minutes past beginRefreshAt), at clock.
func (s *podcertSystem) projectionsPast(n *agentNode, clock time.Time) (expired, overdue int) {
	type projection struct{ pod, kind string }
	exp, over := map[projection]bool{}, map[projection]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leaves {
		if p := s.pods[l.pod]; p == nil || p.node != n {
			continue
		}
		key := projection{l.pod, l.kind}
		exp[key] = exp[key] || l.notAfter.Before(clock)
		over[key] = over[key] || l.beginRefreshAt.Add(overdueAfter).Before(clock)
	}
	for k := range exp {
		if exp[k] {
			expired++
		}
		if over[k] {
			overdue++
		}
	}
	return expired, overdue
}

// overdueAfter is how long past beginRefreshAt a refresh is overdue (kubelet's
// refreshOverdueDuration).
const overdueAfter = 10 * time.Minute

// stateCount sums trustplane_podcertificate_states of state in a scrape.
func stateCount(body, state string) int {
	total := 0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "trustplane_podcertificate_states{") || !strings.Contains(line, `state="`+state+`"`) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			total += int(v)
		}
	}
	return total
}

// clockReached is the furthest n's agent clock has been by now: real time, or during a
// forward jump real time plus the offset, until clockApplyLag after it ended.
func (s *podcertSystem) clockReached(n *agentNode, now time.Time) time.Time {
	reached := now
	for _, j := range n.jumps {
		if j.offset <= 0 {
			continue
		}
		until := now
		if !j.end.IsZero() && j.end.Add(clockApplyLag).Before(now) {
			until = j.end.Add(clockApplyLag)
		}
		if t := until.Add(j.offset); t.After(reached) {
			reached = t
		}
	}
	return reached
}

// forwardJumpsSince counts the jumps of n's agent clock forward by 10 minutes or more
// (kubelet's assumeDeletedThreshold) in effect at some time in [from, to].
func (s *podcertSystem) forwardJumpsSince(n *agentNode, from, to time.Time) int {
	count := 0
	for _, j := range n.jumps {
		if j.offset >= presumedDeletedAfter && !j.start.After(to) && (j.end.IsZero() || !j.end.Add(clockApplyLag).Before(from)) {
			count++
		}
	}
	return count
}

// presumedDeletedAfter is how long after its creation a request the agent cannot find is
// presumed deleted, before its jitter (kubelet's assumeDeletedThreshold).
const presumedDeletedAfter = 10 * time.Minute

// offsetAt is the largest offset n's agent clock may have had at t (0 when none).
func (s *podcertSystem) offsetAt(n *agentNode, t time.Time) time.Duration {
	var offset time.Duration
	for _, j := range n.jumps {
		if !t.Before(j.start) && (j.end.IsZero() || !t.After(j.end.Add(clockApplyLag))) && j.offset > offset {
			offset = j.offset
		}
	}
	return offset
}

// checkWarnings: every CertificateExpired and CertificateOverdueForRefresh event names a
// pod holding a certificate expired (overdue) by its agent's clock when it was made: real
// time (the event's time, stamped by the agent's real clock) plus the largest offset its
// agent's clock may have had then. Each event (and each new occurrence of a series) is
// judged once.
func (s *podcertSystem) checkWarnings(ctx context.Context, h *Harness) {
	const invariant = "podcert: an expiry warning only when the agent's clock says so"
	list := &eventsv1.EventList{}
	if err := h.Client.List(ctx, list, client.InNamespace(podcertNamespace)); err != nil {
		h.NotJudged(invariant, "listing the events: %v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	allJustified := true
	for _, e := range list.Items {
		if e.Type != corev1.EventTypeWarning || (e.Reason != certificates.ReasonExpired && e.Reason != certificates.ReasonOverdueForRefresh) {
			continue
		}
		at := e.EventTime.Time
		if e.Series != nil {
			at = e.Series.LastObservedTime.Time
		}
		id := fmt.Sprintf("%s@%d", e.UID, at.UnixNano())
		if s.judgedEvents[id] {
			continue
		}
		s.judgedEvents[id] = true
		justified := s.warningJustified(e, at)
		allJustified = allJustified && justified
		s.agentCheck(h, invariant, justified, "Warning %s on pod %s/%s at %s: no certificate of the pod is %s by its agent's clock then (real time + %v)",
			e.Reason, podcertNamespace, e.Regarding.Name, at.Format(time.RFC3339Nano), map[string]string{certificates.ReasonExpired: "expired", certificates.ReasonOverdueForRefresh: "overdue for refresh"}[e.Reason],
			s.offsetAtLocked(e.Regarding.Name, at))
	}
	if allJustified { // one check per listing: the run shows the events were looked at
		s.agentCheck(h, invariant, true, "")
	}
}

// warningJustified says whether a certificate of the event's pod was expired (overdue)
// by its agent's clock at at. Called under s.mu.
func (s *podcertSystem) warningJustified(e eventsv1.Event, at time.Time) bool {
	clock := at.Add(s.offsetAtLocked(e.Regarding.Name, at))
	for _, l := range s.leaves {
		if l.pod != e.Regarding.Name {
			continue
		}
		if e.Reason == certificates.ReasonExpired && l.notAfter.Before(clock) ||
			e.Reason == certificates.ReasonOverdueForRefresh && l.beginRefreshAt.Add(overdueAfter).Before(clock) {
			return true
		}
	}
	return false
}

// offsetAtLocked is offsetAt for the node of pod (0 for a pod the workload does not know).
func (s *podcertSystem) offsetAtLocked(pod string, at time.Time) time.Duration {
	p := s.pods[pod]
	if p == nil {
		return 0
	}
	return s.offsetAt(p.node, at)
}

// leafTimes are the request's status times the agent judges by.
func leafTimes(pcr *certificatesv1.PodCertificateRequest) (beginRefreshAt, notAfter time.Time) {
	if pcr.Status.BeginRefreshAt != nil {
		beginRefreshAt = pcr.Status.BeginRefreshAt.Time
	}
	if pcr.Status.NotAfter != nil {
		notAfter = pcr.Status.NotAfter.Time
	}
	return beginRefreshAt, notAfter
}

// projectionKind is "volume" or "annotation": which projection a request is for.
func projectionKind(pcr *certificatesv1.PodCertificateRequest) string {
	if pcr.Spec.UnverifiedUserAnnotations[projectionLabel] == "volume" {
		return "volume"
	}
	return "annotation"
}
