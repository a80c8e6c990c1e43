package localcp

import "path/filepath"

// Addresses are where make run's manager listens. Everything binds to loopback: make run
// is for the developer's own machine.
type Addresses struct {
	// Metrics serves Prometheus /metrics over plain HTTP.
	Metrics string
	// Probes serves /healthz and /readyz; make run waits for /readyz.
	Probes string
	// JWKS is trustplane's own JWKS server.
	JWKS string
	// NodeAgentMetrics serves the node agent's Prometheus /metrics over plain HTTP.
	NodeAgentMetrics string
}

// DefaultAddresses are the manager's usual ports, on loopback.
func DefaultAddresses() Addresses {
	return Addresses{Metrics: "127.0.0.1:8080", Probes: "127.0.0.1:8081", JWKS: "127.0.0.1:8082", NodeAgentMetrics: "127.0.0.1:8083"}
}

// ManagerArgs are the arguments of `trustplane manager` under make run: every controller,
// no leader election (there is one replica). An empty kubeconfig leaves the choice of
// cluster to $KUBECONFIG.
func ManagerArgs(kubeconfig string, addrs Addresses) []string {
	args := []string{"manager",
		"--leader-elect=false",
		"--metrics-bind-address", addrs.Metrics,
		"--health-probe-bind-address", addrs.Probes,
		"--jwks-server-bind-address", addrs.JWKS,
		// The gateway sample's sidecar follows its own namespace's checksum.
		"--secret-checksum-scopes=cluster,namespace",
	}
	return withKubeconfig(args, kubeconfig)
}

// NodeAgentArgs are the arguments of `trustplane node-agent` under make run: the agent of
// the pod-certificate sample's Node, writing credential bundles under dir and serving its
// metrics (trustplane_podcertificate_states) on metricsAddr. It serves no probes: make
// run watches the process itself. With a real node, the kubelet serves podCertificate
// projected volumes and the agent the pods that opt in by annotation; without one
// (noKubelet), the agent serves every pod of the node.
func NodeAgentArgs(kubeconfig, dir, metricsAddr string, noKubelet bool) []string {
	args := []string{"node-agent",
		"--node-name", SampleNodeName,
		"--dir", dir,
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", "0",
	}
	if noKubelet {
		args = append(args, "--serve-all-pods")
	}
	return withKubeconfig(args, kubeconfig)
}

// PodCertDir is where make run's node agent writes credential bundles, under its --dir.
func PodCertDir(dir string) string { return filepath.Join(dir, "podcerts") }

func withKubeconfig(args []string, kubeconfig string) []string {
	if kubeconfig == "" {
		return args
	}
	return append(args, "--kubeconfig", kubeconfig)
}
