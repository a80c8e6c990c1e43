package chaos

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestReplicaNetLeavesRunNetnsAlone: a replica's network namespace mounts nothing under
// /run/netns, so a kubelet's CNI namespaces made there before (test/node beside make
// test's chaos run) can still be removed. The first `ip netns add` on a machine
// bind-mounts /run/netns over itself and hides them ("remove netns: device or resource
// busy" when their pods go). The namespace works (a command run in it sees its own veth
// end), and removing it leaves no mount behind.
func TestReplicaNetLeavesRunNetnsAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root (make test runs as root)")
	}
	for _, tool := range []string{"ip", "iptables", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the replicas run on the host", tool)
		}
	}
	before := runNetnsMounts(t)
	n, err := newReplicaNet(1) // a run has two replicas, 0 and 1, eight addresses
	if err != nil {
		t.Fatal(err)
	}
	defer n.remove()
	if after := runNetnsMounts(t); after != before {
		t.Errorf("mounts under /run/netns changed with a replica's namespace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatal(err)
	}
	path, args := n.Wrap(ip, []string{"-o", "addr", "show", "dev", n.nsIf})
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), n.replicaIP) {
		t.Errorf("inside the namespace, %s shows %q (%v), want %s", n.nsIf, out, err, n.replicaIP)
	}
	n.remove()
	if mounted(t, n.file) {
		t.Errorf("%s is still mounted after remove", n.file)
	}
}

// runNetnsMounts are the mount points under /run/netns (and /var/run/netns).
func runNetnsMounts(t *testing.T) string {
	t.Helper()
	var out []string
	for _, line := range mountInfo(t) {
		if f := strings.Fields(line); len(f) > 4 && (strings.HasPrefix(f[4], "/run/netns") || strings.HasPrefix(f[4], "/var/run/netns")) {
			out = append(out, f[4])
		}
	}
	return strings.Join(out, "\n")
}

func mounted(t *testing.T, path string) bool {
	t.Helper()
	for _, line := range mountInfo(t) {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

func mountInfo(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(raw), "\n")
}
