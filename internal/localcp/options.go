package localcp

import (
	"fmt"
	"net/netip"
)

// Options change how the control plane serves.
type Options struct {
	// Node prepares the control plane for a real node (internal/localnode): the API
	// server binds the node's address (pods reach it there through the kubernetes
	// Service), authorizes kubelets with the Node authorizer and NodeRestriction,
	// reaches kubelets with a client certificate of KubeletClientCA, and admits
	// ServiceAccounts as a cluster does; kube-controller-manager runs the workload
	// controllers too.
	Node bool
	// BindAddress is the API server's address; loopback unless Node.
	BindAddress string
}

// Validate checks the options before anything starts: a bind address is an IP address
// (the API server's --bind-address and its serving certificate's IP SAN).
func (o Options) Validate() error {
	if o.BindAddress == "" {
		return nil
	}
	if _, err := netip.ParseAddr(o.BindAddress); err != nil {
		return fmt.Errorf("local control plane: bind address %q is not an IP address: %w", o.BindAddress, err)
	}
	return nil
}
