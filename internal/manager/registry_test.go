package manager

import (
	"strings"
	"testing"
)

func names(cs []Controller) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

func TestSelect(t *testing.T) {
	known := []Controller{{Name: "a"}, {Name: "b"}, {Name: "c", DisabledByDefault: true}}
	for _, tc := range []struct {
		spec    []string
		want    string
		wantErr string
	}{
		{spec: []string{"*"}, want: "a,b"},
		{spec: []string{"*", "-a"}, want: "b"},
		{spec: []string{"-a", "*"}, want: "b"},
		{spec: []string{"*", "c"}, want: "a,b,c"},
		{spec: []string{"b"}, want: "b"},
		{spec: []string{"c"}, want: "c"},
		{spec: []string{" a ", ""}, want: "a"},
		{spec: []string{"*", "-a", "a"}, want: "a,b"},
		{spec: nil, want: ""},
		{spec: []string{"nosuch"}, wantErr: `unknown controller "nosuch" in --controllers (known: a, b, c)`},
		{spec: []string{"*", "-nosuch"}, wantErr: `unknown controller "nosuch"`},
	} {
		got, err := Select(known, tc.spec)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Select(%q) error = %v, want %q", tc.spec, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Select(%q) unexpected error: %v", tc.spec, err)
			continue
		}
		if names(got) != tc.want {
			t.Errorf("Select(%q) = %q, want %q", tc.spec, names(got), tc.want)
		}
	}
}

func TestDescribeListsEveryController(t *testing.T) {
	out := Describe([]Controller{{Name: "jwks", Help: "JWK Sets"}, {Name: "x", Help: "X", DisabledByDefault: true}})
	for _, want := range []string{"jwks", "JWK Sets", "x", "(off by default)"} {
		if !strings.Contains(out, want) {
			t.Errorf("Describe output %q lacks %q", out, want)
		}
	}
}
