// Package credentialpool chooses hyperscaler credentials from a pool labelled as
// kyma-environment-broker's hyperscaler account pool labels it (hyperscalerType, shared,
// tenantName, dirty, internal, euAccess), and decides what releasing one means. No client
// here: the controller lists the pool and the Shoots, and claims or marks what this
// package picks.
//
// The rules, as KEB applies them to the garden's CredentialsBindings:
//   - hyperscalerType is the pool: the provider ("gcp"), or a regional pool
//     "<provider>_<region>" (KEB's HR attribute, e.g. "openstack_eu-de-1"). A region that
//     has a pool of its own is served from it only; there is no fallback.
//   - euAccess: an EU-access request takes only euAccess=true credentials, any other
//     request only credentials without the label (KEB's "!euAccess").
//   - shared: the least used shared=true credential, counting the Shoots (and assigned
//     requests) that use each one; ties by name.
//   - dedicated: the credential labelled tenantName=<account> (and not shared, not dirty),
//     else a free one (no tenantName label, not shared, not dirty, not internal), which
//     the caller claims by labelling it.
//   - internal=true credentials serve only the internal account they are labelled for.
//   - release: a dedicated credential becomes dirty once no Shoot and no other request
//     uses it; shared, internal and already dirty ones are left alone, and so is one not
//     labelled for the releasing request's account (a free one above all: it was never
//     claimed). An operator hands a cleaned one back by removing dirty (and tenantName, to
//     free it for any account).
//
// And one rule of trustplane's own: a namespace claims dedicated credentials only for the
// global accounts the operator grants it (Granted), so that no tenant drains the pool by
// asking for made-up accounts.
package credentialpool

import (
	"errors"
	"fmt"
	"maps"
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
	// Region is the hyperscaler region; it selects a regional pool where there is one.
	Region string
	// Tenant is the global account of a dedicated request; empty for the shared pool.
	Tenant   string
	EUAccess bool
	// Limit is how many users one of Tenant's credentials serves before another is
	// claimed; 0: Tenant holds one credential of the pool, whatever its users.
	Limit int
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

// RegionalType is the hyperscalerType of the regional pool of provider in region.
func RegionalType(provider, region string) string { return provider + "_" + region }

// HyperscalerType is the pool that serves req: the regional pool of its region when the
// pool has any credential labelled for it, else the provider's.
func HyperscalerType(req Request, pool []Credential) string {
	if req.Region != "" {
		regional := RegionalType(req.Provider, req.Region)
		for _, c := range pool {
			if c.Labels[cp.LabelHyperscalerType] == regional {
				return regional
			}
		}
	}
	return req.Provider
}

func isTrue(labels map[string]string, key string) bool { return labels[key] == "true" }

// fitsPool: the right hyperscalerType and EU access, not dirty.
func fitsPool(l map[string]string, hyperscalerType string, euAccess bool) bool {
	if l[cp.LabelHyperscalerType] != hyperscalerType || isTrue(l, cp.LabelDirty) {
		return false
	}
	if euAccess {
		return isTrue(l, cp.LabelEUAccess)
	}
	_, labelled := l[cp.LabelEUAccess]
	return !labelled
}

// Fits says whether the credential (assigned earlier) still serves req: the pool's
// hyperscalerType (the provider's or the region's), not dirty, and for a dedicated
// request still labelled for its account; for a shared one still shared.
func Fits(req Request, c Credential) bool {
	l := c.Labels
	typ := l[cp.LabelHyperscalerType]
	if typ != req.Provider && (req.Region == "" || typ != RegionalType(req.Provider, req.Region)) {
		return false
	}
	if !fitsPool(l, typ, req.EUAccess) {
		return false
	}
	if req.Tenant == "" {
		return isTrue(l, cp.LabelShared) && !isTrue(l, cp.LabelInternal)
	}
	return !isTrue(l, cp.LabelShared) && l[cp.LabelTenantName] == req.Tenant
}

// Choose picks a credential. usage counts the users of each credential (the Shoots that
// reference it and the requests assigned to it, each user once). For the shared pool:
// the least used, ties by name. For a tenant: the credential already labelled for it,
// else the first free one by name, which the caller must claim (claim = true) with
// optimistic concurrency and, on a conflict, choose again.
func Choose(req Request, pool []Credential, usage map[string]int) (name string, claim bool, err error) {
	sorted := append([]Credential(nil), pool...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	typ := HyperscalerType(req, sorted)
	var free, best, bestOwn string
	bestUse, bestOwnUse, ownFull := -1, -1, 0
	for _, c := range sorted {
		l := c.Labels
		if !fitsPool(l, typ, req.EUAccess) {
			continue
		}
		shared, internal := isTrue(l, cp.LabelShared), isTrue(l, cp.LabelInternal)
		tenant, claimed := l[cp.LabelTenantName]
		switch {
		case req.Tenant == "" && shared && !internal:
			if u := usage[c.Name]; bestUse < 0 || u < bestUse {
				best, bestUse = c.Name, u
			}
		case req.Tenant != "" && !shared && claimed && tenant == req.Tenant:
			if req.Limit == 0 {
				return c.Name, false, nil
			}
			// Several credentials per account (KEB's resolveWithMultiAccountSupport): the
			// most used below the limit, so that credentials fill one after another.
			switch u := usage[c.Name]; {
			case u >= req.Limit:
				ownFull++
			case u > bestOwnUse:
				bestOwn, bestOwnUse = c.Name, u
			}
		case req.Tenant != "" && !shared && !claimed && !internal && free == "":
			free = c.Name
		}
	}
	switch {
	case best != "":
		return best, false, nil
	case bestOwn != "":
		return bestOwn, false, nil
	case free != "":
		return free, true, nil
	}
	return "", false, &ExhaustedError{Request: req, HyperscalerType: typ, Dirty: dirtyFor(req, sorted, typ), Full: ownFull}
}

// ExhaustedError is ErrPoolExhausted with what a credential needs to serve the request,
// and the dirty credentials that would, once cleaned and handed back.
type ExhaustedError struct {
	Request         Request
	HyperscalerType string
	// Dirty are the dirty credentials of the pool that would serve the request.
	Dirty []string
	// Full is how many credentials of the request's account serve their limit of users
	// already (Request.Limit).
	Full int
}

func (e *ExhaustedError) Error() string {
	kind := "shared"
	if e.Request.Tenant != "" {
		kind = "dedicated"
	}
	full := ""
	if e.Full > 0 {
		full = fmt.Sprintf(" (the account's %d credential(s) each serve their limit of %d users)", e.Full, e.Request.Limit)
	}
	return fmt.Sprintf("%v: no %s credential of pool %s%s that is not dirty%s; a credential needs the labels %s",
		ErrPoolExhausted, kind, e.HyperscalerType, euSuffix(e.Request.EUAccess), full, strings.Join(e.Labels(), ", "))
}

func (e *ExhaustedError) Unwrap() error { return ErrPoolExhausted }

// Labels are the labels a credential needs to serve the request, as "key=value" (or
// "no key" for one it must not have).
func (e *ExhaustedError) Labels() []string {
	labels := []string{cp.LabelHyperscalerType + "=" + e.HyperscalerType}
	if e.Request.EUAccess {
		labels = append(labels, cp.LabelEUAccess+"=true")
	} else {
		labels = append(labels, "no "+cp.LabelEUAccess)
	}
	if e.Request.Tenant == "" {
		return append(labels, cp.LabelShared+"=true", "not "+cp.LabelInternal+"=true")
	}
	return append(labels, "not "+cp.LabelShared+"=true", "no "+cp.LabelTenantName+" (or "+cp.LabelTenantName+"="+e.Request.Tenant+")", "not "+cp.LabelDirty+"=true")
}

// dirtyFor are the dirty credentials that would serve req but for the dirty label.
func dirtyFor(req Request, sorted []Credential, typ string) []string {
	var out []string
	for _, c := range sorted {
		l := c.Labels
		if !isTrue(l, cp.LabelDirty) {
			continue
		}
		clean := maps.Clone(l)
		delete(clean, cp.LabelDirty)
		if !fitsPool(clean, typ, req.EUAccess) || isTrue(l, cp.LabelInternal) {
			continue
		}
		if tenant, ok := l[cp.LabelTenantName]; req.Tenant == "" && isTrue(l, cp.LabelShared) || req.Tenant != "" && !isTrue(l, cp.LabelShared) && (!ok || tenant == req.Tenant) {
			out = append(out, c.Name)
		}
	}
	return out
}

func euSuffix(eu bool) string {
	if eu {
		return " with EU access"
	}
	return ""
}

// Release is what releasing a credential does.
type Release int

const (
	// Keep: leave the credential as it is (shared, internal, already dirty, or still
	// used by another Shoot or request).
	Keep Release = iota
	// MarkDirty: label it dirty=true; the account is to be cleaned before anyone gets it.
	MarkDirty
	// WaitForShoot: the releasing request's own Shoot still exists; decide once it is gone.
	WaitForShoot
)

// Released decides what releasing credential c, assigned to req, means. otherUsers counts
// the Shoots and requests that use it besides the releasing request and its own Shoot;
// ownShoot says whether that Shoot still exists. Only a dedicated credential labelled for
// req's account can have been claimed by req: any other (a free one, another account's,
// a shared one named in a forged status) is kept as it is.
func Released(req Request, c Credential, otherUsers int, ownShoot bool) Release {
	l := c.Labels
	switch {
	case req.Tenant == "" || l[cp.LabelTenantName] != req.Tenant:
		return Keep
	case isTrue(l, cp.LabelShared), isTrue(l, cp.LabelInternal), isTrue(l, cp.LabelDirty):
		return Keep
	case ownShoot:
		return WaitForShoot
	case otherUsers > 0:
		return Keep
	}
	return MarkDirty
}

// AnyAccount in a grant allows every global account.
const AnyAccount = "*"

// Granted says whether grants, the value of cp.AnnotationGlobalAccounts on a Namespace
// (account ids separated by commas, or "*"), allows claiming a dedicated credential for
// account. Blanks around an id are ignored; an empty value grants nothing.
func Granted(grants, account string) bool {
	for _, g := range strings.Split(grants, ",") {
		if g = strings.TrimSpace(g); g == AnyAccount || (g != "" && g == account) {
			return true
		}
	}
	return false
}

// Grant is the value of cp.AnnotationGlobalAccounts that grants account besides what
// grants already does: what the operator sets to let a waiting request claim.
func Grant(grants, account string) string {
	if Granted(grants, account) {
		return grants
	}
	if strings.TrimSpace(grants) == "" {
		return account
	}
	return strings.TrimRight(strings.TrimSpace(grants), ",") + "," + account
}
