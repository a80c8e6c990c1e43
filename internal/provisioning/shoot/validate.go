package shoot

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// InvalidError lists every reason Gardener (or a provider extension) would refuse the
// Shoot of a Cluster. Only a change of the Cluster, or of the operator's settings, helps:
// the Cluster operator reports it as Stalled (InvalidSpec) without asking the garden.
type InvalidError struct {
	Problems []string
}

func (e *InvalidError) Error() string { return strings.Join(e.Problems, "; ") }

// Validate lists everything that keeps a Cluster from a Shoot Gardener accepts, with the
// operator's settings p: fields the Cluster is missing, a worker pool too small for its
// zones, CIDRs Gardener or the provider would refuse, OIDC kube-apiserver would refuse.
// It returns a *InvalidError, or nil.
func Validate(spec operatorv1alpha1.ClusterSpec, p Params) error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	infra := spec.Infrastructure
	switch {
	case infra.Provider == "":
		add("spec.infrastructure.provider is required")
	case providerTypes[infra.Provider] == "":
		add("spec.infrastructure.provider %q is not one of aws, azure, gcp, openstack", infra.Provider)
	case p.CloudProfiles[infra.Provider] == "":
		add("no cloud profile is configured for provider %q (--shoot-cloud-profiles)", infra.Provider)
	}
	if spec.Core.Region == "" {
		add("spec.core.region is required")
	}
	if infra.MachineType == "" {
		add("spec.infrastructure.machineType is required")
	}
	if infra.AutoScalerMax == 0 {
		add("spec.infrastructure.autoScalerMax is required")
	}
	if infra.AutoScalerMin > infra.AutoScalerMax && infra.AutoScalerMax > 0 {
		add("spec.infrastructure.autoScalerMin %d exceeds autoScalerMax %d", infra.AutoScalerMin, infra.AutoScalerMax)
	}
	zones := numberOfZones(infra)
	// Gardener (pkg/api/core/validation/shoot.go, validateWorkers): one node per zone at
	// least, or system components cannot spread over the zones.
	if infra.AutoScalerMax > 0 && int(infra.AutoScalerMax) < zones {
		add("spec.infrastructure.autoScalerMax %d is less than numberOfZones %d: Gardener needs a node per zone", infra.AutoScalerMax, zones)
	}
	if providerTypes[infra.Provider] != "" && spec.Core.Region != "" {
		if _, err := Zones(infra.Provider, spec.Core.Region, zones); err != nil {
			add("spec.infrastructure.%v", err)
		} else if _, err := zonesOf(spec); err != nil {
			add("spec.infrastructure.%v", err)
		}
	}
	problems = append(problems, workerProblems(spec)...)
	problems = append(problems, featureProblems(spec, p)...)
	if providerTypes[infra.Provider] != "" {
		problems = append(problems, networkProblems(infra, p)...)
		if infra.Provider == "openstack" && (p.OpenStack.FloatingPoolName == "" || p.OpenStack.LoadBalancerProvider == "") {
			add("OpenStack shoots need a floating pool and a load balancer provider (--shoot-openstack-floating-pool-name, --shoot-openstack-load-balancer-provider)")
		}
		if infra.Provider != "openstack" && p.VolumeTypes[infra.Provider] == "" {
			add("%s shoots need a worker volume type (--shoot-volume-types)", infra.Provider)
		}
	}
	if spec.OIDCConfig != nil {
		problems = append(problems, oidcProblems(spec.OIDCConfig)...)
	}
	if _, err := extensions(spec); err != nil {
		add("%v", err)
	}
	if len(problems) > 0 {
		return &InvalidError{Problems: problems}
	}
	return nil
}

// networkProblems checks the shoot's CIDRs as Gardener and the provider extensions do:
// each a canonical IPv4 CIDR, nodes big enough for the zone subnets, and pods and services
// clear of the nodes (every provider's InfrastructureConfig validation refuses overlaps
// with the VPC, VNet or zone subnets, which are made of the node CIDR).
func networkProblems(infra operatorv1alpha1.ClusterInfrastructure, p Params) []string {
	nw := networkingOf(infra, p)
	var problems []string
	parsed := map[string]netip.Prefix{}
	for _, f := range []struct{ name, value string }{{"nodes", nw.Nodes}, {"pods", nw.Pods}, {"services", nw.Services}} {
		prefix, err := parseCIDR(f.value)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("networking %s %q: %v", f.name, f.value, err))
		case !prefix.Addr().Is4():
			problems = append(problems, fmt.Sprintf("networking %s %s: only IPv4 shoots are provisioned", f.name, f.value))
		default:
			parsed[f.name] = prefix
		}
	}
	if nodes, ok := parsed["nodes"]; ok && (nodes.Bits() < minNodesPrefix || nodes.Bits() > maxNodesPrefix) {
		problems = append(problems, fmt.Sprintf("networking nodes %s: the prefix length must be between %d and %d to hold the zone subnets", nodes, minNodesPrefix, maxNodesPrefix))
	}
	pairs := [][2]string{{"nodes", "pods"}, {"nodes", "services"}, {"pods", "services"}}
	for _, pair := range pairs {
		a, okA := parsed[pair[0]]
		b, okB := parsed[pair[1]]
		if okA && okB && overlap(a, b) {
			problems = append(problems, fmt.Sprintf("networking %s %s overlaps %s %s", pair[0], a, pair[1], b))
		}
	}
	return problems
}

var (
	// volumeSize is Gardener's volumeSizeRegex (pkg/api/core/validation/shoot.go).
	volumeSize = regexp.MustCompile(`^(\d)+Gi$`)
	// workerName is a DNS label, as Gardener's ValidateWorker checks a pool's name.
	workerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// timeOfDay is Gardener's maintenance time format, HHMMSS+ZZZZ.
	timeOfDay = regexp.MustCompile(`^([01]\d|2[0-3])[0-5]\d[0-5]\d[+-]\d{4}$`)
)

// Validate checks the operator's settings once, when the manager starts: a bad flag is
// an error at startup, not a Stalled condition on every Cluster.
func (p Params) Validate() error {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if p.Namespace == "" {
		add("--garden-namespace is required")
	} else if n := p.NameLength(); n < minNameLength {
		add("--garden-namespace %s: Gardener refuses a Shoot whose name and project name (%s) are longer than %d characters together, which leaves %d for Shoot names: at least %d are needed",
			p.Namespace, p.Project(), gardenNameLimit, max(n, 0), minNameLength)
	}
	for provider := range p.CloudProfiles {
		if providerTypes[provider] == "" {
			add("--shoot-cloud-profiles: %q is not one of aws, azure, gcp, openstack", provider)
		}
	}
	for provider := range p.VolumeTypes {
		if providerTypes[provider] == "" {
			add("--shoot-volume-types: %q is not one of aws, azure, gcp, openstack", provider)
		}
	}
	if !volumeSize.MatchString(p.VolumeSize) {
		add("--shoot-volume-size %q must match %s", p.VolumeSize, volumeSize)
	}
	if p.MachineImage.Name == "" && p.MachineImage.Version != "" {
		add("--shoot-machine-image-version needs --shoot-machine-image")
	}
	if p.Networking.Type == "" {
		add("--shoot-networking-type is required")
	}
	for _, problem := range networkProblems(operatorv1alpha1.ClusterInfrastructure{}, p) {
		add("--shoot-*-cidr: %s", problem)
	}
	if (p.Maintenance.Begin == "") != (p.Maintenance.End == "") {
		add("--shoot-maintenance-begin and --shoot-maintenance-end go together")
	} else if p.Maintenance.Begin != "" {
		if err := validWindow(p.Maintenance.Begin, p.Maintenance.End); err != nil {
			add("--shoot-maintenance-begin/end: %v", err)
		}
	}
	if p.KubernetesVersion != "" {
		if problem := versionProblem("--shoot-kubernetes-version", p.KubernetesVersion, p.Landscape); problem != "" {
			add("%s", problem)
		}
	}
	if p.HAFailureTolerance != "" && p.HAFailureTolerance != "zone" && p.HAFailureTolerance != "node" {
		add("--shoot-ha-failure-tolerance %q is not zone, node or empty", p.HAFailureTolerance)
	}
	if err := p.Landscape.Validate(); err != nil {
		add("landscape: %v", err)
	}
	if len(problems) > 0 {
		return &InvalidError{Problems: problems}
	}
	return nil
}

// validWindow checks a maintenance window as Gardener does: times of day, at least 30
// minutes and at most 6 hours long (it may span midnight).
func validWindow(begin, end string) error {
	if !timeOfDay.MatchString(begin) || !timeOfDay.MatchString(end) {
		return fmt.Errorf("%q to %q: times must be HHMMSS+ZZZZ", begin, end)
	}
	length := (secondsUTC(end) - secondsUTC(begin) + 86400) % 86400
	if length < 30*60 || length > 6*3600 {
		return fmt.Errorf("%q to %q: the window must be 30 minutes to 6 hours long", begin, end)
	}
	return nil
}

func secondsUTC(t string) int {
	num := func(s string) int {
		n := 0
		for _, r := range s {
			n = n*10 + int(r-'0')
		}
		return n
	}
	offset := num(t[7:9])*3600 + num(t[9:11])*60
	if t[6] == '-' {
		offset = -offset
	}
	return ((num(t[0:2])*3600+num(t[2:4])*60+num(t[4:6])-offset)%86400 + 86400) % 86400
}

// CheckUpdate lists what Gardener refuses to change on an existing Shoot (live) that
// desired would change: region, provider type and networking are immutable, and a worker
// pool's zones can only be appended to (gardener pkg/api/core/validation/shoot.go
// ValidateShootSpecUpdate, the providers' ValidateWorkersUpdate). It returns a
// *InvalidError, or nil.
func CheckUpdate(live, desired *unstructured.Unstructured) error {
	if live == nil || live.Object["spec"] == nil {
		return nil
	}
	var problems []string
	for _, path := range [][]string{{"region"}, {"provider", "type"}, {"networking", "type"}, {"networking", "nodes"}, {"networking", "pods"}, {"networking", "services"}} {
		was, wasSet, _ := unstructured.NestedString(live.Object, append([]string{"spec"}, path...)...)
		now, _, _ := unstructured.NestedString(desired.Object, append([]string{"spec"}, path...)...)
		if wasSet && was != now {
			problems = append(problems, fmt.Sprintf("shoot %s: spec.%s cannot change from %q to %q (Gardener forbids it)", live.GetName(), strings.Join(path, "."), was, now))
		}
	}
	wasZones, nowZones := workerZones(live), workerZones(desired)
	for pool, was := range wasZones {
		now, ok := nowZones[pool]
		if ok && (len(now) < len(was) || !slices.Equal(now[:len(was)], was)) {
			problems = append(problems, fmt.Sprintf("shoot %s: worker pool %s has zones %v; zones can be added but not removed or reordered (numberOfZones cannot shrink)", live.GetName(), pool, was))
		}
	}
	if len(problems) > 0 {
		return &InvalidError{Problems: problems}
	}
	return nil
}

func workerZones(s *unstructured.Unstructured) map[string][]string {
	workers, _, _ := unstructured.NestedSlice(s.Object, "spec", "provider", "workers")
	out := map[string][]string{}
	for _, w := range workers {
		m, _ := w.(map[string]any)
		name, _ := m["name"].(string)
		zones, _, _ := unstructured.NestedStringSlice(m, "zones")
		out[name] = zones
	}
	return out
}
