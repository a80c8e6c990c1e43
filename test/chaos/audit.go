package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/trustplane/trustplane/internal/testenv"
)

// The API server's audit log is the judge of "a deposed leader does not write": it sees
// every write as it lands, whoever sent it and whenever it was sent. Each replica has an
// address of its own (netns.go), so the log's source IP names the replica; the Lease's
// writes name the holder (their request bodies are logged) and when it renewed.

// invLeaderWrites is the invariant's name.
const invLeaderWrites = "manager: no write outside the lease"

// leaseName is the manager's leader Lease (config/manager's --leader-election-id default).
const leaseName = "trustplane-manager"

// managerUser is the manager's ServiceAccount as the audit log names it; targetUser the
// credential of the clusters the manager reaches through proxies (the kubeconfig target,
// the garden front), the test control plane's admin.
const (
	managerUser = "system:serviceaccount:" + ManagerNamespace + ":trustplane-manager"
	targetUser  = "admin"
)

// auditPolicy logs the manager's writes, its own and those with the targets' credential
// (the harness's are told apart by their source address): the Lease's with their bodies
// (the holder and a release), the rest without.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  users: ["` + managerUser + `"]
  verbs: ["create", "update", "patch"]
  resources: [{group: "coordination.k8s.io", resources: ["leases"]}]
- level: Metadata
  users: ["` + managerUser + `", "` + targetUser + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditLog is the API server's audit log of this test binary's control plane.
var auditLog string

// withAuditLog writes the policy into dir and has the API server log to dir/audit.log.
func withAuditLog(dir string) ([]testenv.Option, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("writing the audit policy: %w", err)
	}
	auditLog = filepath.Join(dir, "audit.log")
	return []testenv.Option{
		testenv.WithAPIServerFlag("audit-policy-file", policy),
		testenv.WithAPIServerFlag("audit-log-path", auditLog),
		// The log rotates at 100 MB unless told otherwise (lumberjack's default), which a
		// 40-minute run passed: the judge read only the newest file, saw none of the
		// Lease's earlier writes, and took 38 writes of the leader for a stranger's.
		// auditLogs reads the rotated files as well; this keeps them few.
		testenv.WithAPIServerFlag("audit-log-maxsize", "1024"),
	}, nil
}

// auditLogs are the audit log's files: those rotated away (audit-<time>.log, oldest
// first) and the current one.
func auditLogs() ([]string, error) {
	rotated, err := filepath.Glob(strings.TrimSuffix(auditLog, ".log") + "-*.log")
	if err != nil {
		return nil, err
	}
	sort.Strings(rotated) // the names carry the time of the rotation
	return append(rotated, auditLog), nil
}

// auditEvent is what the judge reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	SourceIPs []string                  `json:"sourceIPs"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		APIGroup  string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject *struct {
		Spec struct {
			HolderIdentity *string `json:"holderIdentity"`
		} `json:"spec"`
	} `json:"requestObject"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// managerWrite is one write by a replica that took effect.
type managerWrite struct {
	replica string
	at      time.Time
	// lease says it is a write of the leader Lease; released that it gave it up.
	lease, released bool
	what            string
}

// readManagerWrites reads the successful writes of the manager's replicas from the audit
// log's files; replicaOf names the replica by source IP (writes from elsewhere are left
// out).
func readManagerWrites(paths []string, replicaOf map[string]string) ([]managerWrite, error) {
	var writes []managerWrite
	for _, path := range paths {
		more, err := readManagerWritesFrom(path, replicaOf)
		if err != nil {
			return nil, err
		}
		writes = append(writes, more...)
	}
	return writes, nil
}

func readManagerWritesFrom(path string, replicaOf map[string]string) ([]managerWrite, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var writes []managerWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		if w, ok := writeOf(e, replicaOf); ok {
			writes = append(writes, w)
		}
	}
	return writes, sc.Err()
}

// writeOf is the event as a replica's write, if it is one that took effect.
func writeOf(e auditEvent, replicaOf map[string]string) (managerWrite, bool) {
	if (e.User.Username != managerUser && e.User.Username != targetUser) || e.ObjectRef == nil || len(e.SourceIPs) == 0 ||
		e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
		return managerWrite{}, false
	}
	replica, ok := replicaOf[e.SourceIPs[0]]
	if !ok {
		return managerWrite{}, false
	}
	ref := e.ObjectRef
	w := managerWrite{replica: replica, at: e.RequestReceivedTimestamp,
		what: fmt.Sprintf("%s %s %s/%s as %s", e.Verb, ref.Resource, ref.Namespace, ref.Name, e.User.Username)}
	if ref.Resource == "events" {
		// Events are reports, sent by a broadcaster that controller-runtime flushes as
		// the manager stops, after it released the Lease (a SIGTERM showed one 6 ms
		// after): no state a leader owns.
		return managerWrite{}, false
	}
	if ref.APIGroup == "coordination.k8s.io" && ref.Resource == "leases" &&
		(e.User.Username != managerUser || ref.Namespace != ManagerNamespace || ref.Name != leaseName) {
		// Another Lease is a process's own heartbeat (a JWKS server's report of what it
		// serves), which every replica writes by design.
		return managerWrite{}, false
	}
	if ref.APIGroup == "coordination.k8s.io" && ref.Resource == "leases" {
		w.lease = true
		w.released = e.RequestObject != nil && (e.RequestObject.Spec.HolderIdentity == nil || *e.RequestObject.Spec.HolderIdentity == "")
	}
	return w, true
}

// leaderWriteViolation is a write made outside the writer's tenure.
type leaderWriteViolation struct {
	write managerWrite
	// holder held the Lease at the time ("" for nobody); ended is when the writer's
	// own tenure had ended (zero if it never held the Lease before).
	holder string
	ended  time.Time
}

func (v leaderWriteViolation) String() string {
	if v.ended.IsZero() {
		return fmt.Sprintf("%s wrote (%s) at %s without ever having held the Lease; holder then: %q",
			v.write.replica, v.write.what, v.write.at.Format(time.RFC3339Nano), v.holder)
	}
	return fmt.Sprintf("%s wrote (%s) at %s, %v after its tenure ended (at %s); holder then: %q",
		v.write.replica, v.write.what, v.write.at.Format(time.RFC3339Nano), v.write.at.Sub(v.ended), v.ended.Format(time.RFC3339Nano), v.holder)
}

// inFlightAtRelease is how long after a replica's release of the Lease a write of its
// own may still land, as long as no other replica has written the Lease since. A stopping
// manager releases only once its controllers have returned (controller-runtime stops
// them first), but a write sent just before on another connection than the Lease's can
// arrive after the release (seed 202: 21.6 ms after). No other replica leads then, so it
// meets no other leader's writes.
const inFlightAtRelease = time.Second

// judgeLeaderWrites judges every write that is not the Lease's: it must come from the
// replica holding the Lease, within leaseDuration of its last renewal (after that another
// replica may acquire it) and before it released it. A replica's tenure starts with its
// first successful write of the Lease after another's (the API server's optimistic lock
// lets only one win) and ends at the first of: another's write of the Lease, its own
// release (plus inFlightAtRelease, unless another replica writes the Lease sooner),
// leaseDuration after its last renewal. Times are the API server's reception times, one
// clock for all.
func judgeLeaderWrites(writes []managerWrite) (judged int, violations []leaderWriteViolation) {
	sort.SliceStable(writes, func(i, j int) bool { return writes[i].at.Before(writes[j].at) })
	holder, tenureEnd := "", time.Time{}
	// releaser released the Lease last, and its writes in flight may land until
	// releaserEnd, unless a replica writes the Lease before.
	releaser, releaserEnd := "", time.Time{}
	ended := map[string]time.Time{} // each replica's last tenure's end
	for _, w := range writes {
		if w.lease {
			if holder != "" && holder != w.replica {
				ended[holder] = minTime(tenureEnd, w.at)
			}
			if releaser != "" {
				ended[releaser] = minTime(releaserEnd, w.at)
				releaser = ""
			}
			if w.released {
				ended[w.replica] = w.at
				holder, tenureEnd = "", time.Time{}
				releaser, releaserEnd = w.replica, w.at.Add(inFlightAtRelease)
				continue
			}
			holder, tenureEnd = w.replica, w.at.Add(leaseDuration)
			continue
		}
		judged++
		if w.replica == holder && !w.at.After(tenureEnd) || w.replica == releaser && !w.at.After(releaserEnd) {
			continue
		}
		end := ended[w.replica]
		if w.replica == holder {
			end = tenureEnd
		}
		violations = append(violations, leaderWriteViolation{write: w, holder: holder, ended: end})
	}
	return judged, violations
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// judgeLeaderWrites judges, at the end of the run, every write the replicas made
// (invLeaderWrites). It needs each replica at an address of its own.
func (h *Harness) judgeLeaderWrites() {
	replicaOf := map[string]string{}
	for i, n := range h.nets {
		if n == nil {
			h.Logf("%s: not judged: the replicas share the host's address", invLeaderWrites)
			return
		}
		replicaOf[n.replicaIP] = h.managers[i].Name()
		replicaOf[n.loopback] = h.managers[i].Name()
	}
	logs, err := auditLogs()
	if err != nil {
		h.NotJudged(invLeaderWrites, "finding the audit log's files: %v", err)
		return
	}
	if h.LogDir != "" {
		for i, path := range logs {
			name := "kube-apiserver-audit.log"
			if i < len(logs)-1 {
				name = "kube-apiserver-audit-" + strings.TrimPrefix(filepath.Base(path), "audit-")
			}
			if err := copyFile(path, filepath.Join(h.LogDir, name)); err != nil {
				h.Logf("keeping the audit log: %v", err)
			}
		}
	}
	writes, err := readManagerWrites(logs, replicaOf)
	if err != nil {
		h.NotJudged(invLeaderWrites, "reading the audit log: %v", err)
		return
	}
	judged, violations := judgeLeaderWrites(writes)
	for _, v := range violations {
		h.Check(invLeaderWrites, false, "%s", v)
	}
	for range judged - len(violations) {
		h.Check(invLeaderWrites, true, "")
	}
	h.Logf("%s: %d writes of the replicas judged against %d of the Lease's", invLeaderWrites, judged, len(writes)-judged)
}

func copyFile(from, to string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, raw, 0o600)
}
