package chaos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
)

// The kubeconfig system: KubeconfigRequests against a brought-along Cluster whose
// kubeconfig names a Proxy in front of the test API server (the "target"; its objects live
// in the same API server, in trustplane-kubeconfigs and the team namespaces). The workload
// creates, edits (rights), rotates, revokes, restores and deletes requests; the fault
// "target unreachable" takes the proxy down.
const (
	kcNamespace     = "chaos-kubeconfig" // the requests, the Cluster and its kubeconfig Secret
	kcCluster       = "target"
	kcClusterSecret = "target-admin"
	kcCanary        = "canary"
	kcMaxRequests   = 6
	// kcExpiration is every request's lifetime: far longer than a run, so the operator
	// rotates only when asked to and no issued kubeconfig expires while it is checked.
	kcExpiration = 3600
)

// kcTeams are the target namespaces the requests' Roles are in.
var kcTeams = []string{"chaos-kc-team-a", "chaos-kc-team-b"}

// kcRoleRules and kcClusterRoleRules are the rights the workload asks for (all within the
// default ceiling); kcProbes are what the settled check asks the target about.
var (
	kcRoleRules = [][]operatorv1alpha1.PolicyRule{
		{{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: []string{"get", "list"}}},
		{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update"}}},
		{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}}, {APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}}},
	}
	kcClusterRoleRules = [][]operatorv1alpha1.PolicyRule{
		nil, // no ClusterRole
		{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}}},
		{{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}}},
	}
	kcProbeVerbs     = []string{"get", "list", "watch", "create", "update", "delete"}
	kcProbeResources = []struct{ group, resource string }{
		{"", "pods"}, {"", "configmaps"}, {"", "services"}, {"apps", "deployments"}, {"", "namespaces"}, {"storage.k8s.io", "storageclasses"},
	}
)

type kubeconfigSystem struct {
	proxy *Proxy

	// mu orders the workload's changes against the checks: a check reads a request and
	// what it holds in the target while no change of the workload is under way, so what
	// it compares belongs to one spec.
	mu   sync.Mutex
	next int
	// live are the tokens seen issued, by request UID; mustReject are tokens of revoked
	// or deleted requests, with why (checked at settle: the API server caches successful
	// token authentications for up to 10 s, so a continuous check would be timing-based).
	live       map[types.UID][]string
	mustReject map[string]string
	// revoking and deleting are the UIDs the workload revoked (until restored) and
	// deleted: a token seen for them is one of theirs.
	revoking, deleting map[types.UID]bool

	// reported are the objects already reported left behind: each is reported once.
	reported map[types.UID]bool

	// canary tells when a change made after an outage is Ready again.
	canary changeCanary
}

func newKubeconfig() System {
	return &kubeconfigSystem{live: map[types.UID][]string{}, mustReject: map[string]string{},
		revoking: map[types.UID]bool{}, deleting: map[types.UID]bool{}, reported: map[types.UID]bool{}}
}

func (s *kubeconfigSystem) Name() string { return "kubeconfig" }

// Setup brings the target along: a Secret with a kubeconfig of the admin, whose server is
// the proxy, and the Cluster naming it; then the canary request, which only the fault
// touches.
func (s *kubeconfigSystem) Setup(ctx context.Context, h *Harness) error {
	s.proxy = h.NewProxy(h.APIServerHost())
	raw, err := proxiedKubeconfig(h, s.proxy.Addr)
	if err != nil {
		return err
	}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kcNamespace}}}
	for _, team := range kcTeams {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}})
	}
	objs = append(objs,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kcNamespace, Name: kcClusterSecret}, Data: map[string][]byte{"kubeconfig": raw}},
		&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: kcNamespace, Name: kcCluster},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: kcClusterSecret}}},
		kcRequest(kcCanary, 0, 1),
	)
	for _, obj := range objs {
		if err := h.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// proxiedKubeconfig is the admin's kubeconfig with the proxy as the server: inline
// credentials and CA only, as the tenant kubeconfig policy accepts.
func proxiedKubeconfig(h *Harness, addr string) ([]byte, error) {
	cfg := h.Env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["target"] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["target"] = &clientcmdapi.Context{Cluster: "target", AuthInfo: "admin"}
	kc.CurrentContext = "target"
	return clientcmd.Write(*kc)
}

func kcRequest(name string, role, clusterRole int) *operatorv1alpha1.KubeconfigRequest {
	kr := &operatorv1alpha1.KubeconfigRequest{ObjectMeta: metav1.ObjectMeta{Namespace: kcNamespace, Name: name},
		Spec: operatorv1alpha1.KubeconfigRequestSpec{Cluster: kcCluster, Expiration: kcExpiration}}
	setRights(kr, role, clusterRole)
	return kr
}

// setRights sets the request's Role (rules role in a team namespace) and ClusterRole.
func setRights(kr *operatorv1alpha1.KubeconfigRequest, role, clusterRole int) {
	kr.Spec.Role = &operatorv1alpha1.RoleSpec{Namespace: kcTeams[role%len(kcTeams)], Rules: kcRoleRules[role%len(kcRoleRules)]}
	kr.Spec.ClusterRole = nil
	if rules := kcClusterRoleRules[clusterRole%len(kcClusterRoleRules)]; rules != nil {
		kr.Spec.ClusterRole = &operatorv1alpha1.ClusterRoleSpec{Rules: rules}
	}
}

// Step creates, edits, rotates, revokes or restores, or deletes a request.
func (s *kubeconfigSystem) Step(ctx context.Context, h *Harness, rng *rand.Rand) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list := &operatorv1alpha1.KubeconfigRequestList{}
	if err := h.Client.List(ctx, list, client.InNamespace(kcNamespace)); err != nil {
		return err
	}
	var workload []*operatorv1alpha1.KubeconfigRequest
	for i := range list.Items {
		kr := &list.Items[i]
		if kr.Name != kcCanary && kr.DeletionTimestamp.IsZero() {
			workload = append(workload, kr)
		}
	}
	action := rng.IntN(100)
	if len(workload) == 0 || (action < 25 && len(workload) < kcMaxRequests) {
		s.next++
		return h.Client.Create(ctx, kcRequest(fmt.Sprintf("kc-%d", s.next), rng.IntN(6), rng.IntN(3)))
	}
	kr := workload[rng.IntN(len(workload))]
	ready := meta.FindStatusCondition(kr.Status.Conditions, conditions.Ready)
	revoked := kr.Annotations[operatorv1alpha1.RevokeAnnotation] == "true"
	switch {
	case action < 50: // change the rights (the Role may move to the other team)
		patch := client.MergeFrom(kr.DeepCopy())
		setRights(kr, rng.IntN(6), rng.IntN(3))
		return h.Client.Patch(ctx, kr, patch)
	case action < 65 && !revoked:
		return annotate(ctx, h, kr, operatorv1alpha1.RotateAnnotation, "true")
	case action < 82:
		// Revoke only what was seen issued, and restore only what was seen revoked: a
		// status is then never one of an earlier revocation.
		if !revoked && ready != nil && ready.Reason == operatorv1alpha1.ReasonIssued {
			s.revoking[kr.UID] = true
			s.forget(kr.UID, fmt.Sprintf("request %s (uid %s) was revoked", kr.Name, kr.UID))
			return annotate(ctx, h, kr, operatorv1alpha1.RevokeAnnotation, "true")
		}
		if revoked && ready != nil && ready.Reason == operatorv1alpha1.ReasonRevoked {
			if err := annotate(ctx, h, kr, operatorv1alpha1.RevokeAnnotation, "false"); err != nil {
				return err
			}
			delete(s.revoking, kr.UID)
		}
		return nil
	default:
		s.deleting[kr.UID] = true
		s.forget(kr.UID, fmt.Sprintf("request %s (uid %s) was deleted", kr.Name, kr.UID))
		return client.IgnoreNotFound(h.Client.Delete(ctx, kr))
	}
}

// forget moves the tokens seen for uid to those that must be rejected.
func (s *kubeconfigSystem) forget(uid types.UID, why string) {
	for _, token := range s.live[uid] {
		s.mustReject[token] = why
	}
	delete(s.live, uid)
}

func annotate(ctx context.Context, h *Harness, obj client.Object, key, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	return h.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// observe records the token the request publishes.
func (s *kubeconfigSystem) observe(kr *operatorv1alpha1.KubeconfigRequest) {
	token := issuedToken(kr)
	if token == "" {
		return
	}
	if s.revoking[kr.UID] || s.deleting[kr.UID] || !kr.DeletionTimestamp.IsZero() {
		if _, known := s.mustReject[token]; !known {
			s.mustReject[token] = fmt.Sprintf("request %s (uid %s) was revoked or deleted", kr.Name, kr.UID)
		}
		return
	}
	if !slices.Contains(s.live[kr.UID], token) {
		s.live[kr.UID] = append(s.live[kr.UID], token)
	}
}

// issuedToken is the token of the kubeconfig in the request's status, "" if none.
func issuedToken(kr *operatorv1alpha1.KubeconfigRequest) string {
	cfg := issuedKubeconfig(kr)
	if cfg == nil {
		return ""
	}
	if ctx := cfg.Contexts[cfg.CurrentContext]; ctx != nil && cfg.AuthInfos[ctx.AuthInfo] != nil {
		return cfg.AuthInfos[ctx.AuthInfo].Token
	}
	return ""
}

func issuedKubeconfig(kr *operatorv1alpha1.KubeconfigRequest) *clientcmdapi.Config {
	if kr.Status.Kubeconfig == "" {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
	if err != nil {
		return nil
	}
	cfg, err := clientcmd.Load(raw)
	if err != nil {
		return nil
	}
	return cfg
}

// issued says whether the request's kubeconfig is issued for its current spec, not
// revoked, and valid for at least another minute: what must work, with exactly its rights.
func issued(kr *operatorv1alpha1.KubeconfigRequest) bool {
	ready := meta.FindStatusCondition(kr.Status.Conditions, conditions.Ready)
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == operatorv1alpha1.ReasonIssued &&
		ready.ObservedGeneration == kr.Generation && kr.DeletionTimestamp.IsZero() &&
		kr.Annotations[operatorv1alpha1.RevokeAnnotation] != "true" &&
		kr.Status.ExpirationTimestamp != nil && time.Until(kr.Status.ExpirationTimestamp.Time) > time.Minute &&
		issuedToken(kr) != ""
}

// revokedDone says whether the request reports its revocation done.
func revokedDone(kr *operatorv1alpha1.KubeconfigRequest) bool {
	ready := meta.FindStatusCondition(kr.Status.Conditions, conditions.Ready)
	return kr.Annotations[operatorv1alpha1.RevokeAnnotation] == "true" && ready != nil && ready.Reason == operatorv1alpha1.ReasonRevoked
}

// Check checks, with the workload held still:
//   - "kubeconfig: issued works": the token of every issued kubeconfig authenticates
//     (TokenReview) as the request's ServiceAccount in the target;
//   - "kubeconfig: granted as asked": what an issued request holds in the target is
//     exactly its spec: one Role with the spec's rules in the spec's namespace and none
//     elsewhere, a ClusterRole with the spec's rules only when asked for, each bound to the
//     request's ServiceAccount only;
//   - "kubeconfig: revoked leaves nothing": a request reporting Revoked holds nothing in the
//     target, publishes no kubeconfig and no Secret;
//   - "kubeconfig: no orphan in target": no labelled object in the target outlives its
//     request (see orphans).
func (s *kubeconfigSystem) Check(ctx context.Context, h *Harness) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	list := &operatorv1alpha1.KubeconfigRequestList{}
	if err := h.Client.List(ctx, list, client.InNamespace(kcNamespace)); err != nil {
		h.NotJudged("kubeconfig: granted as asked", "listing the requests: %v", err)
		return
	}
	for i := range list.Items {
		kr := &list.Items[i]
		s.observe(kr)
		switch {
		case issued(kr):
			s.checkIssued(ctx, h, kr)
		case revokedDone(kr):
			s.checkRevoked(ctx, h, kr)
		}
	}
	s.checkOrphans(ctx, h, false)
}

// checkIssued: the issued token authenticates as the request's ServiceAccount, and what
// the request holds in the target is exactly its spec.
func (s *kubeconfigSystem) checkIssued(ctx context.Context, h *Harness, kr *operatorv1alpha1.KubeconfigRequest) {
	x, err := holdings(ctx, h, kr.UID)
	if err != nil {
		h.NotJudged("kubeconfig: granted as asked", "reading what request %s holds: %v", kr.Name, err)
		return
	}
	problems := grantProblems(kr, x)
	h.Check("kubeconfig: granted as asked", len(problems) == 0,
		"KubeconfigRequest %s (uid %s) reports Issued for generation %d (rv %s), but in the target: %s",
		kr.Name, kr.UID, kr.Generation, kr.ResourceVersion, strings.Join(problems, "; "))
	if len(x.serviceAccounts) != 1 {
		return
	}
	user, err := tokenUser(ctx, h, issuedToken(kr))
	if err != nil {
		h.NotJudged("kubeconfig: issued works", "reviewing the token of request %s: %v", kr.Name, err)
		return
	}
	want := "system:serviceaccount:" + x.serviceAccounts[0].Namespace + ":" + x.serviceAccounts[0].Name
	h.Check("kubeconfig: issued works", user == want,
		"KubeconfigRequest %s (uid %s, generation %d, rv %s) reports Issued, its token authenticates as %q, want %q",
		kr.Name, kr.UID, kr.Generation, kr.ResourceVersion, user, want)
}

// tokenUser is who the API server authenticates token as ("" when it rejects it); an
// error when it could not tell (a fault).
func tokenUser(ctx context.Context, h *Harness, token string) (string, error) {
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := h.Client.Create(ctx, tr); err != nil {
		return "", err
	}
	if tr.Status.Authenticated {
		return tr.Status.User.Username, nil
	}
	// A lookup the authenticator could not make (etcd paused) is no rejection.
	if e := tr.Status.Error; e != "" && !strings.Contains(e, "not found") && !strings.Contains(e, "deleted") && !strings.Contains(e, "invalid") &&
		!strings.Contains(e, "expired") && !strings.Contains(e, "does not match") {
		return "", fmt.Errorf("token review: %s", e)
	}
	return "", nil
}

// held is what a request holds in the target, found by its UID label.
type held struct {
	serviceAccounts []corev1.ServiceAccount
	bindings        []corev1.Secret // token bindings
	roles           []rbacv1.Role
	roleBindings    []rbacv1.RoleBinding
	clusterRoles    []rbacv1.ClusterRole
	clusterBindings []rbacv1.ClusterRoleBinding
	// lists are the lists the above were read from.
	lists []client.ObjectList
}

// objects are every object held, each of its own type.
func (x *held) objects() []client.Object {
	var out []client.Object
	for _, l := range x.lists {
		items, _ := meta.ExtractList(l)
		for _, item := range items {
			out = append(out, item.(client.Object))
		}
	}
	return out
}

// names are "Kind namespace/name rv N" of every object held.
func (x *held) names() []string {
	var out []string
	for _, o := range x.objects() {
		out = append(out, nameOf(o))
	}
	return out
}

// namesOf are the names of the objects of the kind (and its bindings: "Role " gives Roles
// and RoleBindings).
func (x *held) namesOf(kind string) string {
	var out []string
	for _, n := range x.names() {
		if strings.HasPrefix(n, kind) || strings.HasPrefix(n, strings.TrimSpace(kind)+"Binding ") {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

func nameOf(o client.Object) string {
	return fmt.Sprintf("%s %s/%s rv %s", strings.TrimPrefix(fmt.Sprintf("%T", o), "*v1."), o.GetNamespace(), o.GetName(), o.GetResourceVersion())
}

// holdings lists the target's objects labelled by the request operator, those of the
// request uid when uid is not "".
func holdings(ctx context.Context, h *Harness, uid types.UID) (*held, error) {
	var selector client.ListOption = client.HasLabels{kubeconfigctrl.RequestLabel}
	if uid != "" {
		selector = client.MatchingLabels{kubeconfigctrl.RequestUIDLabel: string(uid)}
	}
	sas, secrets := &corev1.ServiceAccountList{}, &corev1.SecretList{}
	roles, rbs := &rbacv1.RoleList{}, &rbacv1.RoleBindingList{}
	crs, crbs := &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}
	for _, l := range []client.ObjectList{sas, secrets, roles, rbs, crs, crbs} {
		if err := h.Client.List(ctx, l, selector); err != nil {
			return nil, err
		}
	}
	return &held{serviceAccounts: sas.Items, bindings: secrets.Items, roles: roles.Items, roleBindings: rbs.Items,
		clusterRoles: crs.Items, clusterBindings: crbs.Items, lists: []client.ObjectList{sas, secrets, roles, rbs, crs, crbs}}, nil
}

func grantProblems(kr *operatorv1alpha1.KubeconfigRequest, x *held) []string {
	var problems []string
	if len(x.serviceAccounts) != 1 {
		problems = append(problems, fmt.Sprintf("%d ServiceAccounts, want 1", len(x.serviceAccounts)))
		return problems
	}
	sa := x.serviceAccounts[0]
	subjectOK := func(subjects []rbacv1.Subject) bool {
		return len(subjects) == 1 && subjects[0].Kind == "ServiceAccount" && subjects[0].Name == sa.Name && subjects[0].Namespace == sa.Namespace
	}
	wantRoles := 0
	if kr.Spec.Role != nil {
		wantRoles = 1
	}
	if len(x.roles) != wantRoles || len(x.roleBindings) != wantRoles {
		problems = append(problems, fmt.Sprintf("%d Roles and %d RoleBindings (%s), want %d each", len(x.roles), len(x.roleBindings), x.namesOf("Role "), wantRoles))
	}
	for _, r := range x.roles {
		if kr.Spec.Role == nil || r.Namespace != kr.Spec.Role.Namespace || !sameRules(r.Rules, kr.Spec.Role.Rules) {
			problems = append(problems, fmt.Sprintf("Role %s/%s rv %s has rules %s", r.Namespace, r.Name, r.ResourceVersion, rulesString(r.Rules)))
		}
	}
	for _, b := range x.roleBindings {
		if kr.Spec.Role == nil || b.Namespace != kr.Spec.Role.Namespace || !subjectOK(b.Subjects) {
			problems = append(problems, fmt.Sprintf("RoleBinding %s/%s rv %s binds %v", b.Namespace, b.Name, b.ResourceVersion, b.Subjects))
		}
	}
	wantCluster := 0
	if kr.Spec.ClusterRole != nil {
		wantCluster = 1
	}
	if len(x.clusterRoles) != wantCluster || len(x.clusterBindings) != wantCluster {
		problems = append(problems, fmt.Sprintf("%d ClusterRoles and %d ClusterRoleBindings (%s), want %d each", len(x.clusterRoles), len(x.clusterBindings), x.namesOf("ClusterRole "), wantCluster))
	}
	for _, r := range x.clusterRoles {
		if kr.Spec.ClusterRole == nil || !sameRules(r.Rules, kr.Spec.ClusterRole.Rules) {
			problems = append(problems, fmt.Sprintf("ClusterRole %s rv %s has rules %s", r.Name, r.ResourceVersion, rulesString(r.Rules)))
		}
	}
	for _, b := range x.clusterBindings {
		if !subjectOK(b.Subjects) {
			problems = append(problems, fmt.Sprintf("ClusterRoleBinding %s rv %s binds %v", b.Name, b.ResourceVersion, b.Subjects))
		}
	}
	return problems
}

func sameRules(got []rbacv1.PolicyRule, want []operatorv1alpha1.PolicyRule) bool {
	w := make([]rbacv1.PolicyRule, len(want))
	for i, r := range want {
		w[i] = rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames, Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs}
	}
	return rulesString(got) == rulesString(w)
}

func rulesString(rules []rbacv1.PolicyRule) string {
	raw, _ := json.Marshal(rules)
	return string(raw)
}

// checkRevoked: a request that reports its revocation done holds nothing in the target
// and publishes nothing.
func (s *kubeconfigSystem) checkRevoked(ctx context.Context, h *Harness, kr *operatorv1alpha1.KubeconfigRequest) {
	x, err := holdings(ctx, h, kr.UID)
	if err != nil {
		h.NotJudged("kubeconfig: revoked leaves nothing", "reading what request %s holds: %v", kr.Name, err)
		return
	}
	left := x.names()
	published := &corev1.Secret{}
	err = h.Client.Get(ctx, client.ObjectKey{Namespace: kcNamespace, Name: kr.Name + "-kubeconfig"}, published)
	if err != nil && !apierrors.IsNotFound(err) {
		h.NotJudged("kubeconfig: revoked leaves nothing", "reading the published Secret of request %s: %v", kr.Name, err)
		return
	}
	if err == nil {
		left = append(left, "published Secret "+kcNamespace+"/"+published.Name+" rv "+published.ResourceVersion)
	}
	if kr.Status.Kubeconfig != "" {
		left = append(left, "status.kubeconfig")
	}
	h.Check("kubeconfig: revoked leaves nothing", len(left) == 0,
		"KubeconfigRequest %s (uid %s, rv %s) reports Revoked, but left: %s", kr.Name, kr.UID, kr.ResourceVersion, strings.Join(left, ", "))
}

// checkOrphans: no object in the target outlives its request. The request holds its
// objects with a finalizer that goes only after they are deleted, so an object read
// before its request was found gone, and still there after, is left behind. Objects are
// listed first, requests second, and the objects of requests gone are read again third:
// each read is at a later revision than the one before, so no race of the observer can
// make a violation. settled: everything the workload deleted must be gone already (the
// settle check, where the object's existence at the end is enough).
func (s *kubeconfigSystem) checkOrphans(ctx context.Context, h *Harness, settled bool) bool {
	const invariant = "kubeconfig: no orphan in target"
	x, err := holdings(ctx, h, "")
	if err != nil {
		h.NotJudged(invariant, "listing what requests hold: %v", err)
		return false
	}
	list := &operatorv1alpha1.KubeconfigRequestList{}
	if err := h.Client.List(ctx, list, client.InNamespace(kcNamespace)); err != nil {
		h.NotJudged(invariant, "listing the requests: %v", err)
		return false
	}
	uids := map[string]bool{}
	for _, kr := range list.Items {
		uids[string(kr.UID)] = true
	}
	var suspects []client.Object
	for _, obj := range x.objects() {
		if !uids[obj.GetLabels()[kubeconfigctrl.RequestUIDLabel]] {
			suspects = append(suspects, obj)
		}
	}
	var left []string
	for _, obj := range suspects {
		again := obj.DeepCopyObject().(client.Object)
		err := h.Client.Get(ctx, client.ObjectKeyFromObject(obj), again)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			h.NotJudged(invariant, "reading %s/%s again: %v", obj.GetNamespace(), obj.GetName(), err)
			return false
		}
		if again.GetUID() != obj.GetUID() {
			continue // a new object of the same name (a request of the same name again)
		}
		if !settled && s.reported[obj.GetUID()] {
			continue
		}
		s.reported[obj.GetUID()] = true
		left = append(left, fmt.Sprintf("%T %s/%s (rv %s, request %s uid %s)", obj, obj.GetNamespace(), obj.GetName(), again.GetResourceVersion(),
			obj.GetAnnotations()[kubeconfigctrl.RequestAnnotation], obj.GetLabels()[kubeconfigctrl.RequestUIDLabel]))
	}
	sort.Strings(left)
	if settled || len(left) == 0 {
		return len(left) == 0
	}
	h.Check(invariant, len(left) == 0,
		"objects left in the target after their request was gone (requests listed at rv %s): %s", list.ResourceVersion, strings.Join(left, "; "))
	return true
}

// Faults: the target unreachable.
func (s *kubeconfigSystem) Faults(h *Harness) []Fault {
	return []Fault{{
		Kind: "target unreachable",
		Inject: func(ctx context.Context, h *Harness, rng *rand.Rand) (string, error) {
			d := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
			s.proxy.Down(d)
			s.canary.reset()
			return fmt.Sprintf("target %s for %.1fs", s.proxy.Addr, d.Seconds()), nil
		},
		Recovered: s.canaryReconciled,
	}}
}

// canaryReconciled changes the canary request once after an outage (its expiration
// between two values) and says whether the change is issued: the target works again as
// the operator sees it.
func (s *kubeconfigSystem) canaryReconciled(ctx context.Context, h *Harness) bool {
	obj := &operatorv1alpha1.KubeconfigRequest{}
	return s.canary.recovered(ctx, h, client.ObjectKey{Namespace: kcNamespace, Name: kcCanary}, obj,
		func() { obj.Spec.Expiration = kcExpiration + 1 - (obj.Spec.Expiration - kcExpiration) },
		func() []metav1.Condition { return obj.Status.Conditions })
}

// Settle: the Cluster and every request Ready for its spec (Issued, or Revoked when
// revoked), and then:
//   - "kubeconfig: settled kubeconfig works": each issued kubeconfig, used as it is (through
//     the proxy), authenticates as the request's ServiceAccount (SelfSubjectReview);
//   - "kubeconfig: settled rights exact": SubjectAccessReviews for the ServiceAccount allow
//     exactly what the spec's rules allow, over every verb and resource the workload uses,
//     in every team namespace;
//   - "kubeconfig: revoked or deleted token rejected": every token of a request revoked or
//     deleted is rejected;
//   - "kubeconfig: settled no orphan": nothing in the target belongs to no request.
func (s *kubeconfigSystem) Settle(ctx context.Context, h *Harness) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.Eventually(ctx, "kubeconfig: cluster "+kcCluster+" ready", func(ctx context.Context) bool {
		c := &operatorv1alpha1.Cluster{}
		return h.Client.Get(ctx, client.ObjectKey{Namespace: kcNamespace, Name: kcCluster}, c) == nil &&
			meta.IsStatusConditionTrue(c.Status.Conditions, conditions.Ready)
	})
	list := &operatorv1alpha1.KubeconfigRequestList{}
	h.Eventually(ctx, "kubeconfig: requests listed", func(ctx context.Context) bool {
		return h.Client.List(ctx, list, client.InNamespace(kcNamespace)) == nil
	})
	for _, item := range list.Items {
		name := item.Name
		var kr *operatorv1alpha1.KubeconfigRequest
		h.Eventually(ctx, "kubeconfig: request "+name+" ready", func(ctx context.Context) bool {
			kr = &operatorv1alpha1.KubeconfigRequest{}
			err := h.Client.Get(ctx, client.ObjectKey{Namespace: kcNamespace, Name: name}, kr)
			if apierrors.IsNotFound(err) {
				kr = nil
				return true // deleted by the workload: its cleanup is checked below
			}
			return err == nil && (issued(kr) || revokedDone(kr))
		})
		if kr == nil {
			continue
		}
		s.observe(kr)
		if issued(kr) {
			s.settledWorks(ctx, h, kr)
		}
	}
	var pending []string
	h.Eventually(ctx, "kubeconfig: revoked or deleted token rejected", func(ctx context.Context) bool {
		pending = pending[:0]
		for token, why := range s.mustReject {
			if user, err := tokenUser(ctx, h, token); err != nil || user != "" {
				pending = append(pending, fmt.Sprintf("%s: token still authenticates as %q (err %v)", why, user, err))
			}
		}
		return len(pending) == 0
	})
	for _, p := range pending {
		h.Logf("kubeconfig: %s", p)
	}
	h.Eventually(ctx, "kubeconfig: settled no orphan", func(ctx context.Context) bool { return s.checkOrphans(ctx, h, true) })
	h.Logf("kubeconfig: settled with %d requests, %d tokens checked rejected", len(list.Items), len(s.mustReject))
}

// settledWorks uses the issued kubeconfig as a user would, and checks its rights exactly.
func (s *kubeconfigSystem) settledWorks(ctx context.Context, h *Harness, kr *operatorv1alpha1.KubeconfigRequest) {
	var user string
	h.Eventually(ctx, "kubeconfig: settled kubeconfig works", func(ctx context.Context) bool {
		raw, err := base64.StdEncoding.DecodeString(kr.Status.Kubeconfig)
		if err != nil {
			return false
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
		if err != nil {
			return false
		}
		cfg.Timeout = 5 * time.Second
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return false
		}
		review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			h.Logf("kubeconfig: request %s's kubeconfig: %v", kr.Name, err)
			return false
		}
		user = review.Status.UserInfo.Username
		return strings.HasPrefix(user, "system:serviceaccount:"+kubeconfigctrl.TargetNamespace+":")
	})
	if user == "" {
		return
	}
	var wrong []string
	h.Eventually(ctx, "kubeconfig: settled rights exact", func(ctx context.Context) bool {
		wrong = wrong[:0]
		for _, ns := range kcTeams {
			for _, res := range kcProbeResources {
				for _, verb := range kcProbeVerbs {
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
						Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + kubeconfigctrl.TargetNamespace, "system:authenticated"},
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: res.group, Resource: res.resource, Verb: verb}}}
					if err := h.Client.Create(ctx, sar); err != nil {
						return false
					}
					if want := allows(kr, ns, res.group, res.resource, verb); sar.Status.Allowed != want {
						wrong = append(wrong, fmt.Sprintf("%s %s.%s in %s: allowed %v, spec says %v", verb, res.resource, res.group, ns, sar.Status.Allowed, want))
					}
				}
			}
		}
		return len(wrong) == 0
	})
	if len(wrong) > 0 {
		h.Logf("kubeconfig: request %s (generation %d, rv %s) rights: %s", kr.Name, kr.Generation, kr.ResourceVersion, strings.Join(wrong, "; "))
	}
}

// allows is whether the request's spec grants verb on group/resource in namespace ns
// (the workload's rules have no wildcards or resource names).
func allows(kr *operatorv1alpha1.KubeconfigRequest, ns, group, resource, verb string) bool {
	match := func(rules []operatorv1alpha1.PolicyRule) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	if kr.Spec.ClusterRole != nil && match(kr.Spec.ClusterRole.Rules) {
		return true
	}
	return kr.Spec.Role != nil && kr.Spec.Role.Namespace == ns && match(kr.Spec.Role.Rules)
}
