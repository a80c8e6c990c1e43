package jwkset

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// IssuerKey is an issuer in the one spelling every part of trustplane compares issuers in
// (claims, holds, the operator's bindings, the JWKS server's table and its router): the
// host name lower-cased, without its port and without a trailing dot, then the URL path
// without a trailing slash. "https://IdP.example:8443/bob/" → "idp.example/bob".
//
// The port is dropped, not only https's default one: proxies forward Host with or without
// it, so two issuers that differ only in their port could not be told apart by the server;
// one host name and path, one owner. A path is taken only in its one spelling: a
// percent-escape (%68 for h), an empty segment (//) or a dot segment (. or ..) is refused,
// as admission refuses it, so no second spelling of an issuer is a second claim.
func IssuerKey(issuer string) (string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("issuer %q is not a URL with a host", issuer)
	}
	if !strings.EqualFold(u.Scheme, "https") || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("issuer %q is not an https URL without user, query or fragment", issuer)
	}
	host, err := HostKey(u.Host)
	if err != nil {
		return "", fmt.Errorf("issuer %q: %w", issuer, err)
	}
	path, err := pathKey(u.EscapedPath())
	if err != nil {
		return "", fmt.Errorf("issuer %q: %w", issuer, err)
	}
	return host + path, nil
}

// HostKey is the host part of an issuer key for a host[:port], as a URL or a request's
// Host header carries it: lower-cased, the port and a trailing dot dropped.
func HostKey(hostport string) (string, error) {
	host := hostport
	if strings.HasPrefix(host, "[") { // an IPv6 literal, with or without a port
		end := strings.IndexByte(host, ']')
		if end < 0 || (end+1 < len(host) && host[end+1] != ':') {
			return "", fmt.Errorf("host %q is not an IPv6 literal such as [::1]", hostport)
		}
		host = host[:end+1]
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" || host == "[]" {
		return "", errors.New("no host name")
	}
	for _, r := range host {
		if !hostRune(r) {
			return "", fmt.Errorf("host %q has a character other than a-z, 0-9, '.', '-' or '_': write an internationalised name in its ASCII (xn--) form", hostport)
		}
	}
	return host, nil
}

// hostRune says whether r may be in a lower-cased host: a DNS name or an IP literal.
func hostRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(".-:[]_", r)
}

// pathKey is an escaped URL path without its trailing slash, refused when it is not in
// its one spelling (see IssuerKey).
func pathKey(escaped string) (string, error) {
	if strings.Contains(escaped, "%") {
		return "", fmt.Errorf("path %q holds a percent-escape: write it as it reads (an issuer has one spelling)", escaped)
	}
	path := strings.TrimSuffix(escaped, "/")
	for _, segment := range strings.Split(path, "/")[1:] {
		if segment == "" || segment == "." || segment == ".." {
			return "", fmt.Errorf("path %q has an empty, '.' or '..' segment: write it as it resolves", escaped)
		}
	}
	return path, nil
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

// SplitIssuerKey splits an issuer key into its host and its path ("" at the root).
func SplitIssuerKey(key string) (host, path string) {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i], key[i:]
	}
	return key, ""
}

// CanonicalRoute reads a path of exactly two segments, /<namespace>/<name>: the route of
// a JWKSConfig (/<namespace>/<name>/jwks.json) that the JWKS server answers on every
// host, and that no issuer of another namespace may name.
func CanonicalRoute(path string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return namespace, name, ok && strings.HasPrefix(path, "/") && namespace != "" && name != "" && !strings.Contains(name, "/")
}
