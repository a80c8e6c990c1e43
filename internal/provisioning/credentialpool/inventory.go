package credentialpool

import (
	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// Inventory is the pool counted as kyma-environment-broker's credentials-binding
// collector counts it (internal/metrics/credentials_bindings_collector.go), each count by
// hyperscalerType; entries without one are not counted.
type Inventory struct {
	// Available are free dedicated credentials: no tenantName, not shared, not dirty
	// (KEB's selector "!tenantName,shared!=true,!dirty").
	Available map[string]int
	// Claimed are the credentials labelled tenantName, by hyperscalerType and tenant.
	Claimed map[[2]string]int
	// Dirty are the credentials labelled dirty=true, waiting to be cleaned.
	Dirty map[string]int
	// Shared are the credentials labelled shared=true.
	Shared map[string]int
	// Instances are the users (requests and Shoots) of each credential that has any.
	Instances map[string]int
}

// Count makes the Inventory of pool, with users counting each credential's users.
func Count(pool []Credential, users map[string]int) Inventory {
	inv := Inventory{Available: map[string]int{}, Claimed: map[[2]string]int{}, Dirty: map[string]int{}, Shared: map[string]int{}, Instances: map[string]int{}}
	for _, c := range pool {
		l := c.Labels
		typ := l[cp.LabelHyperscalerType]
		if typ == "" {
			continue
		}
		tenant, claimed := l[cp.LabelTenantName]
		switch {
		case isTrue(l, cp.LabelDirty):
			inv.Dirty[typ]++
		case isTrue(l, cp.LabelShared):
		case !claimed:
			inv.Available[typ]++
		}
		if isTrue(l, cp.LabelShared) {
			inv.Shared[typ]++
		}
		if claimed {
			inv.Claimed[[2]string{typ, tenant}]++
		}
		if n := users[c.Name]; n > 0 {
			inv.Instances[c.Name] = n
		}
	}
	return inv
}
