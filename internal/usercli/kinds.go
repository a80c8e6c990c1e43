package usercli

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/aggregation"
	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/api/conditions"
	controlplanev1alpha1 "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/podcert"
)

// kind is one kind of object `trustplane get` lists: every kind of the five systems.
type kind struct {
	// Name is the singular lower-case name users type; Aliases the others accepted.
	Name    string
	Aliases []string
	// Kind and GVK are the API's.
	Kind       string
	GVK        schema.GroupVersionKind
	Namespaced bool
	// System is which of trustplane's five systems the kind belongs to.
	System string
	// Columns are the headers of the kind's facts, in order; Wide are shown with -o wide.
	Columns []column
	// newList is an empty list of the kind; listOptions narrow what is listed.
	newList     func() client.ObjectList
	listOptions []client.ListOption
	// rows are the rows of a listed list (pure): every object the kind shows, Ready or
	// not, with its facts. An aggregating role's readiness depends on the other roles,
	// hence a list.
	rows func(list client.ObjectList, now time.Time) []row
	// controller is the name (trustplane manager --controllers) of the controller that
	// reconciles the kind and honours conditions.ReconcileRequestedAnnotation
	// (`trustplane reconcile`); empty for kinds whose controller follows what it reads.
	controller string
}

// column is a fact's header.
type column struct {
	Header string
	// Wide: shown with -o wide only. Short: abbreviated in the table (kids, checksums).
	Wide, Short bool
}

// row is one object as `get` shows it.
type row struct {
	Kind            *kind
	Namespace, Name string
	// Ready is metav1.ConditionTrue, False or Unknown (not concluded yet).
	Ready           metav1.ConditionStatus
	Reason, Message string
	Created         time.Time
	// Facts are the values of Kind.Columns, in order.
	Facts []string
	// Object is the object itself, for -o json|yaml and describe.
	Object client.Object
	// Intended: not Ready at the object's own request (a revoked KubeconfigRequest), which
	// is no failure.
	Intended bool
}

// ready says whether the row is Ready.
func (r row) ready() bool { return r.Ready == metav1.ConditionTrue }

// settled says whether the row is as it should be: Ready, or not Ready on purpose. The
// others make get's exit status 1 and come first.
func (r row) settled() bool { return r.ready() || r.Intended }

func (k *kind) plural() string { return strings.ToLower(k.Kind) + "s" }

// trustplane says the kind is one of trustplane's CRDs (not Kubernetes' own).
func (k *kind) trustplane() bool {
	return strings.Contains(k.GVK.Group, ".") && !strings.HasSuffix(k.GVK.Group, ".k8s.io")
}

// matches says whether s names the kind: its name, plural, alias or Kind, any case.
func (k *kind) matches(s string) bool {
	s = strings.ToLower(s)
	if s == k.Name || s == k.plural() || s == strings.ToLower(k.Kind) || s == strings.ToLower(k.Kind)+"."+k.GVK.Group || s == k.plural()+"."+k.GVK.Group {
		return true
	}
	for _, a := range k.Aliases {
		if s == a {
			return true
		}
	}
	return false
}

// kinds is every kind `trustplane get` knows, in the order the five systems are told.
var kinds = []*kind{
	{
		Name: "jwksconfig", Aliases: []string{"jwks", "jwksconfigs"}, Kind: "JWKSConfig", GVK: jwksv1alpha1.GroupVersion.WithKind("JWKSConfig"),
		Namespaced: true, System: "JWKS", controller: "jwks",
		Columns: []column{{Header: "KID", Short: true}, {Header: "KEYS"}, {Header: "SIGNING", Wide: true}, {Header: "ISSUER", Wide: true}},
		newList: func() client.ObjectList { return &jwksv1alpha1.JWKSConfigList{} },
		rows:    each(jwksRow),
	},
	{
		Name: "clusterrole", Aliases: []string{"clusterroles"}, Kind: "ClusterRole", GVK: rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
		System:  "ClusterRole aggregation",
		Columns: []column{{Header: "RULES"}, {Header: "SELECTORS"}, {Header: "MATCHED", Wide: true}},
		newList: func() client.ObjectList { return &rbacv1.ClusterRoleList{} },
		rows: func(l client.ObjectList, now time.Time) []row {
			return clusterRoleRows(l.(*rbacv1.ClusterRoleList).Items)
		},
	},
	{
		Name: "role", Aliases: []string{"roles"}, Kind: "Role", GVK: rbacv1.SchemeGroupVersion.WithKind("Role"),
		Namespaced: true, System: "Role aggregation",
		Columns: []column{{Header: "RULES"}, {Header: "SELECTOR"}, {Header: "MATCHED", Wide: true}},
		newList: func() client.ObjectList { return &rbacv1.RoleList{} },
		rows:    func(l client.ObjectList, now time.Time) []row { return roleRows(l.(*rbacv1.RoleList).Items) },
	},
	{
		Name: "secretchecksum", Aliases: []string{"secretchecksums", "scs"}, Kind: "SecretCheckSum", GVK: tenginev1.GroupVersion.WithKind("SecretCheckSum"),
		Namespaced: true, System: "Secret consistency",
		Columns: []column{{Header: "CHECKSUM", Short: true}, {Header: "IDS"}, {Header: "SCOPE"}, {Header: "COVERS", Wide: true}},
		newList: func() client.ObjectList { return &tenginev1.SecretCheckSumList{} },
		rows:    each(func(c *tenginev1.SecretCheckSum, _ time.Time) row { return checksumRow(c, c.Spec.Checksum, c.Spec.IDs) }),
	},
	{
		Name: "ingresschecksum", Aliases: []string{"ingresschecksums", "ics"}, Kind: "IngressCheckSum", GVK: tenginev1.GroupVersion.WithKind("IngressCheckSum"),
		Namespaced: true, System: "Secret consistency",
		Columns: []column{{Header: "CHECKSUM", Short: true}, {Header: "IDS"}, {Header: "SCOPE"}, {Header: "COVERS", Wide: true}},
		newList: func() client.ObjectList { return &tenginev1.IngressCheckSumList{} },
		rows: each(func(c *tenginev1.IngressCheckSum, _ time.Time) row {
			return checksumRow(c, c.Spec.Checksum, c.Spec.IDs)
		}),
	},
	{
		Name: "podcertificaterequest", Aliases: []string{"podcertificaterequests", "pcr", "pcrs"}, Kind: "PodCertificateRequest",
		GVK: certificatesv1.SchemeGroupVersion.WithKind("PodCertificateRequest"), Namespaced: true, System: "Pod certificates",
		Columns: []column{{Header: "POD"}, {Header: "SIGNER"}, {Header: "STATE"}, {Header: "NOT AFTER"}, {Header: "REFRESH AT", Wide: true}, {Header: "NODE", Wide: true}},
		newList: func() client.ObjectList { return &certificatesv1.PodCertificateRequestList{} },
		rows:    each(pcrRow),
	},
	{
		Name: "signerca", Aliases: []string{"signercas", "ca", "podcertca"}, Kind: "ClusterTrustBundle",
		GVK: certificatesv1.SchemeGroupVersion.WithKind("ClusterTrustBundle"), System: "Pod certificates",
		Columns:     []column{{Header: "SIGNER"}, {Header: "CAS"}, {Header: "SIGNING CA", Wide: true}, {Header: "NOT AFTER"}},
		newList:     func() client.ObjectList { return &certificatesv1.ClusterTrustBundleList{} },
		listOptions: []client.ListOption{client.MatchingLabels{conditions.ManagedByLabel: conditions.ManagedByValue}},
		rows:        each(signerCARow),
	},
	{
		Name: "cluster", Aliases: []string{"clusters"}, Kind: "Cluster", GVK: operatorv1alpha1.GroupVersion.WithKind("Cluster"),
		Namespaced: true, System: "Clusters", controller: "cluster",
		Columns: []column{{Header: "PHASE"}, {Header: "SHOOT"}, {Header: "PROVIDER", Wide: true}, {Header: "REGION", Wide: true}},
		newList: func() client.ObjectList { return &operatorv1alpha1.ClusterList{} },
		rows:    each(clusterRow),
	},
	{
		Name: "kubeconfigrequest", Aliases: []string{"kubeconfigrequests", "kcr", "kcrs"}, Kind: "KubeconfigRequest",
		GVK: operatorv1alpha1.GroupVersion.WithKind("KubeconfigRequest"), Namespaced: true, System: "Clusters", controller: "kubeconfig",
		Columns: []column{{Header: "CLUSTER"}, {Header: "EXPIRES"}, {Header: "ISSUED", Wide: true}, {Header: "SECRET", Wide: true}},
		newList: func() client.ObjectList { return &operatorv1alpha1.KubeconfigRequestList{} },
		rows:    each(kubeconfigRow),
	},
	{
		Name: "subscriptionrequest", Aliases: []string{"subscriptionrequests", "sr", "srs"}, Kind: "SubscriptionRequest",
		GVK: controlplanev1alpha1.GroupVersion.WithKind("SubscriptionRequest"), Namespaced: true, System: "Clusters", controller: "subscription",
		Columns: []column{{Header: "PROVIDER"}, {Header: "CREDENTIAL"}, {Header: "SELECTOR", Wide: true}},
		newList: func() client.ObjectList { return &controlplanev1alpha1.SubscriptionRequestList{} },
		rows:    each(subscriptionRow),
	},
}

// rowOf is the row of one object of the kind, as get shows it.
func (k *kind) rowOf(obj client.Object, now time.Time) row {
	list := k.newList()
	if err := meta.SetList(list, []runtime.Object{obj}); err == nil {
		if rows := k.rows(list, now); len(rows) == 1 {
			rows[0].Kind = k
			return rows[0]
		}
	}
	r := newRow(obj)
	r.Kind, r.Ready = k, metav1.ConditionUnknown
	return r
}

// kindNamed finds a kind by any of its names.
func kindNamed(s string) (*kind, error) {
	for _, k := range kinds {
		if k.matches(s) {
			return k, nil
		}
	}
	return nil, fmt.Errorf("unknown kind %q (one of %s)", s, strings.Join(kindNames(), ", "))
}

func kindNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	return names
}

// each makes a kind's rows one object at a time.
func each[T client.Object](one func(T, time.Time) row) func(client.ObjectList, time.Time) []row {
	return func(l client.ObjectList, now time.Time) []row {
		objs, err := meta.ExtractList(l)
		if err != nil {
			return nil
		}
		out := make([]row, 0, len(objs))
		for _, o := range objs {
			if obj, ok := o.(T); ok {
				out = append(out, one(obj, now))
			}
		}
		return out
	}
}

// newRow is the row of obj with its name and age.
func newRow(obj client.Object) row {
	return row{Namespace: obj.GetNamespace(), Name: obj.GetName(), Created: obj.GetCreationTimestamp().Time, Object: obj}
}

// conditionRow reads Ready as kstatus does: True only when the current generation was
// reconciled (status.observedGeneration) and not while it is being deleted.
func conditionRow(obj conditions.Object) row {
	r := newRow(obj)
	r.Ready = metav1.ConditionUnknown
	c := meta.FindStatusCondition(obj.GetConditions(), conditions.Ready)
	if c == nil {
		r.Message = "not reconciled yet"
		return r
	}
	r.Ready, r.Reason, r.Message = c.Status, c.Reason, c.Message
	reconciling := meta.FindStatusCondition(obj.GetConditions(), conditions.Reconciling)
	switch {
	case !obj.GetDeletionTimestamp().IsZero():
		r.Ready, r.Message = metav1.ConditionFalse, "being deleted: "+c.Message
	case r.Ready == metav1.ConditionTrue && obj.GetObservedGeneration() < obj.GetGeneration():
		r.Ready = metav1.ConditionUnknown
		r.Message = fmt.Sprintf("generation %d is not reconciled yet (Ready is about %d)", obj.GetGeneration(), obj.GetObservedGeneration())
	case r.Ready == metav1.ConditionTrue && reconciling != nil && reconciling.Status == metav1.ConditionTrue:
		// What was achieved still holds (a published set is served) while a change is in
		// progress or waited for (an update throttled): the reason says the change's state.
		r.Reason = reconciling.Reason
		r.Message = reconciling.Message + " (Ready: " + c.Message + ")"
	}
	return r
}

// shortID abbreviates a kid or a checksum for the table (-o wide shows it whole).
func shortID(s string, wide bool) string {
	if wide || len(s) <= 12 {
		return orNone(s)
	}
	return s[:12] + "…"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// when is a time relative to now: "in 59m", "3m ago"; <none> for zero.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "<none>"
	}
	if t.After(now) {
		return "in " + duration.HumanDuration(t.Sub(now))
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}

func metaTime(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func jwksRow(c *jwksv1alpha1.JWKSConfig, _ time.Time) row {
	r := conditionRow(c)
	r.Facts = []string{c.Status.LastKeyID, strconv.Itoa(int(c.Status.KeyCount)), orNone(c.Status.SigningKeyID), orNone(c.Spec.Issuer)}
	return r
}

// aggregated is the outcome of comparing an aggregating role's rules with what
// aggregation makes of the roles its selectors match now.
func aggregated(r *row, self string, selectors []labels.Selector, sources []rbac.Source, rules []rbacv1.PolicyRule) {
	want := rbac.Aggregate(self, selectors, sources)
	matched := 0
	for _, s := range sources {
		for _, sel := range selectors {
			if s.Name != self && sel.Matches(labels.Set(s.Labels)) {
				matched++
				break
			}
		}
	}
	r.Facts = []string{strconv.Itoa(len(rules)), "", strconv.Itoa(matched)}
	if rbac.RulesEqual(want, rules) {
		r.Ready, r.Reason = metav1.ConditionTrue, aggregation.ReasonAggregated
		r.Message = fmt.Sprintf("%d rules from %d matching roles", len(rules), matched)
		return
	}
	r.Ready, r.Reason = metav1.ConditionFalse, aggregation.ReasonRulesOutOfDate
	r.Message = fmt.Sprintf("%d rules; aggregating the %d matching roles now gives %d", len(rules), matched, len(want))
}

// clusterRoleRows are the aggregating ClusterRoles (those with an aggregationRule) among
// all, each Ready when its rules are what kube-controller-manager's aggregation makes
// of the others now.
func clusterRoleRows(all []rbacv1.ClusterRole) []row {
	sources := make([]rbac.Source, len(all))
	for i := range all {
		sources[i] = rbac.Source{Name: all[i].Name, Labels: all[i].Labels, Rules: all[i].Rules}
	}
	var out []row
	for i := range all {
		role := &all[i]
		if role.AggregationRule == nil {
			continue
		}
		r := newRow(role)
		selectors, texts, err := parseSelectors(role.AggregationRule.ClusterRoleSelectors)
		if err != nil {
			r.Ready, r.Reason, r.Message = metav1.ConditionFalse, aggregation.ReasonInvalidSelector, err.Error()
			r.Facts = []string{strconv.Itoa(len(role.Rules)), strconv.Itoa(len(role.AggregationRule.ClusterRoleSelectors)), "0"}
		} else {
			aggregated(&r, role.Name, selectors, sources, role.Rules)
			r.Facts[1] = strconv.Itoa(len(selectors))
			if len(texts) > 0 {
				r.Message += " (" + strings.Join(texts, " | ") + ")"
			}
		}
		out = append(out, r)
	}
	return out
}

func parseSelectors(in []metav1.LabelSelector) ([]labels.Selector, []string, error) {
	var out []labels.Selector
	var texts []string
	for i := range in {
		s, err := metav1.LabelSelectorAsSelector(&in[i])
		if err != nil {
			return nil, nil, fmt.Errorf("clusterRoleSelectors[%d]: %w", i, err)
		}
		out = append(out, s)
		texts = append(texts, s.String())
	}
	return out, texts, nil
}

// roleRows are the Roles annotated for aggregation (aggregation.SelectorAnnotation),
// each compared with what aggregating the Roles of its namespace makes now.
func roleRows(all []rbacv1.Role) []row {
	byNamespace := map[string][]rbac.Source{}
	for i := range all {
		byNamespace[all[i].Namespace] = append(byNamespace[all[i].Namespace], rbac.Source{Name: all[i].Name, Labels: all[i].Labels, Rules: all[i].Rules})
	}
	var out []row
	for i := range all {
		role := &all[i]
		raw, ok := role.Annotations[aggregation.SelectorAnnotation]
		if !ok {
			continue
		}
		r := newRow(role)
		selector, err := labels.Parse(raw)
		if err != nil {
			r.Ready, r.Reason = metav1.ConditionFalse, aggregation.ReasonInvalidSelector
			r.Message = fmt.Sprintf("annotation %s is not a label selector: %v", aggregation.SelectorAnnotation, oneLine(err))
			r.Facts = []string{strconv.Itoa(len(role.Rules)), raw, "0"}
		} else {
			aggregated(&r, role.Name, []labels.Selector{selector}, byNamespace[role.Namespace], role.Rules)
			r.Facts[1] = selector.String()
		}
		out = append(out, r)
	}
	return out
}

// checksumRow is a published SecretCheckSum or IngressCheckSum: Ready when its checksum
// is the MD5 of its IDs (or the IDs were left out, too many to publish).
func checksumRow(obj client.Object, sum string, ids []string) row {
	r := newRow(obj)
	covers := obj.GetAnnotations()[tenginev1alpha1.ScopeAnnotation]
	r.Facts = []string{sum, strconv.Itoa(len(ids)), orNone(obj.GetLabels()[tenginev1alpha1.ScopeKindLabel]), orNone(covers)}
	omitted, isOmitted := obj.GetAnnotations()[tenginev1alpha1.IDsOmittedAnnotation]
	switch {
	case isOmitted:
		r.Ready, r.Reason, r.Message = metav1.ConditionTrue, tenginev1alpha1.ReasonIDsOmitted, "published without its IDs: "+omitted
		r.Facts[1] = "omitted"
	case checksum.Sum(ids) != sum:
		r.Ready, r.Reason = metav1.ConditionFalse, tenginev1alpha1.ReasonChecksumMismatch
		r.Message = fmt.Sprintf("spec.checksum is not the MD5 of spec.ids (%s): no data plane can match it", checksum.Sum(ids))
	default:
		r.Ready, r.Reason = metav1.ConditionTrue, tenginev1alpha1.ReasonPublished
		r.Message = fmt.Sprintf("%d IDs", len(ids))
		if covers != "" {
			r.Message += ", covering " + covers
		}
	}
	return r
}

// pcrRow is a PodCertificateRequest: Ready when issued and not expired.
func pcrRow(p *certificatesv1.PodCertificateRequest, now time.Time) row {
	r := newRow(p)
	state := podcert.StateNotYetIssued
	r.Ready, r.Reason, r.Message = metav1.ConditionFalse, certificates.ReasonPending, "the signer has not concluded it"
	for _, t := range []string{podcert.OutcomeDenied, podcert.OutcomeFailed, podcert.OutcomeIssued} {
		c := meta.FindStatusCondition(p.Status.Conditions, t)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		r.Reason, r.Message = orDefault(c.Reason, t), c.Message
		switch t {
		case podcert.OutcomeDenied:
			state = podcert.StateDenied
		case podcert.OutcomeFailed:
			state = podcert.StateFailed
		case podcert.OutcomeIssued:
			notAfter, refresh := metaTime(p.Status.NotAfter), metaTime(p.Status.BeginRefreshAt)
			switch {
			case now.After(notAfter):
				state, r.Reason, r.Message = podcert.StateExpired, certificates.ReasonExpired, "the certificate expired "+when(notAfter, now)
			case now.After(refresh.Add(10 * time.Minute)):
				state, r.Ready = podcert.StateOverdueForRefresh, metav1.ConditionTrue
				r.Reason, r.Message = certificates.ReasonOverdueForRefresh, "refresh was due "+when(refresh, now)
			default:
				state, r.Ready = podcert.StateFresh, metav1.ConditionTrue
			}
		}
		break
	}
	r.Facts = []string{p.Spec.PodName, p.Spec.SignerName, state, when(metaTime(p.Status.NotAfter), now), when(metaTime(p.Status.BeginRefreshAt), now), string(p.Spec.NodeName)}
	return r
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// signerCARow is a signer's ClusterTrustBundle (the pod certificate signer writes the CA
// that signs first, then the next one, then retired ones): Ready while the first is valid.
func signerCARow(b *certificatesv1.ClusterTrustBundle, now time.Time) row {
	r := newRow(b)
	cas := bundleCertificates(b.Spec.TrustBundle)
	r.Facts = []string{b.Spec.SignerName, strconv.Itoa(len(cas)), "<none>", "<none>"}
	if len(cas) == 0 {
		r.Ready, r.Reason, r.Message = metav1.ConditionFalse, certificates.ReasonInvalidCA, "the bundle holds no certificate that parses"
		return r
	}
	first := cas[0]
	r.Facts[2], r.Facts[3] = first.Subject.CommonName, when(first.NotAfter, now)
	switch {
	case now.After(first.NotAfter):
		r.Ready, r.Reason, r.Message = metav1.ConditionFalse, certificates.ReasonExpired, "the signing CA expired "+when(first.NotAfter, now)
	case now.Before(first.NotBefore):
		r.Ready, r.Reason, r.Message = metav1.ConditionFalse, certificates.ReasonInvalidCA, "the signing CA is not valid before "+first.NotBefore.UTC().Format(time.RFC3339)
	default:
		r.Ready, r.Reason = metav1.ConditionTrue, certificates.ReasonBundlePublished
		r.Message = fmt.Sprintf("%d CAs; %q signs until %s", len(cas), first.Subject.CommonName, first.NotAfter.UTC().Format(time.RFC3339))
		// A CA rotation in progress: its condition, as the signer wrote it on the bundle,
		// says where it stands (CAPreview, CanaryFailed, CALive, …); the bundle itself is fine.
		if reason, message, ok := strings.Cut(b.Annotations[certificates.AnnotationCARotationStatus], ": "); ok && reason != "" {
			r.Reason, r.Message = reason, message+" ("+r.Message+")"
		}
	}
	return r
}

// bundleCertificates parses the certificates of a PEM bundle, skipping what does not parse.
func bundleCertificates(bundle string) []*x509.Certificate {
	var out []*x509.Certificate
	rest := []byte(bundle)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// clusterPhase is a Cluster's phase in one word, from its conditions.
func clusterPhase(c *operatorv1alpha1.Cluster) string {
	ready := meta.FindStatusCondition(c.Status.Conditions, conditions.Ready)
	switch {
	case !c.DeletionTimestamp.IsZero():
		return "Deleting"
	case meta.IsStatusConditionTrue(c.Status.Conditions, conditions.Stalled):
		return "Failed"
	case ready != nil && ready.Status == metav1.ConditionTrue:
		return "Ready"
	case meta.IsStatusConditionTrue(c.Status.Conditions, operatorv1alpha1.ConditionClusterProvisioned):
		return "Provisioned"
	case ready != nil && ready.Reason != "":
		return ready.Reason
	}
	return "Pending"
}

func clusterRow(c *operatorv1alpha1.Cluster, _ time.Time) row {
	r := conditionRow(c)
	shootName := c.Status.ShootName
	if c.Spec.KubeconfigSecretRef != nil {
		shootName = "(brought along)"
	}
	r.Facts = []string{clusterPhase(c), orNone(shootName), orNone(c.Spec.Infrastructure.Provider), orNone(c.Spec.Core.Region)}
	return r
}

func kubeconfigRow(kr *operatorv1alpha1.KubeconfigRequest, now time.Time) row {
	r := conditionRow(kr)
	cluster := kr.Spec.Cluster
	if key := kr.ClusterKey(); key.Namespace != kr.Namespace {
		cluster = key.String()
	}
	expires := metaTime(kr.Status.ExpirationTimestamp)
	if r.ready() && !expires.IsZero() && now.After(expires) {
		r.Ready, r.Message = metav1.ConditionFalse, "the issued kubeconfig expired "+when(expires, now)
	}
	// Revoked on request (the revoke annotation), and this generation reconciled so: as
	// asked, not a failure.
	r.Intended = r.Ready == metav1.ConditionFalse && r.Reason == operatorv1alpha1.ReasonRevoked &&
		kr.Annotations[operatorv1alpha1.RevokeAnnotation] == "true" && kr.Status.ObservedGeneration == kr.Generation && kr.DeletionTimestamp.IsZero()
	r.Facts = []string{cluster, when(expires, now), when(metaTime(kr.Status.IssuedAt), now), orNone(kr.Status.SecretName)}
	return r
}

func subscriptionRow(sr *controlplanev1alpha1.SubscriptionRequest, _ time.Time) row {
	r := conditionRow(sr)
	r.Facts = []string{sr.Spec.Provider, orNone(sr.Status.GardenerSecretName), sr.Spec.SubscriptionSelector}
	return r
}

// sortRows puts the rows that are not settled (not Ready, and not on purpose) first, then
// by kind (in kinds' order), namespace and name.
func sortRows(rows []row) {
	order := map[*kind]int{}
	for i, k := range kinds {
		order[k] = i
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.settled() != b.settled() {
			return !a.settled()
		}
		if order[a.Kind] != order[b.Kind] {
			return order[a.Kind] < order[b.Kind]
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}
