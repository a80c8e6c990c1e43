package nodeagent

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/trustplane/trustplane/internal/manager"
)

// states is the kubelet metric: projections by signer and state, computed at scrape time.
type states struct {
	agent *Agent
	desc  *prometheus.Desc
}

func registerStates(a *Agent) error {
	s := &states{agent: a, desc: prometheus.NewDesc("trustplane_podcertificate_states",
		"Pod certificate projections on this node by signer_name and state (not_yet_issued, fresh, overdue_for_refresh, expired, denied, failed).",
		[]string{"signer_name", "state"}, nil)}
	// A second agent in one process (tests) reports instead of the first.
	return manager.ReplaceMetrics(s)
}

func (s *states) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s *states) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &corev1.PodList{}
	if err := s.agent.reader.List(ctx, list); err != nil {
		return
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, s.agent.served(&list.Items[i]))
	}
	for k, n := range s.agent.manager.Report(pods) {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(n), k.SignerName, k.State)
	}
}
