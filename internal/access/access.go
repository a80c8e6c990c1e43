// Package access decides what an issued kubeconfig may do and renders it: the ceiling of
// rules a KubeconfigRequest may ask for, the kubeconfig file itself, and the
// cluster-admin bindings of a Cluster's administrators. No client here.
package access

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Ceiling is what no KubeconfigRequest may exceed: otherwise whoever may create one
// could grant themselves anything in every cluster.
type Ceiling struct {
	// ForbiddenVerbs are never granted (default: escalate, bind, impersonate).
	ForbiddenVerbs []string
	// AllowSecrets permits rules on secrets and on serviceaccounts/token (minting a token
	// for any service account in reach is worth as much as reading its secrets), and on
	// wildcard resources, which include both.
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
		if !c.AllowSecrets && len(r.NonResourceURLs) == 0 && coversCredentials(r) {
			problems = append(problems, fmt.Sprintf("rule %d: access to secrets or service account tokens is not allowed", i+1))
		}
	}
	return problems
}

// coversCredentials: the rule reaches core secrets or serviceaccounts/token (named, or
// through a wildcard).
func coversCredentials(r rbacv1.PolicyRule) bool {
	coreGroup := len(r.APIGroups) == 0 || slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")
	if !coreGroup {
		return false
	}
	for _, res := range r.Resources {
		switch {
		case res == "*", res == "secrets", strings.HasPrefix(res, "secrets/"),
			res == "serviceaccounts/token", res == "serviceaccounts/*":
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

// AdministratorLabel marks the cluster-admin bindings made for a Cluster's administrators;
// its value identifies the Cluster, so that two Clusters brought along for the same
// cluster keep their own administrators, and removing an administrator removes exactly
// its binding and nothing else.
const AdministratorLabel = "operator.kyma-project.io/administrators-of"

// AdministratorsOf is the AdministratorLabel value of a Cluster.
func AdministratorsOf(clusterNamespace, clusterName string) string {
	return shortHash(clusterNamespace + "/" + clusterName)
}

// AdminBindings are the ClusterRoleBindings that give each administrator of the Cluster
// identified by owner (AdministratorsOf) cluster-admin. An administrator is a user name as
// the cluster's authenticator reports it, e.g. an OIDC e-mail.
func AdminBindings(owner string, administrators []string) []rbacv1.ClusterRoleBinding {
	out := make([]rbacv1.ClusterRoleBinding, 0, len(administrators))
	for _, user := range administrators {
		out = append(out, rbacv1.ClusterRoleBinding{
			TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "trustplane-admin-" + owner + "-" + shortHash(user),
				Labels:      map[string]string{AdministratorLabel: owner, "app.kubernetes.io/managed-by": "trustplane"},
				Annotations: map[string]string{"operator.kyma-project.io/administrator": user}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})
	}
	return out
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:5])
}
