package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MetricValue is the value of the gauge or counter series of the family name whose labels
// are exactly labels, as controller-runtime's registry (what /metrics serves) holds it
// now, and whether there is one.
func MetricValue(tb testing.TB, name string, labels map[string]string) (float64, bool) {
	tb.Helper()
	return GatheredValue(tb, metrics.Registry, name, labels)
}

// GatheredValue is MetricValue for any gatherer.
func GatheredValue(tb testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	tb.Helper()
	families, err := g.Gather()
	if err != nil {
		tb.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}
