//go:build bench

package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/trustplane/trustplane/internal/testenv"
)

// requestCounts are the requests the API servers answered, by server, verb and resource
// ("management POST kubeconfigrequests/status"), from their apiserver_request_total.
// Requests for no resource (/metrics, /healthz, discovery) are left out: the bench's own
// counting is one of them.
type requestCounts map[string]int

var label = regexp.MustCompile(`(\w+)="([^"]*)"`)

// notServing are requests counted by neither side, being no part of serving a request:
// the API servers' own housekeeping (their identity leases and the endpoints of the
// kubernetes Service) and the bench's own watch of the requests it times (the manager's
// informers watch from before the count).
var notServing = map[string]bool{"leases": true, "endpoints": true, "endpointslices": true}

// kind is a request's "VERB resource[/subresource]" from its metric labels; "" for one
// for no resource or for one of notServing.
func kind(labels string) string {
	l := map[string]string{}
	for _, m := range label.FindAllStringSubmatch(labels, -1) {
		l[m[1]] = m[2]
	}
	if l["resource"] == "" || notServing[l["resource"]] ||
		(l["resource"] == "kubeconfigrequests" && (l["verb"] == "WATCH" || l["verb"] == "LIST")) {
		return ""
	}
	k := l["verb"] + " " + l["resource"]
	if l["subresource"] != "" {
		k += "/" + l["subresource"]
	}
	return k
}

// countRequests reads the requests each API server answered so far (envs: the
// management cluster's, then the target's), by kind, from one reading of each server's
// metrics.
func countRequests(ctx context.Context, envs []*testenv.Env) (requestCounts, error) {
	counts := requestCounts{}
	for i, env := range envs {
		server := [...]string{"management", "target"}[i]
		byKind, err := testenv.APIRequestsBy(ctx, env.Config, kind)
		if err != nil {
			return nil, err
		}
		for k, n := range byKind {
			counts[server+" "+k] = n
		}
	}
	return counts, nil
}

// minus is what c counted since before.
func (c requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, n := range c {
		if d := n - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// plus is c and d counted together.
func (c requestCounts) plus(d requestCounts) requestCounts {
	out := requestCounts{}
	for k, n := range c {
		out[k] += n
	}
	for k, n := range d {
		out[k] += n
	}
	return out
}

// perRequest is the total less the requests for namespaces, which a run makes once, not
// once per KubeconfigRequest.
func (c requestCounts) perRequest() int {
	total := 0
	for k, n := range c {
		if !strings.HasSuffix(k, " namespaces") {
			total += n
		}
	}
	return total
}

func (c requestCounts) total() int {
	total := 0
	for _, n := range c {
		total += n
	}
	return total
}

// breakdown is one line per server, verb and resource with the requests per
// KubeconfigRequest, largest first; kinds below 0.05 per request are summed as "other".
func (c requestCounts) breakdown(n int, who string) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if c[keys[i]] != c[keys[j]] {
			return c[keys[i]] > c[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %.2f per request\n", who, float64(c.total())/float64(n))
	other := 0
	var others []string
	for _, k := range keys {
		if per := float64(c[k]) / float64(n); per >= 0.05 {
			fmt.Fprintf(&b, "%s    %5.2f  %s\n", strings.Repeat(" ", len(who)-len(strings.TrimLeft(who, " "))), per, k)
		} else {
			other += c[k]
			others = append(others, fmt.Sprintf("%s %d", k, c[k]))
		}
	}
	if other > 0 {
		fmt.Fprintf(&b, "%s    %5.2f  other (%d requests: %s)\n", strings.Repeat(" ", len(who)-len(strings.TrimLeft(who, " "))), float64(other)/float64(n), other, strings.Join(others, ", "))
	}
	return b.String()
}
