package localnode

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// forwardChain holds the node's forwarding rules: pods may reach each other (through a
// Service too, which the host forwards from the bridge back to it), nothing else.
const forwardChain = "TRUSTPLANE-NODE"

// SetUpNetwork creates the bridge with the node's address (the kernel here may have no
// dummy interfaces; a bridge holds an address as well, and the CNI bridge plugin takes
// it over as the pods' gateway), lets the host forward between pods, and forwards
// nothing from pods anywhere else.
func SetUpNetwork() error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", BridgeName)); err != nil {
		if err := run("ip", "link", "add", BridgeName, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := run("ip", "addr", "replace", NodeIP+"/24", "dev", BridgeName); err != nil {
		return err
	}
	if err := run("ip", "link", "set", BridgeName, "up"); err != nil {
		return err
	}
	// A Service whose endpoint is a pod on the same bridge is reached through the host.
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enabling IPv4 forwarding: %w", err)
	}
	_ = run("iptables", "-w", "-N", forwardChain)
	for _, rule := range [][]string{
		{"-F", forwardChain},
		{"-A", forwardChain, "-i", BridgeName, "-o", BridgeName, "-j", "ACCEPT"},
		{"-A", forwardChain, "-s", PodSubnet, "-j", "DROP"},
		{"-A", forwardChain, "-d", PodSubnet, "-j", "DROP"},
	} {
		if err := run("iptables", append([]string{"-w"}, rule...)...); err != nil {
			return err
		}
	}
	if run("iptables", "-w", "-C", "FORWARD", "-j", forwardChain) != nil {
		return run("iptables", "-w", "-I", "FORWARD", "-j", forwardChain)
	}
	return nil
}

// writeCNIConfig gives pods an address on the bridge and routes to the node and the
// Service range only: a pod has no default route, so nothing it sends leaves the machine.
func (n *Node) writeCNIConfig() error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "trustplane-node",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": BridgeName, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "dataDir": n.paths.cniIPAMDir,
					"ranges": [][]map[string]any{{{"subnet": PodSubnet, "gateway": NodeIP, "rangeStart": "10.217.0.10"}}},
					"routes": []map[string]any{{"dst": ServiceCIDR}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.paths.cniConfDir, "10-trustplane-node.conflist"), data, 0o644)
}

// removeLeftovers unmounts what is still mounted under the node's directory and has
// kube-proxy remove its rules.
func (n *Node) removeLeftovers() error {
	err := unmountUnder(n.paths.dir)
	// Removes every KUBE-* chain and rule (iptables mode); its output is noise.
	_ = exec.Command(filepath.Join(n.cfg.NodeBinDir, "kube-proxy"), "--cleanup").Run() //nolint:gosec // the caller's kube-proxy
	return err
}

// removeNetwork removes the bridge and the forwarding rules SetUpNetwork made.
func removeNetwork() error {
	var err error
	if _, statErr := os.Stat(filepath.Join("/sys/class/net", BridgeName)); statErr == nil {
		err = run("ip", "link", "del", BridgeName)
	}
	for run("iptables", "-w", "-D", "FORWARD", "-j", forwardChain) == nil {
	}
	_ = run("iptables", "-w", "-F", forwardChain)
	_ = run("iptables", "-w", "-X", forwardChain)
	return err
}

// unmountUnder detaches every mount point under dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			mp := unescapeMountPoint(fields[4])
			if mp == dir || strings.HasPrefix(mp, dir+"/") {
				points = append(points, mp)
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPoint undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPoint(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
