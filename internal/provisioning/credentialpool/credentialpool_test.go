package credentialpool

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func cred(name string, labels ...string) Credential {
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return Credential{Name: name, Labels: l}
}

func TestChoose(t *testing.T) {
	pool := []Credential{
		cred("aws-shared-1", "hyperscalerType", "aws", "shared", "true"),
		cred("aws-shared-2", "hyperscalerType", "aws", "shared", "true"),
		cred("aws-shared-dirty", "hyperscalerType", "aws", "shared", "true", "dirty", "true"),
		cred("aws-free-b", "hyperscalerType", "aws"),
		cred("aws-free-a", "hyperscalerType", "aws"),
		cred("aws-t1", "hyperscalerType", "aws", "tenantName", "t1"),
		cred("aws-dirty", "hyperscalerType", "aws", "dirty", "true"),
		cred("aws-eu", "hyperscalerType", "aws", "euAccess", "true"),
		cred("gcp-free", "hyperscalerType", "gcp"),
		cred("gcp-eu-false", "hyperscalerType", "gcp", "euAccess", "false"),
		cred("gcp-a-dirty", "hyperscalerType", "gcp", "tenantName", "t-dirty", "dirty", "true"),
		cred("aws-a-eu-empty", "hyperscalerType", "aws", "euAccess", "true", "tenantName", ""),
		cred("az-internal", "hyperscalerType", "azure", "internal", "true", "tenantName", "internal-ga"),
		cred("az-internal-free", "hyperscalerType", "azure", "internal", "true"),
		cred("az-internal-shared", "hyperscalerType", "azure", "internal", "true", "shared", "true"),
		cred("az-zfree", "hyperscalerType", "azure"),
		cred("os-de-1", "hyperscalerType", "openstack_eu-de-1", "shared", "true"),
		cred("os-de-2", "hyperscalerType", "openstack_eu-de-1", "shared", "true"),
		cred("os-free", "hyperscalerType", "openstack"),
		cred("os-shared", "hyperscalerType", "openstack", "shared", "true"),
	}
	for _, tc := range []struct {
		name      string
		req       Request
		usage     map[string]int
		want      string
		wantClaim bool
		wantErr   bool
	}{
		{"shared least used", Request{Provider: "aws"}, map[string]int{"aws-shared-1": 3, "aws-shared-2": 1}, "aws-shared-2", false, false},
		{"shared tie by name", Request{Provider: "aws"}, nil, "aws-shared-1", false, false},
		{"dedicated already labelled", Request{Provider: "aws", Tenant: "t1"}, nil, "aws-t1", false, false},
		{"dedicated claims the first free", Request{Provider: "aws", Tenant: "t2"}, nil, "aws-free-a", true, false},
		{"eu access pool", Request{Provider: "aws", Tenant: "t3", EUAccess: true}, nil, "aws-eu", true, false},
		{"other provider", Request{Provider: "gcp", Tenant: "t1"}, nil, "gcp-free", true, false},
		{"nothing for azure", Request{Provider: "azure"}, nil, "", false, true},
		// internal: only for the account it is labelled for, never claimed, never shared.
		{"internal for its account", Request{Provider: "azure", Tenant: "internal-ga"}, nil, "az-internal", false, false},
		{"internal never claimed", Request{Provider: "azure", Tenant: "t9"}, nil, "az-zfree", true, false},
		{"internal never shared", Request{Provider: "azure"}, nil, "", false, true},
		// regional pools: a region with a pool of its own is served from it only.
		{"regional shared", Request{Provider: "openstack", Region: "eu-de-1"}, map[string]int{"os-de-1": 4, "os-de-2": 1}, "os-de-2", false, false},
		{"regional dedicated exhausted, no fallback", Request{Provider: "openstack", Region: "eu-de-1", Tenant: "t1"}, nil, "", false, true},
		{"region without a pool uses the provider's", Request{Provider: "openstack", Region: "ap-jp-1", Tenant: "t1"}, nil, "os-free", true, false},
		// euAccess as KEB selects: "!euAccess" for the others, so euAccess=false is no match.
		{"euAccess=false is not the ordinary pool", Request{Provider: "gcp", Tenant: "t5"}, nil, "gcp-free", true, false},
		// a dirty credential of the tenant is not reused: the tenant claims a fresh one.
		{"dirty own credential", Request{Provider: "gcp", Tenant: "t-dirty"}, nil, "gcp-free", true, false},
		// an empty tenantName label is a label: not free (KEB's "!tenantName").
		{"empty tenantName is claimed", Request{Provider: "aws", Tenant: "t7", EUAccess: true}, nil, "aws-eu", true, false},
	} {
		got, claim, err := Choose(tc.req, pool, tc.usage)
		if tc.wantErr {
			if !errors.Is(err, ErrPoolExhausted) {
				t.Errorf("%s: err %v", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want || claim != tc.wantClaim {
			t.Errorf("%s: %s claim=%v err=%v, want %s claim=%v", tc.name, got, claim, err, tc.want, tc.wantClaim)
		}
	}
}

func TestParseSelector(t *testing.T) {
	for in, want := range map[string]string{"shared": "", "globalaccount:abcd-0001": "abcd-0001", "abcd-0001": "abcd-0001"} {
		if got, err := ParseSelector(in); err != nil || got != want {
			t.Errorf("ParseSelector(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"globalaccount:", "a b", "x=y"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) accepted", bad)
		}
	}
}

func TestFits(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  Request
		c    Credential
		want bool
	}{
		{"shared", Request{Provider: "aws"}, cred("a", "hyperscalerType", "aws", "shared", "true"), true},
		{"shared became dirty", Request{Provider: "aws"}, cred("a", "hyperscalerType", "aws", "shared", "true", "dirty", "true"), false},
		{"dedicated, labelled for the account", Request{Provider: "aws", Tenant: "t1"}, cred("a", "hyperscalerType", "aws", "tenantName", "t1"), true},
		{"dedicated, handed back", Request{Provider: "aws", Tenant: "t1"}, cred("a", "hyperscalerType", "aws"), false},
		{"assigned from the provider's pool before a regional pool appeared", Request{Provider: "aws", Region: "eu-1"}, cred("a", "hyperscalerType", "aws", "shared", "true"), true},
		{"regional", Request{Provider: "aws", Region: "eu-1"}, cred("a", "hyperscalerType", "aws_eu-1", "shared", "true"), true},
		{"another region", Request{Provider: "aws", Region: "eu-1"}, cred("a", "hyperscalerType", "aws_eu-2", "shared", "true"), false},
		{"EU access lost", Request{Provider: "aws", EUAccess: true}, cred("a", "hyperscalerType", "aws", "shared", "true"), false},
	} {
		if got := Fits(tc.req, tc.c); got != tc.want {
			t.Errorf("%s: Fits = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReleased(t *testing.T) {
	t1 := Request{Provider: "aws", Tenant: "t1"}
	for _, tc := range []struct {
		name       string
		req        Request
		c          Credential
		otherUsers int
		ownShoot   bool
		want       Release
	}{
		{"last user gone", t1, cred("a", "tenantName", "t1"), 0, false, MarkDirty},
		{"another Shoot uses it", t1, cred("a", "tenantName", "t1"), 1, false, Keep},
		{"own Shoot still there", t1, cred("a", "tenantName", "t1"), 0, true, WaitForShoot},
		{"shared", t1, cred("a", "shared", "true", "tenantName", "t1"), 0, false, Keep},
		{"internal", t1, cred("a", "internal", "true", "tenantName", "t1"), 0, false, Keep},
		{"already dirty", t1, cred("a", "dirty", "true", "tenantName", "t1"), 0, true, Keep},
		// A request can only have claimed a credential labelled for its own account: a
		// forged or stale status naming anything else never spoils it.
		{"free: never claimed", t1, cred("a", "hyperscalerType", "aws"), 0, false, Keep},
		{"another account's", t1, cred("a", "tenantName", "t2"), 0, false, Keep},
		{"empty tenantName", t1, cred("a", "tenantName", ""), 0, false, Keep},
		{"a shared request", Request{Provider: "aws"}, cred("a", "tenantName", "t1"), 0, false, Keep},
	} {
		if got := Released(tc.req, tc.c, tc.otherUsers, tc.ownShoot); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestGranted(t *testing.T) {
	for _, tc := range []struct {
		grants, account string
		want            bool
	}{
		{"", "ga-1", false},
		{"ga-1", "ga-1", true},
		{"ga-1,ga-2", "ga-2", true},
		{" ga-1 , ga-2 ", "ga-2", true},
		{"ga-1,ga-2", "ga-3", false},
		{"*", "anything", true},
		{"ga-1,*", "anything", true},
		{"ga-10", "ga-1", false},     // ids, not prefixes
		{"ga-1", "ga-10", false},     // nor patterns
		{"ga-*", "ga-1", false},      // "*" only on its own
		{",,", "", false},            // empty entries grant nothing
		{"GA-1", "ga-1", false},      // label values are case-sensitive
		{"ga-1;ga-2", "ga-2", false}, // only commas separate
	} {
		if got := Granted(tc.grants, tc.account); got != tc.want {
			t.Errorf("Granted(%q, %q) = %v, want %v", tc.grants, tc.account, got, tc.want)
		}
	}
}

func TestGrant(t *testing.T) {
	for _, tc := range []struct{ grants, account, want string }{
		{"", "ga-1", "ga-1"},
		{"ga-2", "ga-1", "ga-2,ga-1"},
		{"ga-2, ", "ga-1", "ga-2,ga-1"},
		{"ga-1,ga-2", "ga-1", "ga-1,ga-2"},
		{"*", "ga-1", "*"},
	} {
		got := Grant(tc.grants, tc.account)
		if got != tc.want || !Granted(got, tc.account) {
			t.Errorf("Grant(%q, %q) = %q, want %q", tc.grants, tc.account, got, tc.want)
		}
	}
}

// TestExhaustedSaysWhatACredentialNeeds: the error names the labels a credential needs,
// and the dirty credentials that would serve once handed back.
func TestExhaustedSaysWhatACredentialNeeds(t *testing.T) {
	pool := []Credential{
		cred("gcp-dirty-own", "hyperscalerType", "gcp", "tenantName", "ga-1", "dirty", "true"),
		cred("gcp-dirty-free", "hyperscalerType", "gcp", "dirty", "true"),
		cred("gcp-dirty-other", "hyperscalerType", "gcp", "tenantName", "ga-2", "dirty", "true"),
		cred("gcp-dirty-shared", "hyperscalerType", "gcp", "shared", "true", "dirty", "true"),
		cred("gcp-dirty-eu", "hyperscalerType", "gcp", "euAccess", "true", "dirty", "true"),
		cred("gcp-dirty-internal", "hyperscalerType", "gcp", "internal", "true", "dirty", "true"),
	}
	for _, tc := range []struct {
		req   Request
		dirty []string
		label string
	}{
		{Request{Provider: "gcp", Tenant: "ga-1"}, []string{"gcp-dirty-free", "gcp-dirty-own"}, "no tenantName (or tenantName=ga-1)"},
		{Request{Provider: "gcp"}, []string{"gcp-dirty-shared"}, "shared=true"},
		{Request{Provider: "gcp", Tenant: "ga-3", EUAccess: true}, []string{"gcp-dirty-eu"}, "euAccess=true"},
		{Request{Provider: "aws", Tenant: "ga-1"}, nil, "hyperscalerType=aws"},
	} {
		_, _, err := Choose(tc.req, pool, nil)
		var ex *ExhaustedError
		if !errors.As(err, &ex) || !errors.Is(err, ErrPoolExhausted) {
			t.Fatalf("%+v: %v", tc.req, err)
		}
		if !slices.Equal(ex.Dirty, tc.dirty) || !strings.Contains(err.Error(), tc.label) {
			t.Errorf("%+v: dirty %v, message %q; want dirty %v and %q", tc.req, ex.Dirty, err, tc.dirty, tc.label)
		}
	}
}

// TestSeveralCredentialsPerAccount: with a limit, an account fills its most-used
// credential below the limit first, claims another free one when all of its own are
// full, and finds the pool exhausted, saying so, when none is free; without a limit it
// keeps its one credential whatever its users.
func TestSeveralCredentialsPerAccount(t *testing.T) {
	own := func(name string) Credential { return cred(name, "hyperscalerType", "aws", "tenantName", "ga") }
	free := cred("free", "hyperscalerType", "aws")
	req := Request{Provider: "aws", Tenant: "ga", Limit: 3}
	for _, tc := range []struct {
		name  string
		pool  []Credential
		usage map[string]int
		limit int
		want  string
		claim bool
	}{
		{"the most used below the limit", []Credential{own("a"), own("b"), own("c"), free}, map[string]int{"a": 1, "b": 2, "c": 3}, 3, "b", false},
		{"a new one when all are full", []Credential{own("a"), own("b"), free}, map[string]int{"a": 3, "b": 4}, 3, "free", true},
		{"an unused own one before a free one", []Credential{own("a"), own("b"), free}, map[string]int{"a": 3}, 3, "b", false},
		{"no limit: the one credential", []Credential{own("a"), free}, map[string]int{"a": 50}, 0, "a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := req
			r.Limit = tc.limit
			name, claim, err := Choose(r, tc.pool, tc.usage)
			if err != nil || name != tc.want || claim != tc.claim {
				t.Errorf("Choose = %s, claim %v, %v; want %s, claim %v", name, claim, err, tc.want, tc.claim)
			}
		})
	}
	_, _, err := Choose(req, []Credential{own("a"), own("b")}, map[string]int{"a": 3, "b": 3})
	var exhausted *ExhaustedError
	if !errors.As(err, &exhausted) || exhausted.Full != 2 || !strings.Contains(err.Error(), "the account's 2 credential(s) each serve their limit of 3 users") {
		t.Errorf("all full and none free: %v", err)
	}
}
