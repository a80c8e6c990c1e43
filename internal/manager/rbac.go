package manager

// Permissions of the manager itself, independent of the controllers it runs: leader
// election, events, and authorizing /metrics scrapes when --metrics-secure is on.
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The ValidatingAdmissionPolicy trustplane-status-writers (config/policy/status-writers.yaml)
// lets only who holds this permission write the status of trustplane's kinds: no such
// resource exists, the policy asks the authorizer for it.
//
// +kubebuilder:rbac:groups=trustplane.io,resources=status,verbs=update

// The ValidatingAdmissionPolicy trustplane-finalizers (config/policy/finalizers.yaml) lets
// only who holds this permission remove a trustplane finalizer.
//
// +kubebuilder:rbac:groups=trustplane.io,resources=finalizers,verbs=update
