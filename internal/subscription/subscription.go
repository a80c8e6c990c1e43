// Package subscription chooses hyperscaler credentials from a pool, with the labels
// kyma-environment-broker uses: hyperscalerType, shared, tenantName, dirty, euAccess.
// No client here: the controller lists the pool and claims what this package picks.
package subscription

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// Credential is a pool entry.
type Credential struct {
	Name   string
	Labels map[string]string
}

// Request is what a SubscriptionRequest asks for.
type Request struct {
	Provider string
	// Tenant is the global account of a dedicated request; empty for the shared pool.
	Tenant   string
	EUAccess bool
}

// ErrPoolExhausted says no credential fits the request.
var ErrPoolExhausted = errors.New("no free credential in the pool")

// ParseSelector reads "shared", "globalaccount:<id>" or a bare "<id>".
func ParseSelector(s string) (tenant string, err error) {
	switch {
	case s == "shared":
		return "", nil
	case strings.HasPrefix(s, "globalaccount:"):
		tenant = strings.TrimPrefix(s, "globalaccount:")
	default:
		tenant = s
	}
	if tenant == "" || strings.ContainsAny(tenant, " ,=") {
		return "", fmt.Errorf("subscriptionSelector %q is neither \"shared\" nor \"globalaccount:<id>\"", s)
	}
	return tenant, nil
}

// Choose picks a credential. For the shared pool: the least used (usage counts requests
// per credential), ties by name. For a tenant: the credential already labelled for it,
// else the first free one, which the caller must claim (claim = true) with optimistic
// concurrency and, on a conflict, choose again.
func Choose(req Request, pool []Credential, usage map[string]int) (name string, claim bool, err error) {
	sorted := append([]Credential(nil), pool...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var free, best string
	bestUse := -1
	for _, c := range sorted {
		l := c.Labels
		if l[cp.LabelHyperscalerType] != req.Provider || l[cp.LabelDirty] == "true" || (l[cp.LabelEUAccess] == "true") != req.EUAccess {
			continue
		}
		shared := l[cp.LabelShared] == "true"
		switch {
		case req.Tenant == "" && shared:
			if u := usage[c.Name]; bestUse < 0 || u < bestUse {
				best, bestUse = c.Name, u
			}
		case req.Tenant != "" && !shared && l[cp.LabelTenantName] == req.Tenant:
			return c.Name, false, nil
		case req.Tenant != "" && !shared && l[cp.LabelTenantName] == "" && free == "":
			free = c.Name
		}
	}
	switch {
	case best != "":
		return best, false, nil
	case free != "":
		return free, true, nil
	}
	kind := "shared"
	if req.Tenant != "" {
		kind = "dedicated"
	}
	return "", false, fmt.Errorf("%w: no %s %s credential%s that is not dirty", ErrPoolExhausted, kind, req.Provider, euSuffix(req.EUAccess))
}

func euSuffix(eu bool) string {
	if eu {
		return " with EU access"
	}
	return ""
}
