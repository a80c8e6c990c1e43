package localnode

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Ports of the kubelet (loopback only for healthz) and kube-proxy.
const (
	KubeletPort        = 10250
	kubeletHealthzPort = 10248
	proxyHealthzAddr   = "127.0.0.1:10256"
	proxyMetricsAddr   = "127.0.0.1:10249"
)

// kubeletConfig is the KubeletConfiguration of the node. The machines this runs on have a
// cgroup v1 hierarchy (failCgroupV1: false, the cgroupfs driver; no QoS cgroups nor
// node-allocatable enforcement, which want more of cgroups than they give); images cannot
// be pulled again, so image garbage collection never runs; eviction only near a full
// disk; ConfigMap volumes sync every 10 s (Config.SyncFrequency, DefaultSyncFrequency), so
// a rotated JWK Set reaches nginx quickly.
// The kubelet adds no iptables chains of its own (kube-proxy's are removed on Stop).
// The API server reaches the kubelet (logs, exec) with a client certificate from
// KubeletClientCA; everything else is authorized by the API server (webhook).
func (n *Node) kubeletConfig() string {
	p := n.paths
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%s
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
syncFrequency: %s
serializeImagePulls: false
rotateCertificates: false
makeIPTablesUtilChains: false
serverTLSBootstrap: false
`, NodeIP, KubeletPort, kubeletHealthzPort, p.kubeletClientCA, p.containerdSocket, n.syncFrequency())
}

// syncFrequency is Config.SyncFrequency, or DefaultSyncFrequency when unset.
func (n *Node) syncFrequency() time.Duration {
	if n.cfg.SyncFrequency > 0 {
		return n.cfg.SyncFrequency
	}
	return DefaultSyncFrequency
}

func (n *Node) startKubelet(ctx context.Context) error {
	p := n.paths
	for path, data := range map[string][]byte{
		p.kubeletConfig: []byte(n.kubeletConfig()), p.kubeletKubeconfig: n.cfg.KubeletKubeconfig, p.kubeletClientCA: n.cfg.KubeletClientCA,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	n.cfg.Log("starting kubelet as node %s (log: %s)", n.cfg.Name, p.kubeletLog)
	proc, err := startProcess("kubelet", p.kubeletLog, filepath.Join(n.cfg.NodeBinDir, "kubelet"),
		"--config", p.kubeletConfig,
		"--kubeconfig", p.kubeletKubeconfig,
		"--root-dir", p.kubeletRoot,
		"--cert-dir", filepath.Join(p.kubeletRoot, "pki"),
		"--hostname-override", n.cfg.Name,
		"--node-ip", NodeIP,
		"--v", "2",
	)
	if err != nil {
		return err
	}
	n.processes = append(n.processes, proc)
	return waitFor(ctx, 60*time.Second, proc, p.kubeletLog, func() bool {
		return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", kubeletHealthzPort))
	})
}

// kubeProxyConfig runs kube-proxy in iptables mode, masquerading all Service traffic: a
// pod reaching a Service whose endpoint is on the same bridge gets its answer back
// through the host, without br_netfilter. No conntrack tuning: that is the machine's.
func (n *Node) kubeProxyConfig() string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: %s
metricsBindAddress: %s
iptables:
  masqueradeAll: true
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.paths.proxyKubeconfig, n.cfg.Name, NodeIP, PodSubnet, proxyHealthzAddr, proxyMetricsAddr)
}

func (n *Node) startKubeProxy(ctx context.Context) error {
	p := n.paths
	if err := os.WriteFile(p.proxyConfig, []byte(n.kubeProxyConfig()), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(p.proxyKubeconfig, n.cfg.ProxyKubeconfig, 0o600); err != nil {
		return err
	}
	n.cfg.Log("starting kube-proxy, iptables mode (log: %s)", p.proxyLog)
	proc, err := startProcess("kube-proxy", p.proxyLog, filepath.Join(n.cfg.NodeBinDir, "kube-proxy"), "--config", p.proxyConfig)
	if err != nil {
		return err
	}
	n.processes = append(n.processes, proc)
	return waitFor(ctx, 60*time.Second, proc, p.proxyLog, func() bool {
		return httpOK("http://" + proxyHealthzAddr + "/healthz")
	})
}

func httpOK(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startScheduler runs kube-scheduler for the node's pods: the local control plane has none
// of its own (without a node nothing could be scheduled). No leader election, no port.
func (n *Node) startScheduler() error {
	p := n.paths
	if err := os.WriteFile(p.schedulerKubeconfig, n.cfg.SchedulerKubeconfig, 0o600); err != nil {
		return err
	}
	n.cfg.Log("starting kube-scheduler (log: %s)", p.schedulerLog)
	proc, err := startProcess("kube-scheduler", p.schedulerLog, filepath.Join(n.cfg.NodeBinDir, "kube-scheduler"),
		"--kubeconfig", p.schedulerKubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	)
	if err != nil {
		return err
	}
	n.processes = append(n.processes, proc)
	return nil
}
