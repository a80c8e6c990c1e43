package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/trustplane/trustplane/internal/localcp"
)

// guide is what make run tells the developer once the manager is ready.
type guide struct {
	addrs localcp.Addresses
	dir   string
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
	if g.local {
		fmt.Fprintf(&b, "  export KUBECONFIG=%s\n", localcp.KubeconfigPath(g.dir))
	}
	b.WriteString("  kubectl apply -f config/samples/\n\n")
	b.WriteString("then see what each system made of its sample (each file's comment says more):\n")
	for _, line := range [][2]string{
		{"JWKS", "kubectl -n default get jwksconfig issuer -o wide; curl -s http://" + g.addrs.JWKS + "/default/issuer/jwks.json"},
		{"aggregation", "kubectl get clusterrole sample-monitoring -o yaml; kubectl -n team-a get role dev -o yaml"},
		{"secret checksum", "kubectl -n edge get secretchecksums -o yaml"},
		{"pod certificates", "kubectl -n apps get podcertificaterequests; ls " + localcp.PodCertDir(g.dir) + "/apps/web/*/"},
		{"kubeconfigs", "kubectl -n default get clusters,kubeconfigrequests" + g.clusterSecretNote()},
		{"subscriptions", "kubectl -n kcp-system get subscriptionrequests"},
	} {
		fmt.Fprintf(&b, "  %-17s %s\n", line[0], line[1])
	}
	fmt.Fprintf(&b, "\nMetrics: http://%s/metrics   Health: http://%s/readyz\n", g.addrs.Metrics, g.addrs.Probes)
	if g.local {
		fmt.Fprintf(&b, "Press Ctrl-C to stop; the cluster's data stays in %s for the next 'make run'.\n\n", g.dir)
	} else {
		b.WriteString("Press Ctrl-C to stop.\n\n")
	}
	return b.String()
}

// clusterSecretNote reminds that the Cluster sample's Secret is only made locally.
func (g guide) clusterSecretNote() string {
	if g.local {
		return ""
	}
	return fmt.Sprintf(" (create Secret %s/%s first, see config/samples/operator_v1alpha1_cluster.yaml)",
		localcp.SampleClusterNamespace, localcp.SampleClusterSecret)
}
