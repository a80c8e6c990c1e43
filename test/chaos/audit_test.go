package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJudgeLeaderWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	lease := func(replica string, s float64) managerWrite {
		return managerWrite{replica: replica, at: at(s), lease: true, what: "update leases"}
	}
	release := func(replica string, s float64) managerWrite {
		w := lease(replica, s)
		w.released = true
		return w
	}
	write := func(replica string, s float64) managerWrite {
		return managerWrite{replica: replica, at: at(s), what: "patch configmaps a/b"}
	}
	tests := []struct {
		name   string
		writes []managerWrite
		// bad are the times of the writes that must be violations.
		bad []float64
	}{
		{"the holder writes while renewing", []managerWrite{lease("a", 0), write("a", 1), lease("a", 2), write("a", 16.9)}, nil},
		{"the holder writes after another acquired", []managerWrite{lease("a", 0), lease("b", 16), write("a", 17), write("b", 17)}, []float64{17}},
		{"the holder writes after its Lease expired unrenewed", []managerWrite{lease("a", 0), write("a", 15), write("a", 15.5)}, []float64{15.5}},
		{"a write in flight lands after the release", []managerWrite{lease("a", 0), release("a", 3), write("a", 3.02)}, nil},
		{"a replica writes after releasing", []managerWrite{lease("a", 0), release("a", 3), write("a", 4.5)}, []float64{4.5}},
		{"a write in flight lands after another acquired", []managerWrite{lease("a", 0), release("a", 3), lease("b", 3.01), write("a", 3.02)}, []float64{3.02}},
		{"a replica writes before it ever held the Lease", []managerWrite{write("a", 0), lease("b", 1), write("a", 2)}, []float64{0, 2}},
		{"a deposed replica leads again", []managerWrite{lease("a", 0), lease("b", 20), lease("a", 40), write("a", 41), write("b", 41)}, []float64{41}},
		{"out of order in the log, judged by time", []managerWrite{write("a", 1), lease("a", 0)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			judged, violations := judgeLeaderWrites(tt.writes)
			var got []float64
			for _, v := range violations {
				got = append(got, v.write.at.Sub(t0).Seconds())
				if v.String() == "" {
					t.Error("a violation without a message")
				}
			}
			if len(got) != len(tt.bad) {
				t.Fatalf("violations at %v s, want at %v s", got, tt.bad)
			}
			for i := range got {
				if got[i] != tt.bad[i] {
					t.Fatalf("violations at %v s, want at %v s", got, tt.bad)
				}
			}
			writes := 0
			for _, w := range tt.writes {
				if !w.lease {
					writes++
				}
			}
			if judged != writes {
				t.Errorf("judged %d writes, want %d", judged, writes)
			}
		})
	}
}

func TestWriteOfReadsTheAuditEvent(t *testing.T) {
	replicaOf := map[string]string{"10.253.0.2": "manager-0"}
	event := func(mutate func(m map[string]any)) auditEvent {
		m := map[string]any{
			"verb": "update", "user": map[string]any{"username": managerUser}, "sourceIPs": []any{"10.253.0.2"},
			"objectRef":                map[string]any{"resource": "leases", "namespace": ManagerNamespace, "name": leaseName, "apiGroup": "coordination.k8s.io"},
			"responseStatus":           map[string]any{"code": 200},
			"requestObject":            map[string]any{"spec": map[string]any{"holderIdentity": "manager-0_1234"}},
			"requestReceivedTimestamp": "2026-11-29T12:00:00.123456Z",
		}
		mutate(m)
		raw, _ := json.Marshal(m)
		var e auditEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	w, ok := writeOf(event(func(map[string]any) {}), replicaOf)
	if !ok || !w.lease || w.released || w.replica != "manager-0" || w.at.Nanosecond() != 123456000 {
		t.Errorf("a renewal: got %+v, %v", w, ok)
	}
	w, ok = writeOf(event(func(m map[string]any) {
		m["requestObject"] = map[string]any{"spec": map[string]any{"holderIdentity": ""}}
	}), replicaOf)
	if !ok || !w.released {
		t.Errorf("a release: got %+v, %v", w, ok)
	}
	w, ok = writeOf(event(func(m map[string]any) {
		m["objectRef"] = map[string]any{"resource": "configmaps", "namespace": "x", "name": "y"}
		delete(m, "requestObject")
	}), replicaOf)
	if !ok || w.lease || !strings.Contains(w.what, "configmaps x/y") {
		t.Errorf("a ConfigMap write: got %+v, %v", w, ok)
	}
	w, ok = writeOf(event(func(m map[string]any) {
		m["user"] = map[string]any{"username": targetUser}
		m["objectRef"] = map[string]any{"resource": "roles", "namespace": "team", "name": "kc-1", "apiGroup": "rbac.authorization.k8s.io"}
	}), replicaOf)
	if !ok || w.lease || w.replica != "manager-0" {
		t.Errorf("a write into a target through a proxy: got %+v, %v", w, ok)
	}
	for name, mutate := range map[string]func(map[string]any){
		"the target's credential writing the Lease": func(m map[string]any) { m["user"] = map[string]any{"username": targetUser} },
		"an Event": func(m map[string]any) {
			m["objectRef"] = map[string]any{"resource": "events", "namespace": "default", "name": "x.1"}
		},
		"a JWKS server's own Lease": func(m map[string]any) {
			m["objectRef"] = map[string]any{"resource": "leases", "namespace": "default", "name": "trustplane-jwks-server-1", "apiGroup": "coordination.k8s.io"}
		},
	} {
		if w, ok := writeOf(event(mutate), replicaOf); ok {
			t.Errorf("%s is neither a renewal nor judged: got %+v", name, w)
		}
	}
	for name, mutate := range map[string]func(map[string]any){
		"a failed write":      func(m map[string]any) { m["responseStatus"] = map[string]any{"code": 409} },
		"another address":     func(m map[string]any) { m["sourceIPs"] = []any{"127.0.0.1"} },
		"another user":        func(m map[string]any) { m["user"] = map[string]any{"username": "system:serviceaccount:x:y"} },
		"no object reference": func(m map[string]any) { delete(m, "objectRef") },
	} {
		if w, ok := writeOf(event(mutate), replicaOf); ok {
			t.Errorf("%s: judged as %+v", name, w)
		}
	}
}

func TestStalePID(t *testing.T) {
	for rule, want := range map[string]int{
		"-A INPUT -i tpc12h0 -p tcp -m tcp --dport 6443 -m comment --comment trustplane-chaos-4321 -j DROP": 4321,
		"-A INPUT -i eth0 -j DROP": 0,
		"-P INPUT ACCEPT":          0,
	} {
		pid, ok := stalePID(rule)
		if pid != want || ok != (want != 0) {
			t.Errorf("stalePID(%q) = %d, %v; want %d", rule, pid, ok, want)
		}
	}
}

// TestRotatedAuditLogsAreRead: the API server rotates its audit log (at 100 MB by
// default); the Lease's writes in the rotated file must still count, or the leader's
// later writes look like a stranger's (a 40-minute run: 38 false violations).
func TestRotatedAuditLogsAreRead(t *testing.T) {
	dir := t.TempDir()
	saved := auditLog
	auditLog = filepath.Join(dir, "audit.log")
	t.Cleanup(func() { auditLog = saved })
	line := func(resource, holder, at string) string {
		e := map[string]any{
			"verb": "update", "user": map[string]any{"username": managerUser}, "sourceIPs": []any{"10.253.0.2"},
			"objectRef":                map[string]any{"resource": resource, "namespace": ManagerNamespace, "name": leaseName, "apiGroup": "coordination.k8s.io"},
			"responseStatus":           map[string]any{"code": 200},
			"requestObject":            map[string]any{"spec": map[string]any{"holderIdentity": holder}},
			"requestReceivedTimestamp": at,
		}
		if resource != "leases" {
			e["objectRef"] = map[string]any{"resource": resource, "namespace": "a", "name": "b"}
		}
		raw, _ := json.Marshal(e)
		return string(raw) + "\n"
	}
	files := map[string]string{
		"audit-2026-11-29T16-18-36.826.log": line("leases", "manager-0_1", "2026-11-29T16:18:30Z"),
		"audit.log":                         line("configmaps", "", "2026-11-29T16:18:37Z"),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logs, err := auditLogs()
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 || logs[1] != auditLog {
		t.Fatalf("audit logs %v, want the rotated one, then %s", logs, auditLog)
	}
	replicaOf := map[string]string{"10.253.0.2": "manager-0"}
	writes, err := readManagerWrites(logs, replicaOf)
	if err != nil {
		t.Fatal(err)
	}
	if judged, violations := judgeLeaderWrites(writes); judged != 1 || len(violations) != 0 {
		t.Errorf("judged %d writes, violations %v; want 1 judged, none", judged, violations)
	}
	// The current file alone, as before: the holder's write looks like a stranger's.
	writes, err = readManagerWrites(logs[1:], replicaOf)
	if err != nil {
		t.Fatal(err)
	}
	if _, violations := judgeLeaderWrites(writes); len(violations) != 1 {
		t.Errorf("the current file alone: violations %v, want 1", violations)
	}
}
