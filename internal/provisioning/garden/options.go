package garden

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/trustplane/trustplane/internal/provisioning/shoot"
)

// Options are the garden flags, bound once for the manager (internal/cli) and shared by
// the cluster, kubeconfig and subscription controllers.
type Options struct {
	// Kubeconfig is the path of the garden's kubeconfig; empty: no garden (only
	// brought-along clusters work).
	Kubeconfig string
	// Shoot are the settings of every Shoot, including the project namespace.
	Shoot shoot.Params
	// AdminKubeconfigExpiration is the lifetime asked for admin kubeconfigs.
	AdminKubeconfigExpiration time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() *Options {
	return &Options{Shoot: shoot.DefaultParams(), AdminKubeconfigExpiration: 10 * time.Minute}
}

// AddFlags registers the garden flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "garden-kubeconfig", o.Kubeconfig, "Kubeconfig of the Gardener cluster; empty: only Clusters with kubeconfigSecretRef are served.")
	fs.StringVar(&o.Shoot.Namespace, "garden-namespace", o.Shoot.Namespace, "Gardener project namespace of the Shoots.")
	fs.StringToStringVar(&o.Shoot.CloudProfiles, "shoot-cloud-profiles", o.Shoot.CloudProfiles, "CloudProfile per provider; an existing Shoot keeps the one it was made with (Gardener refuses another).")
	fs.StringVar(&o.Shoot.KubernetesVersion, "shoot-kubernetes-version", o.Shoot.KubernetesVersion, "Kubernetes version of new Shoots; empty: Gardener's default.")
	fs.StringVar(&o.Shoot.Networking.Type, "shoot-networking-type", o.Shoot.Networking.Type, "Network plugin of the Shoots (spec.networking.type).")
	fs.StringVar(&o.Shoot.Networking.Nodes, "shoot-nodes-cidr", o.Shoot.Networking.Nodes, "Node CIDR of the Shoots (a /16 to /24; the VPC, VNet and zone subnets are cut from it); a Cluster may override it.")
	fs.StringVar(&o.Shoot.Networking.Pods, "shoot-pods-cidr", o.Shoot.Networking.Pods, "Pod CIDR of the Shoots; a Cluster may override it.")
	fs.StringVar(&o.Shoot.Networking.Services, "shoot-services-cidr", o.Shoot.Networking.Services, "Service CIDR of the Shoots; a Cluster may override it.")
	fs.StringVar(&o.Shoot.MachineImage.Name, "shoot-machine-image", o.Shoot.MachineImage.Name, "Machine image of the worker pools; empty: Gardener's default.")
	fs.StringVar(&o.Shoot.MachineImage.Version, "shoot-machine-image-version", o.Shoot.MachineImage.Version, "Machine image version; empty: the newest the CloudProfile offers.")
	fs.StringToStringVar(&o.Shoot.VolumeTypes, "shoot-volume-types", o.Shoot.VolumeTypes, "Worker root volume type per provider (required for aws, azure, gcp; none for openstack boots from the flavour's disk).")
	fs.StringVar(&o.Shoot.VolumeSize, "shoot-volume-size", o.Shoot.VolumeSize, "Worker root volume size (<n>Gi).")
	fs.StringVar(&o.Shoot.OpenStack.FloatingPoolName, "shoot-openstack-floating-pool-name", o.Shoot.OpenStack.FloatingPoolName, "Floating pool (external network) of OpenStack Shoots.")
	fs.StringVar(&o.Shoot.OpenStack.LoadBalancerProvider, "shoot-openstack-load-balancer-provider", o.Shoot.OpenStack.LoadBalancerProvider, "Load balancer provider of OpenStack Shoots.")
	fs.StringVar(&o.Shoot.Maintenance.Begin, "shoot-maintenance-begin", o.Shoot.Maintenance.Begin, "Begin of the Shoots' maintenance window (HHMMSS+ZZZZ); empty with --shoot-maintenance-end: Gardener picks one.")
	fs.StringVar(&o.Shoot.Maintenance.End, "shoot-maintenance-end", o.Shoot.Maintenance.End, "End of the Shoots' maintenance window (HHMMSS+ZZZZ), 30 minutes to 6 hours after the begin.")
	fs.StringVar(&o.Shoot.HAFailureTolerance, "shoot-ha-failure-tolerance", o.Shoot.HAFailureTolerance, "Control plane failure tolerance (zone or node) of Shoots with purpose production; empty: not highly available.")
	fs.DurationVar(&o.AdminKubeconfigExpiration, "garden-admin-kubeconfig-expiration", o.AdminKubeconfigExpiration, "Lifetime of the admin kubeconfigs requested for Shoots (kept in memory only).")
}

// Validate checks every garden flag, in one line naming the flag at fault. Without
// --garden-kubeconfig the Shoot settings are unused and not checked.
func (o *Options) Validate() error {
	if o.AdminKubeconfigExpiration <= 0 {
		return fmt.Errorf("--garden-admin-kubeconfig-expiration must be positive, not %v", o.AdminKubeconfigExpiration)
	}
	if o.Kubeconfig == "" {
		return nil
	}
	if err := o.Shoot.Validate(); err != nil {
		return fmt.Errorf("garden flags: %w", err)
	}
	return nil
}
