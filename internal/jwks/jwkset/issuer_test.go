package jwkset

import "testing"

// TestIssuerKey is the normalisation table: every spelling of one issuer has one key, and
// a spelling that would be a second key for the same resource is refused.
func TestIssuerKey(t *testing.T) {
	for issuer, want := range map[string]string{
		"https://idp.example.com/bob":       "idp.example.com/bob",
		"https://IdP.Example.com:443/bob/":  "idp.example.com/bob",    // case, default port, trailing slash
		"https://idp.example.com:8443/bob":  "idp.example.com/bob",    // any port: one host name, one owner
		"https://idp.example.com.:8443/bob": "idp.example.com/bob",    // the fully qualified spelling
		"HTTPS://BOUND.example/x":           "bound.example/x",        // the scheme's case
		"https://idp.example.com":           "idp.example.com",        // no path
		"https://idp.example.com/":          "idp.example.com",        // the root
		"https://[::1]:443/x":               "[::1]/x",                // an IPv6 literal
		"https://[::1]/x":                   "[::1]/x",                // … without its port
		"https://10.0.0.1:8443/x":           "10.0.0.1/x",             // an IPv4 address
		"https://idp.example.com/Team/A":    "idp.example.com/Team/A", // a path keeps its case
		"https://xn--bcher-kva.example/a":   "xn--bcher-kva.example/a",
	} {
		got, err := IssuerKey(issuer)
		if err != nil || got != want {
			t.Errorf("IssuerKey(%q) = %q, %v; want %q", issuer, got, err, want)
		}
	}
	for _, bad := range []string{
		"", "idp.example.com", "https:///x", "://x", "http://idp.example.com/x",
		"https://held.example/%68",         // an escaped unreserved character: /h
		"https://pathbound.example/t%65am", // /team
		"https://idp.example.com/a%2Fb",    // an escaped slash
		"https://idp.example.com/a%2fb",
		"https://idp.example.com/ä", // escaped by the URL itself
		"https://idp.example.com/a b",
		"https://idp.example.com//bob",  // an empty segment
		"https://idp.example.com/a/./b", // dot segments
		"https://idp.example.com/a/../bob",
		"https://idp.example.com/..",
		"https://user@idp.example.com/x",
		"https://idp.example.com/x?a=b",
		"https://idp.example.com/x#f",
		"https://bücher.example/a", // not in its ASCII form
		"https://./x",
	} {
		if key, err := IssuerKey(bad); err == nil {
			t.Errorf("IssuerKey(%q) = %q, want an error", bad, key)
		}
	}
}

func TestHostKeyOfARequestsHost(t *testing.T) {
	for host, want := range map[string]string{
		"Bob.Example":      "bob.example",
		"bob.example:8443": "bob.example",
		"bob.example.":     "bob.example",
		"bob.example.:443": "bob.example",
		"[::1]:8080":       "[::1]",
		"127.0.0.1:8082":   "127.0.0.1",
	} {
		if got, err := HostKey(host); err != nil || got != want {
			t.Errorf("HostKey(%q) = %q, %v; want %q", host, got, err, want)
		}
	}
	for _, bad := range []string{"", ":8080", "[::1", "[::1]x", "bob example", "bob/example"} {
		if got, err := HostKey(bad); err == nil {
			t.Errorf("HostKey(%q) = %q, want an error", bad, got)
		}
	}
}

func TestIssuerBindings(t *testing.T) {
	b, err := ParseIssuerBindings([]string{"idp.example.com=platform", "IDP.example.com/teams/a=team-a", "https://idp.example.com/teams/a/special=special",
		"bound.example:8443/x=bob"})
	if err != nil {
		t.Fatal(err)
	}
	for issuer, want := range map[string]string{
		"https://idp.example.com":                 "platform",
		"https://idp.example.com/bob":             "platform",
		"https://idp.example.com/teams/a":         "team-a",
		"https://idp.example.com/teams/a/x":       "team-a",
		"https://idp.example.com/teams/ab":        "platform", // not at a segment boundary
		"https://idp.example.com/teams/a/special": "special",  // the longest prefix
		"https://other.example.com/teams/a":       "",
		"https://idp.example.com:8443/teams/a":    "team-a", // a host binding covers every port
		"https://IDP.EXAMPLE.COM./teams/a/":       "team-a", // and every spelling
		"https://bound.example/x":                 "bob",    // a binding written with a port too
		"https://bound.example:9443/x/y":          "bob",
	} {
		key, err := IssuerKey(issuer)
		if err != nil {
			t.Fatal(err)
		}
		ns, bound := b.NamespaceFor(key)
		if ns != want || bound != (want != "") {
			t.Errorf("NamespaceFor(%q) = %q, %v; want %q", key, ns, bound, want)
		}
	}
	for _, bad := range []string{"idp.example.com", "=ns", "idp.example.com=", "idp.example.com=a/b", "pathbound.example/t%65am=bob"} {
		if _, err := ParseIssuerBindings([]string{bad}); err == nil {
			t.Errorf("ParseIssuerBindings(%q): no error", bad)
		}
	}
}
