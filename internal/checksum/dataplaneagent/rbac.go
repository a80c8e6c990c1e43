package dataplaneagent

// Permissions of `trustplane dataplane` in each namespace it follows (Role
// trustplane-dataplane, generated into config/components/dataplane-sidecar by `make
// manifests`; the namespace in the markers is a placeholder the Makefile drops, so the Role
// lands in the gateway's namespace). An agent following every namespace needs the same
// rules as a ClusterRole (docs/checksum.md).
//
// +kubebuilder:rbac:groups="",namespace=gateway,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=gateway,resources=ingresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=tengine.taobao.org,namespace=gateway,resources=secretchecksums;ingresschecksums,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=gateway,resources=events,verbs=create;patch
//
// IngressClasses are cluster-scoped, so a Role cannot grant them: the rule below becomes
// the ClusterRole trustplane-dataplane, which each gateway's ServiceAccount needs bound
// (docs/checksum.md) for the agent to apply Tengine-Ingress's class rules to Ingresses.
//
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingressclasses,verbs=get;list;watch
