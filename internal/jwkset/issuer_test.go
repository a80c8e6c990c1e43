package jwkset

import "testing"

func TestIssuerKey(t *testing.T) {
	for issuer, want := range map[string]string{
		"https://idp.example.com/bob":      "idp.example.com/bob",
		"https://IdP.Example.com:443/bob/": "idp.example.com/bob",
		"https://idp.example.com":          "idp.example.com",
		"https://idp.example.com/":         "idp.example.com",
		"https://idp.example.com:8443/bob": "idp.example.com:8443/bob",
		"https://[::1]:443/x":              "[::1]/x",
		"https://idp.example.com/a%2Fb":    "idp.example.com/a%2Fb", // an escaped slash is not a segment
	} {
		got, err := IssuerKey(issuer)
		if err != nil || got != want {
			t.Errorf("IssuerKey(%q) = %q, %v; want %q", issuer, got, err, want)
		}
	}
	for _, bad := range []string{"", "idp.example.com", "https:///x", "://x"} {
		if _, err := IssuerKey(bad); err == nil {
			t.Errorf("IssuerKey(%q): no error", bad)
		}
	}
}

func TestIssuerBindings(t *testing.T) {
	b, err := ParseIssuerBindings([]string{"idp.example.com=platform", "IDP.example.com/teams/a=team-a", "https://idp.example.com/teams/a/special=special"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"idp.example.com":                 "platform",
		"idp.example.com/bob":             "platform",
		"idp.example.com/teams/a":         "team-a",
		"idp.example.com/teams/a/x":       "team-a",
		"idp.example.com/teams/ab":        "platform", // not at a segment boundary
		"idp.example.com/teams/a/special": "special",  // the longest prefix
		"other.example.com/teams/a":       "",
		"idp.example.com:8443/teams/a":    "", // another port is another host
	} {
		ns, bound := b.NamespaceFor(key)
		if ns != want || bound != (want != "") {
			t.Errorf("NamespaceFor(%q) = %q, %v; want %q", key, ns, bound, want)
		}
	}
	for _, bad := range []string{"idp.example.com", "=ns", "idp.example.com=", "idp.example.com=a/b"} {
		if _, err := ParseIssuerBindings([]string{bad}); err == nil {
			t.Errorf("ParseIssuerBindings(%q): no error", bad)
		}
	}
}
