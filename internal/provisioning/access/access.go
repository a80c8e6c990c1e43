// Package access decides what an issued kubeconfig may do and renders it: the ceiling of
// rules a KubeconfigRequest may ask for, the kubeconfig file itself, and the
// cluster-admin bindings of a Cluster's administrators. No client here.
package access

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiserverjwt "k8s.io/apiserver/pkg/authentication/token/jwt"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

// Ceiling is what no KubeconfigRequest may exceed: otherwise whoever may create one
// could grant themselves anything in every cluster.
//
// It is an allow-list of escalation routes: the routes Kubernetes' RBAC good practices
// name (https://kubernetes.io/docs/concepts/security/rbac-good-practices/) are refused
// unless the operator names them in Allow. A rule that reaches a route through a
// wildcard ("*" in apiGroups, resources or verbs, "*/sub", "res/*") is refused as if it
// named it: a wildcard grants whatever it matches, now and later.
//
// In certificates.k8s.io, where nearly every permission yields an identity (a node's, any
// user's) or trust, the routes are an allow-list of resources: what is not known to be
// harmless there — unknown resources and subresources, other verbs, wildcards — is the
// route certificates-other, beside the routes that name what they lead to.
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
	// AnyResource: every resource of every group (Groups and Resources unset), namespaced
	// ones only: a cluster-wide rule that names only known cluster-scoped resources
	// (clusterScoped) does not reach it.
	AnyResource bool
	// AllowOnly makes the route the allow-list of its Groups: it is reached by whatever a
	// rule grants there beyond these resources and verbs (the ones known to yield no
	// identity or trust) and beyond the other routes, which name what they reach. A
	// wildcard resource or verb always goes beyond: it grants what the group adds later.
	AllowOnly map[string][]string
}

var (
	workloadVerbs = []string{"create", "update", "patch"}
	// certificates is where identities and trust are made: certificate signing requests,
	// their approval and signing, pod certificates and trust bundles.
	certificates = []string{"certificates.k8s.io"}
)

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
	{Name: "csr-approval", Why: "approves certificate signing requests (client certificates for any identity)", Groups: certificates,
		Resources: []string{"certificatesigningrequests/approval", "signers"}, Verbs: []string{"update", "patch", "approve"}},
	{Name: "csr-signing", Why: "signs certificate signing requests", Groups: certificates,
		Resources: []string{"certificatesigningrequests/status", "signers"}, Verbs: []string{"update", "patch", "sign"}},
	// kube-controller-manager's csrapproving controller approves a kubelet client CSR
	// (signer kubernetes.io/kube-apiserver-client-kubelet) when a SubjectAccessReview says
	// its requester may create this subresource; the csrsigning controller then signs it.
	{Name: "csr-nodeclient", Why: "has kube-controller-manager approve the requester's CSRs for any node's client certificate (O=system:nodes, CN=system:node:<any>): it authenticates as that node",
		Groups: certificates, Resources: []string{"certificatesigningrequests/nodeclient"}, Verbs: []string{"create"}},
	{Name: "csr-selfnodeclient", Why: "has kube-controller-manager approve the requester's CSRs for a node client certificate (O=system:nodes) in the requester's own name",
		Groups: certificates, Resources: []string{"certificatesigningrequests/selfnodeclient"}, Verbs: []string{"create"}},
	{Name: "trust-bundles", Why: "publishes the trust anchors of any signer (attest), or adds, replaces or removes the ClusterTrustBundles pods and clients verify certificates against",
		Groups: certificates, Resources: []string{"clustertrustbundles", "signers"}, Verbs: []string{"create", "update", "patch", "delete", "deletecollection", "attest"}},
	{Name: "pod-certificates", Why: "requests certificates in the name of any pod, service account and node of the namespace (the checks of kubelet's requests apply only to nodes), or writes issued ones",
		Groups: certificates, Resources: []string{"podcertificaterequests", "podcertificaterequests/status"}, Verbs: workloadVerbs},
	{Name: "certificates-other", Why: "is more than certificates.k8s.io grants without yielding an identity or trust", Groups: certificates,
		AllowOnly: map[string][]string{
			"certificatesigningrequests": {"get", "list", "watch", "create"}, // a plain CSR still needs an approver
			"clustertrustbundles":        {"get", "list", "watch"},
			"podcertificaterequests":     {"get", "list", "watch"},
		}},
	{Name: "admission-webhooks", Why: "reads or changes every object sent to the API server, or switches admission control off", Groups: []string{"admissionregistration.k8s.io"},
		Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations", "validatingadmissionpolicies", "validatingadmissionpolicybindings",
			"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"}, Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}},
	{Name: "persistentvolumes", Why: "creates hostPath volumes, i.e. node filesystem access", Groups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: workloadVerbs},
	{Name: "crds", Why: "sets a CRD's conversion webhook, which sees and may rewrite every stored object of that kind, or deletes every object of a kind",
		Groups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions", "customresourcedefinitions/status"}, Verbs: writeVerbs},
	{Name: "apiservices", Why: "serves an API group from a service of its choosing, which sees every request (and its credentials' identity) for that group",
		Groups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices", "apiservices/status"}, Verbs: writeVerbs},
	{Name: "namespaces", Why: "relabels a namespace's Pod Security level (then runs privileged pods: root on the node), makes namespaces outside it, or deletes a namespace and everything in it",
		Groups: []string{""}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"}, Verbs: writeVerbs},
	{Name: "endpoints", Why: "points a Service's traffic, the API server's own included, at addresses of its choosing",
		Groups: []string{"", "discovery.k8s.io"}, Resources: []string{"endpoints", "endpointslices"}, Verbs: writeVerbs},
	{Name: "proxies", Why: "reaches any Service or pod through the API server's proxy, past network policies and with the API server's address",
		Groups: []string{""}, Resources: []string{"services/proxy", "pods/proxy"}},
	{Name: "protected-namespace-writes", Why: "changes what the cluster's own components run and read (in kube-system; on EKS the aws-auth ConfigMap maps IAM identities to system:masters) or the issued credentials' ServiceAccounts",
		AnyResource: true, Verbs: writeVerbs, Protected: true},
}

// workloadSecretsWhy is the problem of a rule that writes workloads where secrets are
// refused: a pod may mount any Secret of its namespace as a volume, so creating one (or
// changing a pod template) reads secrets.
const workloadSecretsWhy = "runs pods that may mount any Secret of the namespace as a volume, which reads secrets"

// clusterScoped are the built-in resources that live outside every namespace: a
// cluster-wide rule naming only these writes nothing in a protected namespace.
var clusterScoped = []string{"nodes", "namespaces", "persistentvolumes", "componentstatuses", "clusterroles", "clusterrolebindings",
	"customresourcedefinitions", "apiservices", "mutatingwebhookconfigurations", "validatingwebhookconfigurations", "validatingadmissionpolicies",
	"validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings", "storageclasses", "csidrivers", "csinodes",
	"volumeattachments", "volumeattributesclasses", "priorityclasses", "runtimeclasses", "ingressclasses", "certificatesigningrequests",
	"clustertrustbundles", "flowschemas", "prioritylevelconfigurations", "tokenreviews", "subjectaccessreviews", "selfsubjectaccessreviews",
	"selfsubjectrulesreviews", "selfsubjectreviews", "ipaddresses", "servicecidrs", "deviceclasses", "resourceslices"}

// writeVerbs are the verbs that change objects.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

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
			if c.allows(route.Name) || (route.Protected && !protected) {
				continue
			}
			what, ok := reach(r, route)
			if !ok || (route.AnyResource && namespace == "" && onlyClusterScoped(r)) {
				continue
			}
			where := ""
			if route.Protected {
				where = " in namespace " + namespace
				if namespace == "" {
					where = " cluster-wide (which includes " + strings.Join(c.ProtectedNamespaces, ", ") + ")"
				}
			}
			problems = append(problems, fmt.Sprintf("rule %d reaches %s%s, which %s: not allowed (route %q)", i+1, what, where, route.why(), route.Name))
		}
		if !c.allows("secrets") && reaches(r, workloads()) && !reaches(r, routeNamed("secrets")) {
			problems = append(problems, fmt.Sprintf("rule %d reaches %s, which %s: not allowed (route %q)", i+1, routeWhat(workloads()), workloadSecretsWhy, "secrets"))
		}
	}
	return problems
}

// PodSecurity returns, for each rule of a Role in namespace that writes workloads, one
// line saying why it may not: unless the operator allows the route "workloads", pods run
// only where the API server enforces Pod Security "baseline" or "restricted" (enforce,
// the namespace's operatorv1alpha1.PodSecurityEnforceLabel), which keeps them off the host (no privileged
// containers, host namespaces or hostPath volumes); and not where the ceiling lets the
// namespace's labels be changed (route "namespaces"). Protected namespaces and
// cluster-wide rules are Check's.
func (c Ceiling) PodSecurity(rules []rbacv1.PolicyRule, namespace, enforce string) []string {
	if c.allows("workloads") || namespace == "" {
		return nil
	}
	var problems []string
	for i, r := range rules {
		if !reaches(r, workloads()) {
			continue
		}
		switch {
		case c.allows("namespaces"):
			problems = append(problems, fmt.Sprintf("rule %d reaches %s in namespace %s, whose Pod Security level may be changed (route \"namespaces\" is allowed): not allowed (route %q)",
				i+1, routeWhat(workloads()), namespace, "workloads"))
		case enforce != "baseline" && enforce != "restricted":
			problems = append(problems, fmt.Sprintf("rule %d reaches %s in namespace %s, which does not enforce Pod Security baseline or restricted (%s=%q): its pods could be privileged, share the host's namespaces or mount its filesystem: not allowed (route %q)",
				i+1, routeWhat(workloads()), namespace, operatorv1alpha1.PodSecurityEnforceLabel, enforce, "workloads"))
		}
	}
	return problems
}

// WritesWorkloads says whether any rule creates or changes workloads: whether PodSecurity
// needs the namespace's level.
func WritesWorkloads(rules []rbacv1.PolicyRule) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return reaches(r, workloads()) })
}

func workloads() Route { return routeNamed("workloads") }

func routeNamed(name string) Route {
	i := slices.IndexFunc(Routes, func(r Route) bool { return r.Name == name })
	return Routes[i]
}

// onlyClusterScoped says whether every resource rule r names is a known cluster-scoped one
// (never through a wildcard).
func onlyClusterScoped(r rbacv1.PolicyRule) bool {
	return !slices.ContainsFunc(r.Resources, func(res string) bool {
		base, _, _ := strings.Cut(res, "/")
		return !slices.Contains(clusterScoped, base)
	})
}

// reach is what rule r grants of route, worded for the denial; false: nothing.
func reach(r rbacv1.PolicyRule, route Route) (string, bool) {
	if route.AllowOnly != nil {
		return beyondAllowList(r, route)
	}
	return routeWhat(route), reaches(r, route)
}

// why is the route's Why, and for an allow-list what it lets through.
func (route Route) why() string {
	if route.AllowOnly == nil {
		return route.Why
	}
	var allowed []string
	for _, res := range slices.Sorted(maps.Keys(route.AllowOnly)) {
		allowed = append(allowed, strings.Join(route.AllowOnly[res], "/")+" on "+res)
	}
	return route.Why + " (only " + strings.Join(allowed, ", ") + " pass; a wildcard also grants what the group adds later)"
}

// beyondAllowList is every resource and verb pair rule r grants in an allow-list route's
// groups that neither its AllowOnly nor another route names.
func beyondAllowList(r rbacv1.PolicyRule, route Route) (string, bool) {
	var beyond []string
	for _, group := range route.Groups {
		via, ok := reachesGroup(r, group)
		if !ok {
			continue
		}
		var pairs []string
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				v = strings.ToLower(v)
				known := !strings.Contains(res, "*") && v != "*" && (slices.Contains(route.AllowOnly[res], v) || namedByARoute(group, res, v))
				if !known {
					pairs = append(pairs, v+" on "+res)
				}
			}
		}
		if len(pairs) > 0 {
			beyond = append(beyond, strings.Join(pairs, ", ")+" in "+group+via)
		}
	}
	return strings.Join(beyond, "; "), len(beyond) > 0
}

// reachesGroup says whether rule r grants anything in group, and how if through "*".
func reachesGroup(r rbacv1.PolicyRule, group string) (via string, ok bool) {
	switch {
	case slices.Contains(r.APIGroups, group) || (len(r.APIGroups) == 0 && group == ""):
		return "", true
	case slices.Contains(r.APIGroups, "*"):
		return ` (through apiGroups "*")`, true
	}
	return "", false
}

// namedByARoute says whether a route other than an allow-list names verb on resource in
// group exactly: the operator allows it by that route's name.
func namedByARoute(group, resource, verb string) bool {
	return slices.ContainsFunc(Routes, func(o Route) bool {
		return o.AllowOnly == nil && slices.Contains(o.Groups, group) && slices.Contains(o.Resources, resource) && (len(o.Verbs) == 0 || slices.Contains(o.Verbs, verb))
	})
}

func routeWhat(route Route) string {
	what := strings.Join(route.Resources, ", ")
	if route.AnyResource {
		what = "any namespaced resource"
	}
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
	if !route.AnyResource && !slices.ContainsFunc(groups, func(g string) bool { return g == "*" || slices.Contains(route.Groups, g) }) {
		return false
	}
	if len(route.Verbs) > 0 && !slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "*" || slices.Contains(route.Verbs, strings.ToLower(v)) }) {
		return false
	}
	if route.AnyResource {
		return len(r.Resources) > 0
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

// Endpoint is where an issued kubeconfig reaches its cluster and what it trusts there: as
// the operator's own connection to the target has them, so that the kubeconfig works
// wherever that connection does.
type Endpoint struct {
	// Server is the API server's URL.
	Server string
	// CAData is the CA bundle (PEM) the server's certificate is verified against.
	CAData []byte
	// TLSServerName is the name the certificate is verified for, when not the server's host.
	TLSServerName string
}

// Kubeconfig renders a kubeconfig for a bearer token against the endpoint.
func Kubeconfig(clusterName string, at Endpoint, user, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: at.Server, CertificateAuthorityData: at.CAData, TLSServerName: at.TLSServerName}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user}
	cfg.CurrentContext = clusterName
	return clientcmd.Write(*cfg)
}

// tokenAlgorithms are the algorithms a kube-apiserver signs service-account tokens with.
var tokenAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512}

// TokenClaims are what trustplane reads of a service-account token it had issued: the
// Secret it is bound to and its credential ID. They are read, not verified: they say
// which token binding to keep and how kube-apiserver's audit log names the token, never
// what to trust.
type TokenClaims struct {
	// BoundSecret is the Secret the token is bound to (its kubernetes.io claim).
	BoundSecret string
	// CredentialID is "JTI=<jti>", as kube-apiserver names the token in its audit log
	// (authentication.kubernetes.io/credential-id); "" for a token without a jti.
	CredentialID string
}

// ClaimsOf reads token's claims; zero for what is not a service-account token.
func ClaimsOf(token string) TokenClaims {
	parsed, err := jwt.ParseSigned(token, tokenAlgorithms)
	if err != nil {
		return TokenClaims{}
	}
	var claims struct {
		ID         string `json:"jti"`
		Kubernetes struct {
			Secret struct {
				Name string `json:"name"`
			} `json:"secret"`
		} `json:"kubernetes.io"`
	}
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
		return TokenClaims{}
	}
	return TokenClaims{BoundSecret: claims.Kubernetes.Secret.Name, CredentialID: apiserverjwt.CredentialIDForJTI(claims.ID)}
}

// KubeconfigClaims are the claims of the token of a kubeconfig Kubeconfig rendered; zero
// when it holds no such token.
func KubeconfigClaims(kubeconfig []byte) TokenClaims {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return TokenClaims{}
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.AuthInfos[kctx.AuthInfo] == nil {
		return TokenClaims{}
	}
	return ClaimsOf(cfg.AuthInfos[kctx.AuthInfo].Token)
}

// BoundSecretOf is the name of the Secret the token of a kubeconfig Kubeconfig rendered is
// bound to, as the API server that issued the token wrote it; "" when the kubeconfig
// holds no such token.
func BoundSecretOf(kubeconfig []byte) string { return KubeconfigClaims(kubeconfig).BoundSecret }

// EndpointOf is the endpoint of a kubeconfig Kubeconfig rendered: that of its current
// context's cluster.
func EndpointOf(kubeconfig []byte) (Endpoint, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return Endpoint{}, err
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil || cfg.Clusters[kctx.Cluster] == nil {
		return Endpoint{}, fmt.Errorf("current-context %q names no cluster", cfg.CurrentContext)
	}
	c := cfg.Clusters[kctx.Cluster]
	return Endpoint{Server: c.Server, CAData: c.CertificateAuthorityData, TLSServerName: c.TLSServerName}, nil
}

// Moved says how the endpoint now differs from e, as an issued kubeconfig has it, in words
// that name at most the servers' hosts (a server is a tenant's choice, maybe an internal
// URL, and a CA bundle says nothing a reader needs); "" when it does not.
func (e Endpoint) Moved(now Endpoint) string {
	var changes []string
	switch was, is := hostOf(e.Server), hostOf(now.Server); {
	case was != is:
		changes = append(changes, fmt.Sprintf("the server moved from %s to %s", was, is))
	case e.Server != now.Server:
		changes = append(changes, "the server's URL at "+is+" changed")
	}
	if !bytes.Equal(e.CAData, now.CAData) {
		changes = append(changes, "the CA bundle changed")
	}
	if e.TLSServerName != now.TLSServerName {
		changes = append(changes, "the TLS server name changed")
	}
	return strings.Join(changes, ", ")
}

// hostOf is the host[:port] of a server URL; "" for one without.
func hostOf(server string) string {
	if u, err := url.Parse(server); err == nil {
		return u.Host
	}
	return ""
}

// AdministratorsOf is the operatorv1alpha1.AdministratorLabel value of a Cluster.
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
				Labels:      map[string]string{operatorv1alpha1.AdministratorLabel: owner, "app.kubernetes.io/managed-by": "trustplane"},
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
