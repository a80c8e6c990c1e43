// Package aggregation holds the reasons of the events that the Role and ClusterRole
// aggregation controllers record. The ClusterRole controller, like kube-controller-manager's,
// records none today: a selector that does not parse is retried with backoff.
package aggregation

// Warning events of the Role aggregation controller on an annotated Role whose rules it
// leaves unchanged.
const (
	// ReasonInvalidSelector: the aggregation annotation is not a valid label selector.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonUntrustedAnnotation: the annotation is ignored because nothing makes sure its
	// author may escalate Roles (no admission policy, and the operator did not vouch).
	ReasonUntrustedAnnotation = "AggregationNotTrusted"
)
