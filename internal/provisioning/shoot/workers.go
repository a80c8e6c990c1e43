package shoot

import (
	"fmt"
	"slices"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// regionZones is how many zones of a region trustplane provisions in (Zones names them).
const regionZones = 3

// poolZones are the zones of each worker pool, the main one (WorkerPool) first, and all
// of them in the order of the region's zones: what the InfrastructureConfig needs subnets
// for (infrastructure-manager's provider extender takes the union of every worker's
// zones the same way).
type poolZones struct {
	byPool map[string][]string
	all    []string
	region []string // the region's zones (Zones(provider, region, regionZones))
}

// zonesOf are the zones of the Cluster's pools; an error names a zone of an additional
// pool that is not one of the region's.
func zonesOf(spec operatorv1alpha1.ClusterSpec) (poolZones, error) {
	infra := spec.Infrastructure
	region, err := Zones(infra.Provider, spec.Core.Region, regionZones)
	if err != nil {
		return poolZones{}, err
	}
	main, err := Zones(infra.Provider, spec.Core.Region, numberOfZones(infra))
	if err != nil {
		return poolZones{}, err
	}
	z := poolZones{byPool: map[string][]string{WorkerPool: main}, region: region}
	used := map[string]bool{}
	for _, zone := range main {
		used[zone] = true
	}
	for i, w := range infra.AdditionalWorkers {
		zones := w.Zones
		if len(zones) == 0 {
			zones = main
		}
		for _, zone := range zones {
			if !slices.Contains(region, zone) {
				return poolZones{}, fmt.Errorf("additionalWorkers[%d].zones: %q is not one of the zones of %s: %v", i, zone, spec.Core.Region, region)
			}
			used[zone] = true
		}
		z.byPool[w.Name] = zones
	}
	for _, zone := range region {
		if used[zone] {
			z.all = append(z.all, zone)
		}
	}
	return z, nil
}

// index is a zone's place among the region's zones: which block of the node CIDR its
// subnets are cut from, the same whichever pools use it.
func (z poolZones) index(zone string) int { return slices.Index(z.region, zone) }

// workersOf are the Shoot's worker pools: the main one from spec.infrastructure, then
// each of additionalWorkers, as infrastructure-manager's provider extender renders
// them: the same machine image, one new machine per zone at a time and none taken away
// before its replacement runs (as kyma-environment-broker rolls its pools), the AWS
// worker configuration on every pool, and containerd named where the registry cache
// extension demands it (gardener-extension-registry-cache
// pkg/admission/validator/cache/shoot.go: every worker's CRI must be containerd).
func workersOf(spec operatorv1alpha1.ClusterSpec, zones poolZones, p Params) []any {
	infra := spec.Infrastructure
	pools := []operatorv1alpha1.WorkerPool{{Name: WorkerPool, MachineType: infra.MachineType,
		AutoScalerMin: infra.AutoScalerMin, AutoScalerMax: infra.AutoScalerMax}}
	pools = append(pools, infra.AdditionalWorkers...)
	out := make([]any, 0, len(pools))
	for _, pool := range pools {
		poolZones := zones.byPool[pool.Name]
		machine := map[string]any{"type": pool.MachineType}
		if image := imageOf(p); image != nil {
			machine["image"] = image
		}
		worker := map[string]any{
			"name":           pool.Name,
			"machine":        machine,
			"minimum":        int64(pool.AutoScalerMin),
			"maximum":        int64(pool.AutoScalerMax),
			"maxSurge":       int64(len(poolZones)),
			"maxUnavailable": int64(0),
			"zones":          toAny(poolZones),
		}
		if volume := poolVolume(infra.Provider, pool.Volume, p); volume != nil {
			worker["volume"] = volume
		}
		if config := awsWorkerConfig(infra.Provider, p); config != nil {
			worker["providerConfig"] = config
		}
		if len(pool.Labels) > 0 {
			labels := make(map[string]any, len(pool.Labels))
			for k, v := range pool.Labels {
				labels[k] = string(v)
			}
			worker["labels"] = labels
		}
		if len(pool.Taints) > 0 {
			taints := make([]any, len(pool.Taints))
			for i, t := range pool.Taints {
				taint := map[string]any{"key": t.Key, "effect": t.Effect}
				if t.Value != "" {
					taint["value"] = string(t.Value)
				}
				taints[i] = taint
			}
			worker["taints"] = taints
		}
		if len(spec.RegistryCache) > 0 {
			worker["cri"] = map[string]any{"name": "containerd"}
		}
		out = append(out, worker)
	}
	return out
}

// poolVolume is a pool's root volume: its own size (and type, or the operator's type for
// the provider), or the operator's volume when it names none (volumeOf).
func poolVolume(provider string, v *operatorv1alpha1.WorkerVolume, p Params) map[string]any {
	if v == nil {
		return volumeOf(provider, p)
	}
	volume := map[string]any{"size": v.Size}
	if t := v.Type; t != "" {
		volume["type"] = t
	} else if t := p.VolumeTypes[provider]; t != "" {
		volume["type"] = t
	}
	return volume
}

// workerProblems are what Gardener refuses in the additional pools that admission could
// not see (a Cluster stored before its rules existed, zones of the region): the name
// rules of gardener pkg/api/core/validation/shoot.go ValidateWorker and
// validateWorkerGroupAndSuffix, a node per zone.
func workerProblems(spec operatorv1alpha1.ClusterSpec) []string {
	var problems []string
	seen := map[string]bool{WorkerPool: true}
	for i, w := range spec.Infrastructure.AdditionalWorkers {
		path := fmt.Sprintf("spec.infrastructure.additionalWorkers[%d]", i)
		switch {
		case !workerName.MatchString(w.Name) || len(w.Name) > maxWorkerNameLength:
			problems = append(problems, fmt.Sprintf("%s.name %q: a DNS label of at most %d characters", path, w.Name, maxWorkerNameLength))
		case seen[w.Name]:
			problems = append(problems, fmt.Sprintf("%s.name %q: two worker pools of one name (cpu-worker-0 is the main pool's)", path, w.Name))
		}
		seen[w.Name] = true
		if w.MachineType == "" {
			problems = append(problems, path+".machineType is required")
		}
		if w.AutoScalerMin > w.AutoScalerMax {
			problems = append(problems, fmt.Sprintf("%s.autoScalerMin %d exceeds autoScalerMax %d", path, w.AutoScalerMin, w.AutoScalerMax))
		}
		if zones := len(w.Zones); zones > 0 && int(w.AutoScalerMax) < zones {
			problems = append(problems, fmt.Sprintf("%s.autoScalerMax %d is less than its %d zones: Gardener needs a node per zone", path, w.AutoScalerMax, zones))
		}
		if v := w.Volume; v != nil && !volumeSize.MatchString(v.Size) {
			problems = append(problems, fmt.Sprintf("%s.volume.size %q must match %s", path, v.Size, volumeSize))
		}
	}
	return problems
}

// maxWorkerNameLength is Gardener's limit for a worker pool's name
// (pkg/api/core/validation/shoot.go maxWorkerNameLength).
const maxWorkerNameLength = 15
