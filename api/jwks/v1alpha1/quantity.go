package v1alpha1

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Not resource.Quantity, on purpose: a custom resource's quantities are checked the way Go
// parses them only by the CEL rule below, and an object stored before that rule existed
// (say "1e1.5", which the old pattern let through) must still decode, or the whole
// informer fails to list. The controller parses it and reports a bad one as InvalidSpec.

// Quantity is a resource quantity such as "100m", "0.5" or "64Mi", written as a string or
// an integer, as in a Pod's resources.
//
// +kubebuilder:validation:XIntOrString
// +kubebuilder:validation:Type=""
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="isQuantity(string(self))",message="must be a quantity such as 100m, 0.5 or 64Mi"
type Quantity string

// UnmarshalJSON takes a JSON string or number, and never fails on a well-formed one.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*q = Quantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a quantity is a string or a number: %w", err)
	}
	*q = Quantity(n.String())
	return nil
}

// Parse returns the quantity, or an error for a value admission would refuse.
func (q Quantity) Parse() (resource.Quantity, error) {
	return resource.ParseQuantity(string(q))
}
