package manager

import (
	"os"
	"strings"
)

// serviceAccountNamespaceFile is where a pod finds its own namespace.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OwnNamespace is the manager's namespace in a cluster, "default" elsewhere (make run,
// a developer's shell): the default home of what the manager publishes about itself.
func OwnNamespace() string {
	if ns, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
		return strings.TrimSpace(string(ns))
	}
	return "default"
}
