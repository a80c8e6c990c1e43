package jwkset

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// IssuerKey is what makes two issuers the same issuer to a relying party: the host name
// (without case, and without the port when it is https's default) and the URL path
// without a trailing slash. "https://IdP.example:443/bob/" → "idp.example/bob". Only one
// JWKSConfig may serve an issuer key.
func IssuerKey(issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("issuer %q is not a URL with a host", issuer)
	}
	return hostKey(u.Host) + strings.TrimSuffix(u.EscapedPath(), "/"), nil
}

// hostKey is a host[:port] without case and without https's default port.
func hostKey(hostport string) string {
	host := strings.ToLower(hostport)
	if h, p, err := net.SplitHostPort(host); err == nil && p == "443" {
		host = h
		if strings.Contains(h, ":") { // IPv6 literal
			host = "[" + h + "]"
		}
	}
	return host
}

// IssuerBinding gives the issuers under Prefix (a host, or a host and path: an issuer
// key prefix that ends at a path segment) to the JWKSConfigs of one namespace.
type IssuerBinding struct {
	Prefix    string
	Namespace string
}

// IssuerBindings are the operator's bindings (--jwks-issuer-namespaces); the longest
// matching prefix decides.
type IssuerBindings []IssuerBinding

// ParseIssuerBindings reads "host[/path]=namespace" entries.
func ParseIssuerBindings(entries []string) (IssuerBindings, error) {
	bindings := make(IssuerBindings, 0, len(entries))
	for _, e := range entries {
		prefix, ns, ok := strings.Cut(e, "=")
		if !ok || prefix == "" || ns == "" || strings.Contains(ns, "/") {
			return nil, fmt.Errorf("issuer binding %q is not host[/path]=namespace, e.g. idp.example.com/teams/a=team-a", e)
		}
		key, err := IssuerKey("https://" + strings.TrimPrefix(prefix, "https://"))
		if err != nil {
			return nil, fmt.Errorf("issuer binding %q: %w", e, err)
		}
		bindings = append(bindings, IssuerBinding{Prefix: key, Namespace: ns})
	}
	return bindings, nil
}

// NamespaceFor is the namespace bound to the issuer key, if any binding covers it.
func (b IssuerBindings) NamespaceFor(key string) (namespace string, bound bool) {
	best := -1
	for _, binding := range b {
		if covers(binding.Prefix, key) && len(binding.Prefix) > best {
			best, namespace = len(binding.Prefix), binding.Namespace
		}
	}
	return namespace, best >= 0
}

// covers says whether prefix is key or an ancestor of it at a path-segment boundary
// ("idp.example/a" covers "idp.example/a/b", not "idp.example/ab").
func covers(prefix, key string) bool {
	return key == prefix || strings.HasPrefix(key, prefix+"/")
}
