// Package aggregation holds the Role aggregation annotation and the reasons of the events
// that the Role and ClusterRole aggregation controllers record. The ClusterRole
// controller, like kube-controller-manager's, records none today: a selector that does not parse is retried with backoff.
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

// How `trustplane get` and `describe` report an aggregating Role or ClusterRole: its
// rules compared with what aggregation makes of the roles its selectors match now.
const (
	// ReasonAggregated (Ready=True): the rules are those of the matching roles.
	ReasonAggregated = "Aggregated"
	// ReasonRulesOutOfDate (Ready=False): the rules differ from what aggregation makes of
	// the matching roles now: no controller runs, it has not caught up yet, or (Roles)
	// it does not trust the annotation (see the AggregationNotTrusted event).
	ReasonRulesOutOfDate = "RulesOutOfDate"
)

// SelectorAnnotation, set by a user on a Role, holds a label selector in kubectl syntax
// (e.g. "rbac.example.com/aggregate-to-dev=true,tier in (a,b)"): the role-aggregation
// controller writes into that Role the rules of the Roles of its namespace that the
// selector matches, as aggregationRule does for ClusterRoles. Setting or changing it
// needs the right to escalate Roles in the namespace (the admission policy
// trustplane-role-aggregation).
const SelectorAnnotation = "rbac.trustplane.io/aggregate-from"
