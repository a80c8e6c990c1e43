// Package access decides what an issued kubeconfig may do and renders it: the ceiling of
// rules a KubeconfigRequest may ask for, and the kubeconfig file itself. No client here.
package access

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Ceiling is what no KubeconfigRequest may exceed: otherwise whoever may create one
// could grant themselves anything in every cluster.
type Ceiling struct {
	// ForbiddenVerbs are never granted (default: escalate, bind, impersonate).
	ForbiddenVerbs []string
	// AllowSecrets permits rules on secrets (and wildcard resources, which include them).
	AllowSecrets bool
	// AllowWildcardVerbs permits "*" in verbs.
	AllowWildcardVerbs bool
}

// DefaultCeiling forbids privilege escalation and secrets.
func DefaultCeiling() Ceiling {
	return Ceiling{ForbiddenVerbs: []string{"escalate", "bind", "impersonate"}}
}

// Check returns, for each rule that exceeds the ceiling, one line saying why.
func (c Ceiling) Check(rules []rbacv1.PolicyRule) []string {
	var problems []string
	for i, r := range rules {
		for _, v := range r.Verbs {
			if slices.Contains(c.ForbiddenVerbs, strings.ToLower(v)) {
				problems = append(problems, fmt.Sprintf("rule %d: verb %q is not granted by this operator", i+1, v))
			}
			if v == "*" && !c.AllowWildcardVerbs {
				problems = append(problems, fmt.Sprintf("rule %d: verb \"*\" would include %s", i+1, strings.Join(c.ForbiddenVerbs, ", ")))
			}
		}
		if !c.AllowSecrets && len(r.NonResourceURLs) == 0 && coversSecrets(r) {
			problems = append(problems, fmt.Sprintf("rule %d: access to secrets is not allowed", i+1))
		}
	}
	return problems
}

// coversSecrets: the rule reaches core secrets (named, or through a wildcard).
func coversSecrets(r rbacv1.PolicyRule) bool {
	coreGroup := len(r.APIGroups) == 0 || slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")
	if !coreGroup {
		return false
	}
	for _, res := range r.Resources {
		if res == "*" || res == "secrets" || strings.HasPrefix(res, "secrets/") {
			return true
		}
	}
	return false
}

// Kubeconfig renders a kubeconfig for a bearer token against server, trusting caData.
func Kubeconfig(clusterName, server string, caData []byte, user, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user}
	cfg.CurrentContext = clusterName
	return clientcmd.Write(*cfg)
}
