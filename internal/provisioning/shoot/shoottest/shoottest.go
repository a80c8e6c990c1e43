// Package shoottest holds Cluster fixtures that the shoot package's golden tests and the
// test garden's tests (test/provisioning/cluster) share, so that the Shoot a golden file
// shows is the Shoot the test garden accepts.
package shoottest

import (
	"k8s.io/utils/ptr"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// AddSecondYear gives c (on provider aws, azure, gcp or openstack, in a region whose second
// zone is named as below) every field of a landscape's second year its provider takes:
// a GPU pool in the second zone with a volume, labels and taints, a memory pool in the
// main pool's zones, two registry caches (one with garbage collection off), Kubernetes
// 1.35, a token lifetime above the default bounds (clamped to them), and where the
// provider has them an API server ACL (aws, azure) and IPv6 (aws, gcp).
func AddSecondYear(c *operatorv1alpha1.Cluster) {
	s := &c.Spec
	provider := s.Infrastructure.Provider
	zone := map[string]string{"aws": s.Core.Region + "b", "azure": "2", "gcp": s.Core.Region + "-b", "openstack": s.Core.Region + "b"}[provider]
	s.KubernetesVersion = "1.35"
	s.Infrastructure.AdditionalWorkers = []operatorv1alpha1.WorkerPool{
		{Name: "gpu", MachineType: s.Infrastructure.MachineType, AutoScalerMin: 0, AutoScalerMax: 3, Zones: []string{zone},
			Volume: &operatorv1alpha1.WorkerVolume{Size: "200Gi"},
			Labels: map[string]operatorv1alpha1.LabelValue{"node.example.com/role": "gpu"},
			Taints: []operatorv1alpha1.WorkerTaint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}}},
		{Name: "highmem", MachineType: s.Infrastructure.MachineType, AutoScalerMin: 3, AutoScalerMax: 6},
	}
	s.RegistryCache = []operatorv1alpha1.RegistryCache{
		{Upstream: "docker.io", VolumeSize: "10Gi", GarbageCollection: operatorv1alpha1.RegistryCacheGarbageCollection{TTL: "168h"}},
		{Upstream: "registry.example.com:5000", VolumeSize: "50Gi", GarbageCollection: operatorv1alpha1.RegistryCacheGarbageCollection{TTL: "0s"}},
	}
	s.KubeAPIServer = &operatorv1alpha1.KubeAPIServer{ServiceAccountConfig: &operatorv1alpha1.ServiceAccountConfig{MaxTokenExpiration: ptr.To(operatorv1alpha1.Duration("4320h"))}}
	if provider == "aws" || provider == "azure" {
		s.KubeAPIServer.ACL = &operatorv1alpha1.APIServerACL{AllowedCIDRs: []operatorv1alpha1.CIDR{"203.0.113.0/24", "2001:db8::/32"}}
	}
	if provider == "aws" || provider == "gcp" {
		if s.Infrastructure.Networking == nil {
			s.Infrastructure.Networking = &operatorv1alpha1.ClusterNetworking{}
		}
		s.Infrastructure.Networking.DualStack = true
	}
}
