package conditions

// ManagedByLabel is Kubernetes' recommended label (app.kubernetes.io/managed-by) that
// trustplane sets to ManagedByValue on objects it creates for itself (published checksums,
// issued kubeconfigs): a controller only ever deletes objects carrying it, and `trustplane
// get` lists them.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "trustplane"
)
