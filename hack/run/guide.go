package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trustplane/trustplane/internal/localcp"
)

// guide is what make run tells the developer once the manager is ready: commands to paste
// into a shell, in blocks, with "#" comments between them. test/samples runs every one.
type guide struct {
	addrs localcp.Addresses
	dir   string
	// binDir holds the kubectl make run built: a newcomer may have none on the PATH.
	binDir string
	// local says make run started the cluster (rather than using $KUBECONFIG's).
	local bool
}

// announceWhenReady prints the guide once the manager's readiness probe passes.
func announceWhenReady(ctx context.Context, g guide) {
	url := "http://" + g.addrs.Probes + "/readyz"
	for !answers200(ctx, url) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
	fmt.Print(g.String())
}

func answers200(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (g guide) String() string {
	var b strings.Builder
	b.WriteString("\ntrustplane is ready. In another terminal:\n\n")
	fmt.Fprintf(&b, "  export PATH=%s:$PATH\n", g.binDir)
	if g.local {
		fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", localcp.KubeconfigPath(g.dir))
	}
	b.WriteString("  kubectl apply -f config/samples/\n\n")
	b.WriteString("then see what each system made of its sample (each file's comment says more):\n\n")
	writeBlock(&b, g.lookAt())
	b.WriteString("\nand to take the samples away again (kubectl waits until everything is gone):\n\n")
	writeBlock(&b, []string{"kubectl delete -f config/samples/"})
	fmt.Fprintf(&b, "\nMetrics: http://%s/metrics (node agent: http://%s/metrics)   Health: http://%s/readyz\n",
		g.addrs.Metrics, g.addrs.NodeAgentMetrics, g.addrs.Probes)
	if g.local {
		fmt.Fprintf(&b, "Press Ctrl-C to stop; the cluster's data stays in %s for the next 'make run'.\n\n", g.dir)
	} else {
		b.WriteString("Press Ctrl-C to stop.\n\n")
	}
	return b.String()
}

// lookAt is, for each system, a comment naming it and the commands that show its sample.
func (g guide) lookAt() []string {
	return []string{
		"# The node and every sample's pods (with make run's real node they run; a stand-in leaves them Pending)",
		"kubectl get nodes,pods -A -o wide",
		"# JWKS",
		"kubectl -n default get jwksconfig issuer -o wide",
		"curl -s http://" + g.addrs.JWKS + "/default/issuer/jwks.json",
		"# ClusterRole and Role aggregation",
		"kubectl get clusterrole sample-monitoring -o yaml",
		"kubectl -n team-a get role dev -o yaml",
		"# Secret checksum: published in the manager's namespace",
		"kubectl -n default get secretchecksums -o yaml",
		"# Pod certificates",
		"kubectl -n apps get podcertificaterequests",
		"ls " + localcp.PodCertDir(g.dir) + "/apps/web/*/",
		"# Brought-along cluster and kubeconfigs, one requested from another namespace" + g.clusterSecretNote(),
		"kubectl get clusters,kubeconfigrequests -A",
		"# Subscription pool",
		"kubectl -n kcp-system get subscriptionrequests",
	}
}

// writeBlock writes lines indented, as a block to paste.
func writeBlock(b *strings.Builder, lines []string) {
	for _, line := range lines {
		fmt.Fprintf(b, "  %s\n", line)
	}
}

// clusterSecretNote reminds that the Cluster sample's Secret is only made locally.
func (g guide) clusterSecretNote() string {
	if g.local {
		return ""
	}
	return fmt.Sprintf(" (create Secret %s/%s first, see config/samples/operator_v1alpha1_cluster.yaml)",
		localcp.SampleClusterNamespace, localcp.SampleClusterSecret)
}
