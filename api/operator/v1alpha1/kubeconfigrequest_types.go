package v1alpha1

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations that act on a KubeconfigRequest; values are the strings "true"/"false".
const (
	// RotateAnnotation "true" issues a new credential now (then it is reset to "false").
	RotateAnnotation = "operator.kyma-project.io/rotate"
	// RevokeAnnotation "true" invalidates the credential at once and clears the status.
	RevokeAnnotation = "operator.kyma-project.io/revoke"
	// RevokeCredentialAnnotation names one issued credential by its ID (an id of
	// status.credentials: "JTI=<the token's jti>", as kube-apiserver's audit log names
	// it): its token binding in the target is deleted, and with it its token; the others
	// stay valid. When it is the credential status.kubeconfig holds, a new kubeconfig is
	// issued. The annotation may stay: status.lastHandledRevokeCredential records that it
	// was handled, and naming another ID revokes that one.
	RevokeCredentialAnnotation = "operator.kyma-project.io/revoke-credential"
	// ClusterAtCreationAnnotation is the Cluster ("namespace/name") the request named when it
	// was created, written by the admission policy trustplane-kubeconfig-requests
	// (config/policy/kubeconfig-requests.yaml) together with the controller's finalizer, and
	// changed by nobody but the manager. Until the controller first stores the request's
	// status (then status.grantedIn is the record), it is where the request's grants may
	// live.
	ClusterAtCreationAnnotation = "kubeconfig.trustplane.io/cluster-at-creation"
)

// What the Kubeconfig operator makes for a KubeconfigRequest in a target cluster (a
// ServiceAccount and token bindings in KubeconfigTargetNamespace, roles and bindings) is
// found by these labels; KubeconfigRequestAnnotation names the request in full.
const (
	// KubeconfigTargetNamespace holds the ServiceAccounts and token bindings in target
	// clusters.
	KubeconfigTargetNamespace = "trustplane-kubeconfigs"
	// KubeconfigRequestLabel is the request's target name (status.targetName): what the
	// controller deletes for a request it finds by this label, in every namespace.
	KubeconfigRequestLabel = "kubeconfig.trustplane.io/request"
	// KubeconfigRequestNamespaceLabel, KubeconfigRequestNameLabel and
	// KubeconfigRequestUIDLabel say which request an object serves (the name only where it
	// fits a label value); the UID tells an object whose request is gone.
	KubeconfigRequestNamespaceLabel = "kubeconfig.trustplane.io/request-namespace"
	KubeconfigRequestNameLabel      = "kubeconfig.trustplane.io/request-name"
	KubeconfigRequestUIDLabel       = "kubeconfig.trustplane.io/request-uid"
	// KubeconfigClusterUIDLabel is the UID of the Cluster the object was granted through:
	// what that Cluster's sweep of objects whose request is gone looks at, and nothing of
	// another Cluster (or another management cluster) reaching the same API server.
	KubeconfigClusterUIDLabel = "kubeconfig.trustplane.io/cluster-uid"
	// KubeconfigRequestAnnotation is "<namespace>/<name>" of the request.
	KubeconfigRequestAnnotation = "kubeconfig.trustplane.io/request"
)

// PolicyRule is an RBAC rule for the issued credential. API groups carry no version and
// resources are lower-case plural names, as in RBAC itself.
// +kubebuilder:validation:XValidation:rule="!has(self.apiGroups) || self.apiGroups.all(g, !g.contains('/'))",message="apiGroups are API groups without a version, e.g. operator.kyma-project.io, not operator.kyma-project.io/v1alpha1"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || self.resources.all(r, r == r.lowerAscii())",message="resources are lower-case plural resource names, e.g. secrets, not Secret"
type PolicyRule struct {
	// apiGroups of the resources; "" is the core group.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	APIGroups []string `json:"apiGroups,omitempty"`
	// resources, lower-case plural (e.g. "deployments", "pods/log").
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Resources []string `json:"resources,omitempty"`
	// resourceNames restricts the rule to named objects.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	ResourceNames []string `json:"resourceNames,omitempty"`
	// verbs allowed (get, list, watch, create, update, patch, delete, ...).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:MinItems=1
	Verbs []string `json:"verbs"`
	// nonResourceURLs (cluster rules only), e.g. "/healthz".
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	NonResourceURLs []string `json:"nonResourceURLs,omitempty"`
}

// ClusterRoleSpec is the cluster-wide access of the credential.
type ClusterRoleSpec struct {
	// rules of the ClusterRole created in the target cluster.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:MinItems=1
	Rules []PolicyRule `json:"rules"`
}

// RoleSpec is the namespaced access of the credential.
type RoleSpec struct {
	// namespace of the Role in the target cluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// rules of the Role.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:MinItems=1
	Rules []PolicyRule `json:"rules"`
}

// KubeconfigRequestSpec asks for an expiring kubeconfig with exactly these rights.
// +kubebuilder:validation:XValidation:rule="has(self.clusterRole) || has(self.role)",message="a KubeconfigRequest needs clusterRole or role rules"
type KubeconfigRequestSpec struct {
	// cluster is the name of the Cluster the kubeconfig is for, in clusterNamespace.
	// Changing it (or clusterNamespace) withdraws everything granted in the previous
	// cluster (ServiceAccount, roles, bindings, tokens) before the new one is served.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Cluster string `json:"cluster"`
	// clusterNamespace is the namespace of the Cluster; empty: this request's namespace.
	// A Cluster in another namespace serves the request only if its
	// spec.kubeconfigRequestNamespaces lists this request's namespace; otherwise the
	// request is Ready=False, reason Denied.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	ClusterNamespace string `json:"clusterNamespace,omitempty"`
	// clusterRole grants cluster-wide rules. Removing it deletes the ClusterRole and
	// ClusterRoleBinding from the target cluster.
	// +optional
	ClusterRole *ClusterRoleSpec `json:"clusterRole,omitempty"`
	// role grants rules in one namespace. Removing it, or changing its namespace, deletes
	// the Role and RoleBinding the request created in any other namespace.
	// +optional
	Role *RoleSpec `json:"role,omitempty"`
	// expiration is the requested lifetime in seconds, at least 600 (10 minutes) and at
	// most 31536000 (one year); the target API server may shorten it. The operator's
	// --kubeconfig-max-expiration (default 30 days) refuses longer ones with
	// Stalled=True, reason ExpirationTooLong: that limit is the operator's setting, which
	// the CRD cannot know, so admission enforces only the absolute one.
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=600
	// +kubebuilder:validation:Maximum=31536000
	// +kubebuilder:validation:XValidation:rule="self >= 600 && self <= 31536000",message="expiration is a lifetime in seconds from 600 to 31536000 (one year), e.g. 3600"
	// +optional
	Expiration int64 `json:"expiration,omitempty"`
}

// KubeconfigRequestStatus is the issued credential.
type KubeconfigRequestStatus struct {
	// conditions: Ready (reason Issued; False with Revoked on request); Reconciling=True
	// while waiting for the Cluster (ClusterNotReady) or retrying (TargetUnreachable,
	// RevokePending, WithdrawalPending, ...); Stalled=True when only a change can help
	// (Denied: over the ceiling or not granted by the Cluster; ExpirationTooLong;
	// ShootMismatch: the Cluster's status.shootName or its Shoot's owner labels are not
	// that Cluster's; SecretNameTaken; a write refused for good). observedGeneration follows only generations that became Ready or Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the last generation fully reconciled (Ready) or found stalled;
	// while a newer one is in progress (Reconciling) it lags behind metadata.generation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// expirationTimestamp is when the issued token expires (the server's answer).
	// +optional
	ExpirationTimestamp *metav1.Time `json:"expirationTimestamp,omitempty"`
	// kubeconfig is the issued kubeconfig, base64-encoded (as the seed specifies). The same
	// is in the Secret named by secretName. When the Cluster's server, CA bundle or TLS
	// server name changes, a new one is issued (a TargetChanged event says so); until then
	// Ready is False.
	// +optional
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// secretName is the Secret (this namespace) holding the kubeconfig under "kubeconfig".
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// issuedAt is when the current credential was issued.
	// +optional
	IssuedAt *metav1.Time `json:"issuedAt,omitempty"`
	// grantedIn is the Cluster in which this request's ServiceAccount, roles, bindings and
	// tokens live: what is withdrawn from there when spec.cluster changes, the Cluster stops
	// granting the request's namespace, on revoke and on deletion. Empty: nothing granted.
	// +optional
	GrantedIn *ClusterReference `json:"grantedIn,omitempty"`
	// targetName is the name of this request's ServiceAccount (in the target's namespace
	// trustplane-kubeconfigs), roles and bindings in the target cluster, and the value of
	// their label kubeconfig.trustplane.io/request: "kcr-", the namespace and name (cut
	// short), and 16 characters (80 bits) of the SHA-256 of "<namespace>/<name>". A request
	// an earlier version served keeps its shorter name (a 32-bit hash): its token names
	// that ServiceAccount. Nothing else is honoured: a value that is neither of the
	// request's own names is replaced.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	TargetName string `json:"targetName,omitempty"`
	// lastHandledReconcileAt is the value of the annotation
	// reconcile.trustplane.io/requestedAt that the last reconcile handled: equal to the
	// annotation once a reconcile asked for with it (`trustplane reconcile`) has run.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
	// credentials are the credentials issued for this request whose tokens are still
	// valid, newest first: the one status.kubeconfig holds and at most two before it (the
	// one it replaced, until that expires; one published only by a status write that was
	// lost). Each names its token by ID, never the token itself.
	// +listType=map
	// +listMapKey=binding
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Credentials []IssuedCredential `json:"credentials,omitempty"`
	// lastHandledRevokeCredential is the value of the annotation
	// operator.kyma-project.io/revoke-credential that the controller last acted on.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	LastHandledRevokeCredential string `json:"lastHandledRevokeCredential,omitempty"`
}

// MaxLiveCredentials is how many credentials of one request are valid at once at most:
// the current one, the one it replaced (until it expires), and one a lost status write
// may have published. kyma-environment-broker caps a runtime's bindings at 10; here
// rotation replaces credentials, so three suffice.
const MaxLiveCredentials = 3

// IssuedCredential is one credential issued for a KubeconfigRequest: its token's ID and
// what it is bound to, never the token.
type IssuedCredential struct {
	// id is the token's credential ID as kube-apiserver's audit log names it:
	// "JTI=<the token's jti claim>", the user's extra
	// authentication.kubernetes.io/credential-id of every request the token
	// authenticates, and the annotation authentication.kubernetes.io/issued-credential-id
	// of the TokenRequest that issued it. Empty when the target's API server issues
	// tokens without a jti.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	ID string `json:"id,omitempty"`
	// binding is the Secret in the target's trustplane-kubeconfigs namespace the token is
	// bound to: deleting it revokes the token.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Binding string `json:"binding"`
	// issuedAt is when the credential was issued.
	IssuedAt metav1.Time `json:"issuedAt"`
	// expirationTimestamp is when its token expires.
	ExpirationTimestamp metav1.Time `json:"expirationTimestamp"`
}

// ClusterReference names a Cluster.
type ClusterReference struct {
	// namespace of the Cluster.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the Cluster.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Key is the Cluster's namespace and name.
func (c ClusterReference) Key() types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

// ClusterKey is the namespace and name of the Cluster the request names.
func (r *KubeconfigRequest) ClusterKey() types.NamespacedName {
	ns := r.Spec.ClusterNamespace
	if ns == "" {
		ns = r.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: r.Spec.Cluster}
}

// ClusterKeys are the Clusters the request concerns: the one it names and, when it
// differs, the one its grants still live in (until they are withdrawn).
func (r *KubeconfigRequest) ClusterKeys() []types.NamespacedName {
	keys := []types.NamespacedName{r.ClusterKey()}
	if recorded, ok := r.RecordedCluster(); ok && recorded != keys[0] {
		keys = append(keys, recorded)
	}
	return keys
}

// RecordedCluster is the Cluster the request's record says its grants may live in:
// status.grantedIn, or, before any status is stored, the one admission recorded at its
// creation (ClusterAtCreation).
func (r *KubeconfigRequest) RecordedCluster() (types.NamespacedName, bool) {
	if g := r.Status.GrantedIn; g != nil {
		return g.Key(), true
	}
	return r.ClusterAtCreation()
}

// ClusterAtCreation is the Cluster admission recorded when the request was created
// (ClusterAtCreationAnnotation), as long as it is the record of where the request's grants
// may live: until a status is stored, after which status.grantedIn says so.
func (r *KubeconfigRequest) ClusterAtCreation() (types.NamespacedName, bool) {
	if r.StatusStored() {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(r.Annotations[ClusterAtCreationAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// StatusStored says whether the request carries a status the controller wrote: every
// reconcile ends with one, conditions included.
func (r *KubeconfigRequest) StatusStored() bool {
	s := &r.Status
	return len(s.Conditions) > 0 || s.GrantedIn != nil || s.IssuedAt != nil || s.ObservedGeneration != 0
}

// GrantsKubeconfigRequestsFrom says whether KubeconfigRequests in namespace may name the
// Cluster: those in its own namespace always, others only when listed in
// spec.kubeconfigRequestNamespaces.
func (c *Cluster) GrantsKubeconfigRequestsFrom(namespace string) bool {
	return namespace == c.Namespace || slices.Contains(c.Spec.KubeconfigRequestNamespaces, namespace)
}

// KubeconfigRequest is an expiring, RBAC-scoped kubeconfig for a Cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=kcr,categories=trustplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Cluster Namespace",type=string,JSONPath=`.spec.clusterNamespace`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expirationTimestamp`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KubeconfigRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested access.
	Spec KubeconfigRequestSpec `json:"spec"`
	// status is the issued credential.
	// +optional
	Status KubeconfigRequestStatus `json:"status,omitempty"`
}

// KubeconfigRequestList is a list of KubeconfigRequest.
//
// +kubebuilder:object:root=true
type KubeconfigRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the KubeconfigRequests.
	Items []KubeconfigRequest `json:"items"`
}

func init() { register(&KubeconfigRequest{}, &KubeconfigRequestList{}) }

// Holds says whether the request has, or may get, grants in c that c's deletion waits
// for: c grants its namespace, and the request names c or its status.grantedIn does. Only
// c's spec (written by c's owner) says who may hold c; a status is what its writer says,
// so status.grantedIn counts only within that grant, and a request from a namespace c does
// not grant never holds c, whatever its status claims (see ClaimsGrantsIn).
func (r *KubeconfigRequest) Holds(c *Cluster) bool {
	if !c.GrantsKubeconfigRequestsFrom(r.Namespace) {
		return false
	}
	return r.ClusterKey() == clusterKey(c) || r.grantedIn(c)
}

// ClaimsGrantsIn says whether the request's status.grantedIn names c although c does not
// grant the request's namespace: what a request holds when c stopped granting its
// namespace and the withdrawal from c is still under way, and also what a forged status
// says (the ValidatingAdmissionPolicy trustplane-status-writers keeps anyone but the
// manager from writing one; without it, whoever may write kubeconfigrequests/status can).
// The two cannot be told apart from the request, so a claim never holds c for good.
func (r *KubeconfigRequest) ClaimsGrantsIn(c *Cluster) bool {
	return !c.GrantsKubeconfigRequestsFrom(r.Namespace) && r.grantedIn(c)
}

func (r *KubeconfigRequest) grantedIn(c *Cluster) bool {
	recorded, ok := r.RecordedCluster()
	return ok && recorded == clusterKey(c)
}

func clusterKey(c *Cluster) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}
