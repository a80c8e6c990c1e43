package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/testenv"
)

// TestStopBeforeCachesSync: a process whose caches can never sync (its ServiceAccount may
// read nothing) still stops on SIGTERM, at once and with exit code 0. controller-runtime
// v0.25 alone would spin for ever (kubernetes-sigs/controller-runtime#3440).
func TestStopBeforeCachesSync(t *testing.T) {
	create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "powerless"}})
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "powerless", Name: "nobody"}})
	kubeconfig := env.ServiceAccountKubeconfig(t, "powerless", "nobody")
	bin := testenv.Binary(t)
	for name, args := range map[string][]string{
		"manager":    {"manager", "--leader-elect=false", "--jwks-server-bind-address=0", "--metrics-bind-address=0"},
		"node-agent": {"node-agent", "--node-name=n1", "--dir=" + t.TempDir(), "--metrics-bind-address=0"},
		"dataplane":  {"dataplane", "--namespace=powerless", "--dir=" + t.TempDir(), "--metrics-bind-address=0"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			probes := testenv.FreeAddr(t)
			p := testenv.StartProcess(t, bin, append(args, "--kubeconfig="+kubeconfig, "--health-probe-bind-address="+probes)...)
			p.WaitHTTP200(t, urlOf(probes, "/healthz"), 30*time.Second)
			// Forbidden lists keep the caches from syncing: the probe server answers, the
			// controllers have not started (the data plane is ready from disk regardless).
			if _, ok := get(t, urlOf(probes, "/readyz")); ok && name != "dataplane" {
				t.Fatal("ready, although it may not read anything")
			}
			if exited, err := p.Exited(); exited {
				t.Fatalf("exited before the signal: %v", err)
			}
			// The default graceful shutdown timeout is 30s; the process must not need it.
			if took, err := p.Stop(30 * time.Second); err != nil {
				t.Fatalf("after SIGTERM: %v (took %v)", err, took)
			}
		})
	}
}
