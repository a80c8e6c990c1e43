package subscription

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// TestPoolInventoryMetrics: a scrape counts the pool as kyma-environment-broker counts its
// bindings: free, claimed by account, dirty and shared credentials by hyperscalerType,
// and each credential's users; it follows claims as they happen.
func TestPoolInventoryMetrics(t *testing.T) {
	ns := namespace(t)
	start(t, ns)
	credential(t, ns, "aws-shared", map[string]string{"hyperscalerType": "aws", "shared": "true"})
	credential(t, ns, "aws-a", map[string]string{"hyperscalerType": "aws"})
	credential(t, ns, "aws-b", map[string]string{"hyperscalerType": "aws"})
	credential(t, ns, "aws-dirty", map[string]string{"hyperscalerType": "aws", "dirty": "true", "tenantName": "old"})
	credential(t, ns, "gcp-a", map[string]string{"hyperscalerType": "gcp"})
	request(t, ns, "trial-1", "aws", "shared")
	request(t, ns, "trial-2", "aws", "shared")
	request(t, ns, "acct1", "aws", "globalaccount:acct1")
	for _, name := range []string{"trial-1", "trial-2", "acct1"} {
		waitReason(t, ns, name, cp.ReasonAssigned)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(poolInventory); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`trustplane_pool_available_credentials{aws}`:           1,
		`trustplane_pool_available_credentials{gcp}`:           1,
		`trustplane_pool_claimed_credentials{aws,acct1}`:       1,
		`trustplane_pool_claimed_credentials{aws,old}`:         1,
		`trustplane_pool_dirty_credentials{aws}`:               1,
		`trustplane_pool_shared_credentials{aws}`:              1,
		`trustplane_pool_instances_per_credential{aws-shared}`: 2,
		`trustplane_pool_on_hold{}`:                            0,
	}
	claimed := secretsClaimedBy(t, ns, "acct1")
	want["trustplane_pool_instances_per_credential{"+claimed+"}"] = 1
	// The claim reaches the pool's cache a moment after the request's status.
	var got map[string]float64
	for range 50 {
		if got = gather(t, reg); fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("scraped %v\nwant    %v", got, want)
}

// gather is every series reg has, as name{label values} → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var values []string
			for _, l := range m.GetLabel() {
				values = append(values, l.GetValue())
			}
			out[f.GetName()+"{"+strings.Join(values, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// secretsClaimedBy is the pool Secret of ns claimed for account.
func secretsClaimedBy(t *testing.T, ns, account string) string {
	t.Helper()
	sr := waitReason(t, ns, account, cp.ReasonAssigned)
	return sr.Status.GardenerSecretName
}
