package subscription

import (
	"errors"
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
