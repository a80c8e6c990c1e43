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
//
// It is an allow-list of escalation routes: the routes Kubernetes' RBAC good practices
// name (https://kubernetes.io/docs/concepts/security/rbac-good-practices/) are refused
// unless the operator names them in Allow. A rule that reaches a route through a
// wildcard ("*" in apiGroups, resources or verbs, "*/sub", "res/*") is refused as if it
// named it: a wildcard grants whatever it matches, now and later.
type Ceiling struct {
	// ForbiddenVerbs are never granted, on any resource (default: escalate, bind,
	// impersonate).
	ForbiddenVerbs []string
	// AllowSecrets permits the routes secrets and serviceaccount-token (minting a token
	// for any service account in reach is worth as much as reading its secrets).
	AllowSecrets bool
	// AllowWildcardVerbs permits "*" in verbs.
	AllowWildcardVerbs bool
	// Allow names the routes (Routes) the operator lets through.
	Allow []string
	// ProtectedNamespaces are the namespaces in which the pod routes (exec, attach,
	// port-forward, ephemeral containers, workload writes) are refused: kube-system, and
	// the namespace holding the issued credentials' ServiceAccounts (the controller adds
	// it), where a pod could mount any other request's ServiceAccount.
	ProtectedNamespaces []string
}

// Route is a way to more rights than a rule names: a set of verbs on a set of
// resources, anywhere or (Protected) only in the protected namespaces.
type Route struct {
	// Name is how the operator allows it (--kubeconfig-allowed-routes) and how a denial
	// names it.
	Name string
	// Why says what it leads to, for the denial message.
	Why string
	// Groups and Resources it is reached through ("" is the core group); Verbs empty:
	// any verb.
	Groups    []string
	Resources []string
	Verbs     []string
	// Protected: only in the protected namespaces (and cluster-wide rules, which reach
	// them).
	Protected bool
}

var workloadVerbs = []string{"create", "update", "patch"}

// Routes are the escalation routes the ceiling refuses unless allowed.
var Routes = []Route{
	{Name: "secrets", Why: "reads or mints credentials of every service account in reach", Groups: []string{""}, Resources: []string{"secrets"}},
	{Name: "serviceaccount-token", Why: "mints tokens of any service account in reach", Groups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
	{Name: "pods-exec", Why: "runs commands in pods that hold other identities", Groups: []string{""}, Resources: []string{"pods/exec"}, Protected: true},
	{Name: "pods-attach", Why: "attaches to pods that hold other identities", Groups: []string{""}, Resources: []string{"pods/attach"}, Protected: true},
	{Name: "pods-portforward", Why: "reaches services of pods that hold other identities", Groups: []string{""}, Resources: []string{"pods/portforward"}, Protected: true},
	{Name: "pods-ephemeralcontainers", Why: "adds containers to running pods that hold other identities", Groups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: workloadVerbs, Protected: true},
	{Name: "workloads", Why: "runs a pod that mounts any service account of the namespace", Groups: []string{"", "apps", "batch"},
		Resources: []string{"pods", "replicationcontrollers", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs"}, Verbs: workloadVerbs, Protected: true},
	{Name: "nodes-proxy", Why: "reaches the kubelet API (exec in any pod on the node, bypassing audit and admission)", Groups: []string{""}, Resources: []string{"nodes/proxy"}},
	{Name: "csr-approval", Why: "approves certificate signing requests (client certificates for any identity)", Groups: []string{"certificates.k8s.io"},
		Resources: []string{"certificatesigningrequests/approval", "signers"}, Verbs: []string{"update", "patch", "approve"}},
	{Name: "csr-signing", Why: "signs certificate signing requests", Groups: []string{"certificates.k8s.io"},
		Resources: []string{"certificatesigningrequests/status", "signers"}, Verbs: []string{"update", "patch", "sign"}},
	{Name: "admission-webhooks", Why: "reads or changes every object sent to the API server, or switches admission control off", Groups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations", "validatingadmissionpolicies", "validatingadmissionpolicybindings",
			"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"}, Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}},
	{Name: "persistentvolumes", Why: "creates hostPath volumes, i.e. node filesystem access", Groups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: workloadVerbs},
}

// DefaultCeiling forbids privilege escalation, secrets and every route in Routes.
func DefaultCeiling() Ceiling {
	return Ceiling{ForbiddenVerbs: []string{"escalate", "bind", "impersonate"}, ProtectedNamespaces: []string{"kube-system"}}
}

// RouteNames are the names of Routes, for flag validation.
func RouteNames() []string {
	names := make([]string, len(Routes))
	for i, r := range Routes {
		names[i] = r.Name
	}
	return names
}

// Validate says what is wrong with the ceiling's settings, in one line.
func (c Ceiling) Validate() error {
	for _, a := range c.Allow {
		if !slices.Contains(RouteNames(), a) {
			return fmt.Errorf("route %q is unknown: want one of %s", a, strings.Join(RouteNames(), ", "))
		}
	}
	return nil
}

func (c Ceiling) allows(route string) bool {
	if c.AllowSecrets && (route == "secrets" || route == "serviceaccount-token") {
		return true
	}
	return slices.Contains(c.Allow, route)
}

// Check returns, for each rule that exceeds the ceiling, one line saying why. namespace is
// where the rules apply (a Role's namespace); empty: cluster-wide (a ClusterRole), which
// reaches every namespace, the protected ones too.
func (c Ceiling) Check(rules []rbacv1.PolicyRule, namespace string) []string {
	protected := namespace == "" || slices.Contains(c.ProtectedNamespaces, namespace)
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
		if len(r.Resources) == 0 {
			continue // a non-resource rule (nonResourceURLs) reaches no route
		}
		for _, route := range Routes {
			if c.allows(route.Name) || (route.Protected && !protected) || !reaches(r, route) {
				continue
			}
			where := ""
			if route.Protected {
				where = " in namespace " + namespace
				if namespace == "" {
					where = " cluster-wide (which includes " + strings.Join(c.ProtectedNamespaces, ", ") + ")"
				}
			}
			problems = append(problems, fmt.Sprintf("rule %d reaches %s%s, which %s: not allowed (route %q)", i+1, routeWhat(route), where, route.Why, route.Name))
		}
	}
	return problems
}

func routeWhat(route Route) string {
	what := strings.Join(route.Resources, ", ")
	if len(route.Verbs) > 0 {
		what = strings.Join(route.Verbs, "/") + " on " + what
	}
	return what
}

// reaches says whether rule r grants any verb of route on any of its resources, wildcards
// included (matching as RBAC matches, and "res/*" as well, to be safe).
func reaches(r rbacv1.PolicyRule, route Route) bool {
	// An empty apiGroups matches nothing in RBAC; it is read as the core group here, as a
	// mistake to refuse rather than to pass.
	groups := r.APIGroups
	if len(groups) == 0 {
		groups = []string{""}
	}
	if !slices.ContainsFunc(groups, func(g string) bool { return g == "*" || slices.Contains(route.Groups, g) }) {
		return false
	}
	if len(route.Verbs) > 0 && !slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "*" || slices.Contains(route.Verbs, strings.ToLower(v)) }) {
		return false
	}
	return slices.ContainsFunc(route.Resources, func(want string) bool { return resourceMatches(r.Resources, want) })
}

func resourceMatches(granted []string, want string) bool {
	base, sub, isSub := strings.Cut(want, "/")
	for _, g := range granted {
		switch {
		case g == "*", g == want:
			return true
		case isSub && (g == "*/"+sub || g == base+"/*"):
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
