package shoot

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
)

// The provider extensions decode spec.provider.infrastructureConfig and
// controlPlaneConfig strictly by apiVersion and kind: each has its own API group.
const (
	kindInfrastructureConfig = "InfrastructureConfig"
	kindControlPlaneConfig   = "ControlPlaneConfig"
)

// ProviderAPIVersion is the API version of a provider extension's configuration objects.
func ProviderAPIVersion(provider string) string {
	return provider + ".provider.extensions.gardener.cloud/v1alpha1"
}

// The node CIDR is cut into zone subnets as infrastructure-manager cuts it: AWS and Azure
// need a subnet per zone inside it, and the sizes below keep room for a /28 per subnet.
const (
	minNodesPrefix = 16
	maxNodesPrefix = 24
	// zoneBits split the node CIDR into 8 blocks, one per zone (3 used; up to 8 possible).
	zoneBits = 3
)

// providerConfigs are spec.provider.infrastructureConfig and controlPlaneConfig (nil when
// the provider has none) for a shoot whose nodes live in nodesCIDR, its pools spread over
// zones.
func providerConfigs(provider, nodesCIDR string, zones poolZones, p Params) (infra, controlPlane map[string]any, err error) {
	nodes, err := parseCIDR(nodesCIDR)
	if err != nil {
		return nil, nil, fmt.Errorf("networking nodes %q: %w", nodesCIDR, err)
	}
	object := func(kind string) map[string]any {
		return map[string]any{"apiVersion": ProviderAPIVersion(provider), "kind": kind}
	}
	infra = object(kindInfrastructureConfig)
	switch provider {
	case "aws":
		// A VPC of the node CIDR and, per zone, a workers subnet and the public and
		// internal subnets of the zone's load balancers, all inside it.
		subnets, err := awsZoneSubnets(nodes, zones)
		if err != nil {
			return nil, nil, err
		}
		infra["networks"] = map[string]any{"vpc": map[string]any{"cidr": nodes.String()}, "zones": subnets}
		controlPlane = object(kindControlPlaneConfig)
	case "azure":
		// A VNet of the node CIDR, one subnet (with its NAT gateway) per zone: the
		// multi-subnet layout, which excludes networks.workers.
		subnets, err := azureZoneSubnets(nodes, zones)
		if err != nil {
			return nil, nil, err
		}
		infra["networks"] = map[string]any{"vnet": map[string]any{"cidr": nodes.String()}, "zones": subnets}
		infra["zoned"] = true
		controlPlane = object(kindControlPlaneConfig)
	case "gcp":
		infra["networks"] = map[string]any{"workers": nodes.String()}
		// The zone of the control plane's regional resources; it must be a worker zone.
		controlPlane = object(kindControlPlaneConfig)
		controlPlane["zone"] = zones.byPool[WorkerPool][0]
	case "openstack":
		infra["floatingPoolName"] = p.OpenStack.FloatingPoolName
		infra["networks"] = map[string]any{"workers": nodes.String()}
		controlPlane = object(kindControlPlaneConfig)
		controlPlane["loadBalancerProvider"] = p.OpenStack.LoadBalancerProvider
	default:
		return nil, nil, fmt.Errorf("provider %q is not one of aws, azure, gcp, openstack", provider)
	}
	return infra, controlPlane, nil
}

// awsZoneSubnets gives the region's zone i the i-th of the node CIDR's 4 blocks of
// prefix+2: workers its first half (prefix+3), public and internal a quarter each
// (prefix+4). For 10.250.0.0/16 the first zone gets workers 10.250.0.0/19, public
// 10.250.32.0/20 and internal 10.250.48.0/20, the second starts at 10.250.64.0 —
// infrastructure-manager's layout, so a shoot moved between the two keeps its subnets. A
// zone's block follows from its place in the region, not among the zones used, so that
// a pool's new zone never moves another zone's subnets.
func awsZoneSubnets(nodes netip.Prefix, zones poolZones) ([]any, error) {
	if err := checkZoneRoom(nodes, zones, 4); err != nil {
		return nil, err
	}
	bits := nodes.Bits()
	out := make([]any, len(zones.all))
	for i, zone := range zones.all {
		block := subnet(nodes, bits+2, zones.index(zone))
		out[i] = map[string]any{
			"name":     zone,
			"workers":  subnet(block, bits+3, 0).String(),
			"public":   subnet(block, bits+4, 2).String(),
			"internal": subnet(block, bits+4, 3).String(),
		}
	}
	return out, nil
}

// azureZoneSubnets gives the region's zone i the i-th block of prefix+3 of the node
// CIDR, with a NAT gateway as infrastructure-manager enables it for every new zoned Azure
// shoot.
func azureZoneSubnets(nodes netip.Prefix, zones poolZones) ([]any, error) {
	if err := checkZoneRoom(nodes, zones, 8); err != nil {
		return nil, err
	}
	out := make([]any, len(zones.all))
	for i, zone := range zones.all {
		n, err := strconv.Atoi(zone)
		if err != nil {
			return nil, fmt.Errorf("azure zone %q is not a number", zone)
		}
		out[i] = map[string]any{
			"name": int64(n),
			"cidr": subnet(nodes, nodes.Bits()+zoneBits, zones.index(zone)).String(),
			"natGateway": map[string]any{"enabled": true,
				// Azure's default idle timeout; Gardener allows 4 to 120 minutes.
				"idleConnectionTimeoutMinutes": int64(4)},
		}
	}
	return out, nil
}

// checkZoneRoom: the node CIDR must be IPv4, between /16 and /24, and hold blocks for
// every zone of the region.
func checkZoneRoom(nodes netip.Prefix, zones poolZones, blocks int) error {
	if !nodes.Addr().Is4() {
		return fmt.Errorf("networking nodes %s: zone subnets are derived from an IPv4 CIDR only", nodes)
	}
	if nodes.Bits() < minNodesPrefix || nodes.Bits() > maxNodesPrefix {
		return fmt.Errorf("networking nodes %s: the prefix length must be between %d and %d to hold the zone subnets", nodes, minNodesPrefix, maxNodesPrefix)
	}
	if len(zones.region) > blocks {
		return fmt.Errorf("networking nodes %s holds subnets for %d zones, not %d", nodes, blocks, len(zones.region))
	}
	return nil
}

// subnet is the index-th block of length bits inside outer.
func subnet(outer netip.Prefix, bits, index int) netip.Prefix {
	a := outer.Masked().Addr().As4()
	base := binary.BigEndian.Uint32(a[:])
	step := uint32(1) << (32 - bits)
	for range index { // at most 7 steps: no conversion, no overflow
		base += step
	}
	binary.BigEndian.PutUint32(a[:], base)
	return netip.PrefixFrom(netip.AddrFrom4(a), bits)
}

// parseCIDR accepts what Gardener accepts: a parseable CIDR in canonical form (no host
// bits set), as cidrvalidation.ValidateCIDRIsCanonical demands.
func parseCIDR(s string) (netip.Prefix, error) {
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR")
	}
	if prefix.Masked() != prefix {
		return netip.Prefix{}, fmt.Errorf("not canonical: host bits are set (%s is)", prefix.Masked())
	}
	return prefix, nil
}

// overlap says whether two prefixes share an address: then one contains the other's
// first address.
func overlap(a, b netip.Prefix) bool { return a.Contains(b.Addr()) || b.Contains(a.Addr()) }
