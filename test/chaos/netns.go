package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Each manager replica runs in a network namespace of its own, joined to the host by a
// veth pair, as a pod's network is: so the run can partition one replica from the API
// server for real (its packets dropped, no reset, no error), as a broken node link or a
// firewall does, while the rest of the machine still reaches it.
//
// Inside the namespace every TCP connection to 127.0.0.1 is translated to the host's end
// of the veth, and on the host back to 127.0.0.1 (route_localnet on both ends allows the
// loopback address off the loopback device): the replica dials the API server, the garden
// and the targets at the addresses every other process uses, and the API server sees the
// replica's own address as the source, which tells the replicas apart in its audit log.
//
// The namespace is held by a file of the run's own (unshare --net=<file>) and entered with
// nsenter, never named under /run/netns as `ip netns add` would: the first `ip netns add`
// on a machine bind-mounts /run/netns over itself, which hides the namespaces a kubelet's
// CNI made there before (test/node, running beside make test's chaos run, or make run's
// node), and their sandboxes can then never be removed ("remove netns: device or
// resource busy").
//
// A machine where network namespaces cannot be made (not root, no iptables) runs the
// replicas on the host and without the partition fault; the run's log says so.

// replicaNet is one replica's network namespace and veth pair.
type replicaNet struct {
	// ns names the network namespace in messages; file holds it (a bind mount of the
	// namespace); hostIf and nsIf are the veth's two ends.
	ns, file, hostIf, nsIf string
	// hostIP and replicaIP are the two ends' addresses (a /30).
	hostIP, replicaIP string
	// loopback is the address the harness's proxies dial from for this replica's
	// connections (127.0.0.10 + i), its name in the audit log behind a proxy.
	loopback string
	// comment marks this run's iptables rules, to find them again.
	comment string

	mu          sync.Mutex
	partitioned bool
	apiPort     string
}

// chaosRulePrefix starts the comment on every iptables rule a run adds; the rest is the
// run's process ID, so a later run can remove what a killed one left behind.
const chaosRulePrefix = "trustplane-chaos-"

// newReplicaNet makes replica i's namespace and veth pair and the address translation.
// The addresses come from 10.253.0.0/16, eight per run, chosen by the process ID so two
// runs on one machine do not meet.
func newReplicaNet(i int) (*replicaNet, error) {
	pid := os.Getpid()
	block := (pid % 8192) * 8
	base := fmt.Sprintf("10.253.%d.", block/256)
	n := &replicaNet{
		ns:        fmt.Sprintf("tpc%d-%d", pid, i),
		file:      filepath.Join(os.TempDir(), fmt.Sprintf("trustplane-chaos-netns-%d-%d", pid, i)),
		hostIf:    fmt.Sprintf("tpc%dh%d", pid%10000000, i),
		nsIf:      fmt.Sprintf("tpc%dn%d", pid%10000000, i),
		hostIP:    fmt.Sprintf("%s%d", base, block%256+4*i+1),
		replicaIP: fmt.Sprintf("%s%d", base, block%256+4*i+2),
		loopback:  fmt.Sprintf("127.0.0.%d", 10+i),
		comment:   fmt.Sprintf("%s%d", chaosRulePrefix, pid),
	}
	if err := os.WriteFile(n.file, nil, 0o600); err != nil {
		return nil, err
	}
	inNS := func(args ...string) []string { return append([]string{"nsenter", "--net=" + n.file}, args...) }
	steps := [][]string{
		{"unshare", "--net=" + n.file, "true"},
		// Made inside, its host end sent to this process's (the host's) namespace.
		inNS("ip", "link", "add", n.nsIf, "type", "veth", "peer", "name", n.hostIf, "netns", strconv.Itoa(pid)),
		{"ip", "addr", "add", n.hostIP + "/30", "dev", n.hostIf},
		{"ip", "link", "set", n.hostIf, "up"},
		{"sysctl", "-q", "-w", "net.ipv4.conf." + n.hostIf + ".route_localnet=1"},
		{"iptables", "-t", "nat", "-A", "PREROUTING", "-i", n.hostIf, "-d", n.hostIP, "-p", "tcp", "-m", "comment", "--comment", n.comment, "-j", "DNAT", "--to-destination", "127.0.0.1"},
		inNS("ip", "addr", "add", n.replicaIP+"/30", "dev", n.nsIf),
		inNS("ip", "link", "set", n.nsIf, "up"),
		inNS("ip", "link", "set", "lo", "up"),
		inNS("sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"),
		inNS("iptables", "-t", "nat", "-A", "OUTPUT", "-d", "127.0.0.1/32", "-p", "tcp", "-j", "DNAT", "--to-destination", n.hostIP),
		inNS("iptables", "-t", "nat", "-A", "POSTROUTING", "-o", n.nsIf, "-j", "MASQUERADE"),
	}
	for _, step := range steps {
		if err := command(step...); err != nil {
			n.remove()
			return nil, err
		}
	}
	return n, nil
}

// Wrap is the command line that runs args inside the namespace: nsenter execs the
// command, so the process the harness signals is the command itself.
func (n *replicaNet) Wrap(path string, args []string) (string, []string) {
	return "nsenter", append([]string{"--net=" + n.file, path}, args...)
}

// On is addr (host:port) with the replica's own address for host.
func (n *replicaNet) On(addr string) string {
	return net.JoinHostPort(n.replicaIP, addr[strings.LastIndex(addr, ":")+1:])
}

// Partition drops every packet the replica sends to the API server's port (apiHostPort,
// host:port) until Heal: its connections hang as over a dead link, neither refused nor
// reset, and the rest of its network works.
func (n *replicaNet) Partition(apiHostPort string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.partitioned {
		return fmt.Errorf("%s is already partitioned", n.ns)
	}
	port := apiHostPort[strings.LastIndex(apiHostPort, ":")+1:]
	if err := command(n.dropRule("-I", port)...); err != nil {
		return err
	}
	n.partitioned, n.apiPort = true, port
	return nil
}

// Heal ends the partition.
func (n *replicaNet) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.partitioned {
		return nil
	}
	if err := command(n.dropRule("-D", n.apiPort)...); err != nil {
		return err
	}
	n.partitioned = false
	return nil
}

// dropRule adds (-I) or deletes (-D) the rule that drops the replica's packets to port;
// after the host's translation their destination is 127.0.0.1:port.
func (n *replicaNet) dropRule(op, port string) []string {
	return []string{"iptables", op, "INPUT", "-i", n.hostIf, "-p", "tcp", "--dport", port, "-m", "comment", "--comment", n.comment, "-j", "DROP"}
}

// remove deletes the veth pair, the host's rules and the namespace's file (the namespace
// goes with its last process).
func (n *replicaNet) remove() {
	_ = n.Heal()
	_ = exec.Command("ip", "link", "del", n.hostIf).Run()
	_ = exec.Command("umount", n.file).Run()
	_ = os.Remove(n.file)
	_ = command("iptables", "-t", "nat", "-D", "PREROUTING", "-i", n.hostIf, "-d", n.hostIP, "-p", "tcp", "-m", "comment", "--comment", n.comment, "-j", "DNAT", "--to-destination", "127.0.0.1")
}

// removeStaleRules deletes the iptables rules of runs whose process is gone (a run killed
// before its cleanup); their namespaces went with the processes' veths' removal or stay
// harmless.
func removeStaleRules() {
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables", "-t", table, "-S").Output()
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(out), "\n") {
			pid, ok := stalePID(line)
			if !ok || processAlive(pid) {
				continue
			}
			rule := strings.Fields(strings.Replace(line, "-A ", "-D ", 1))
			_ = command(append([]string{"iptables", "-t", table}, rule...)...)
		}
	}
}

// stalePID is the process ID in a rule's chaos comment, if it has one.
func stalePID(rule string) (int, bool) {
	i := strings.Index(rule, chaosRulePrefix)
	if i < 0 || !strings.HasPrefix(rule, "-A ") {
		return 0, false
	}
	var pid int
	if _, err := fmt.Sscanf(rule[i+len(chaosRulePrefix):], "%d", &pid); err != nil {
		return 0, false
	}
	return pid, true
}

// command runs a command, its output in the error.
func command(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
