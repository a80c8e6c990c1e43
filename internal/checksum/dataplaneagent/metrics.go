package dataplaneagent

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	consistentGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_consistent",
		Help: "1 while the local objects agree with the control plane's checksum, 0 while they do not; by track (secrets, ingresses)."}, []string{"track"})
	mismatchIDs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_mismatch_ids",
		Help: "IDs that differ from the newest published checksum of the agent's scope, by track and side (local_only, published_only); 0 when that object published no IDs."}, []string{"track", "side"})
	scopeMismatch = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_scope_mismatch",
		Help: "1 while checksums are published but none matches and none covers the agent's own scope (namespaces, version annotation), by track."}, []string{"track"})
	undecodable = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "trustplane_dataplane_undecodable_checksums",
		Help: "Checksum objects the agent cannot decode and ignores, by track."}, []string{"track"})
	servedSecrets = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_served_secrets",
		Help: "Secrets in the verified set on disk."})
	snapshotCorrupt = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_snapshot_corrupt",
		Help: "1 when the on-disk snapshot failed its integrity check at start (it is not served)."})
	reloadFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "trustplane_dataplane_reload_failures_total",
		Help: "Runs of --reload-command that failed after a newly verified set was written (the previous set was put back)."})
	reloadFailing = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_reload_failing",
		Help: "1 while a newly verified set waits for --reload-command to succeed."})
	unversionedKept = prometheus.NewGauge(prometheus.GaugeOpts{Name: "trustplane_dataplane_unversioned_kept",
		Help: "Secrets that lost their version annotation whose last verified files are still served, until an operator confirms the removal."})
)

// ownMetrics are registered when the agent starts, in its process only.
var ownMetrics = []prometheus.Collector{consistentGauge, mismatchIDs, scopeMismatch, undecodable, servedSecrets, snapshotCorrupt, reloadFailures, reloadFailing, unversionedKept}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
