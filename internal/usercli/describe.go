package usercli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/aggregation"
	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/api/conditions"
	controlplanev1alpha1 "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/podcert"
)

func newDescribeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe KIND NAME",
		Short: "Show an object's conditions, its related objects and its latest events as a tree",
		Long: `Show one object as a tree, as clusterctl describe does: its Ready state and conditions,
the objects it is made of or makes (a JWKSConfig's Secret → ConfigMap → nginx; a
Cluster's Shoot, SubscriptionRequest and KubeconfigRequests; a pod's podCertificate
projections, its projected volumes' and the one the node agent serves for the annotation
` + certificates.SignerAnnotation + `, → PodCertificateRequests; an aggregating role's
matching roles), and its
latest events. Secrets' contents and issued kubeconfigs are never shown.

Kinds: ` + strings.Join(kindNames(), ", ") + `, and pod.`,
		Example: examples(
			"describe jwksconfig issuer -n default",
			"describe cluster prod -n tenants",
			"describe pod web-0 -n apps      # its pod certificates",
		),
		Args:    cobra.ExactArgs(2),
		GroupID: GroupDay2,
	}
	f := newClientFlags(cmd, false, true)
	cmd.ValidArgsFunction = completeKindAndName(f, nil)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var k *kind
		if !isPod(args[0]) {
			var err error
			if k, err = kindNamed(args[0]); err != nil {
				return err
			}
		}
		c, ns, err := f.connect(errOut(cmd))
		if err != nil {
			return err
		}
		d := &describer{c: c, now: time.Now()}
		var tree *node
		if k == nil {
			tree, err = d.pod(cmd.Context(), ns, args[1])
		} else {
			tree, err = d.describe(cmd.Context(), k, ns, args[1])
		}
		if err != nil {
			return err
		}
		return renderTree(out(cmd), tree)
	}
	return cmd
}

func isPod(s string) bool { return s == "pod" || s == "pods" || s == "po" }

// describer reads what a tree shows; a related object it cannot read becomes a line
// saying why, never a failure of the whole tree.
type describer struct {
	c   client.Client
	now time.Time
}

func (d *describer) describe(ctx context.Context, k *kind, ns, name string) (*node, error) {
	r, err := getRow(ctx, d.c, k, ns, name, d.now)
	if err != nil {
		return nil, err
	}
	co, hasConditions := r.Object.(conditions.Object)
	// The Ready condition says why, unless the row says more (not reconciled, stale).
	var ready *metav1.Condition
	if hasConditions {
		ready = meta.FindStatusCondition(co.GetConditions(), conditions.Ready)
	}
	tree := headNode(r, d.now, ready == nil || ready.Message != r.Message)
	if hasConditions {
		tree.adopt(conditionsNode(co.GetConditions(), d.now))
	}
	switch obj := r.Object.(type) {
	case *jwksv1alpha1.JWKSConfig:
		tree.adopt(d.jwks(ctx, obj)...)
	case *rbacv1.ClusterRole:
		tree.adopt(d.clusterRole(ctx, obj))
	case *rbacv1.Role:
		tree.adopt(d.role(ctx, obj))
	case *tenginev1.SecretCheckSum:
		tree.adopt(d.checksums(ctx, obj, &tenginev1.SecretCheckSumList{}, k.Kind))
	case *tenginev1.IngressCheckSum:
		tree.adopt(d.checksums(ctx, obj, &tenginev1.IngressCheckSumList{}, k.Kind))
	case *certificatesv1.PodCertificateRequest:
		tree.adopt(d.pcr(ctx, obj)...)
	case *certificatesv1.ClusterTrustBundle:
		tree.adopt(d.bundle(obj))
	case *operatorv1alpha1.Cluster:
		tree.adopt(d.cluster(ctx, obj)...)
	case *operatorv1alpha1.KubeconfigRequest:
		tree.adopt(d.kubeconfigRequest(ctx, obj)...)
	case *controlplanev1alpha1.SubscriptionRequest:
		tree.adopt(d.subscription(ctx, obj)...)
	}
	tree.adopt(d.events(ctx, r.Object))
	return tree, nil
}

// get reads a related object; a problem becomes the text to show instead.
func (d *describer) get(ctx context.Context, ns, name string, obj client.Object) (string, bool) {
	err := d.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	switch {
	case err == nil:
		return "", true
	case apierrors.IsNotFound(err):
		return "not found", false
	case apierrors.IsForbidden(err):
		return "cannot be read: forbidden", false
	}
	return "cannot be read: " + oneLine(err).Error(), false
}

func (d *describer) events(ctx context.Context, obj client.Object) *node {
	list := &corev1.EventList{}
	opts := []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("involvedObject.uid", string(obj.GetUID()))}}
	if obj.GetNamespace() != "" {
		opts = append(opts, client.InNamespace(obj.GetNamespace()))
	}
	if err := d.c.List(ctx, list, opts...); err != nil {
		return &node{Text: "Events: cannot be read: " + oneLine(err).Error()}
	}
	return eventsNode(list.Items, d.now)
}

// jwks: the certificate Secret → the JWK Set ConfigMap → nginx, the signing Secret and
// the published keys.
func (d *describer) jwks(ctx context.Context, cfg *jwksv1alpha1.JWKSConfig) []*node {
	secret := &corev1.Secret{}
	source := &node{}
	if why, ok := d.get(ctx, cfg.Namespace, cfg.Spec.CertificateSecret, secret); !ok {
		source.Text = fmt.Sprintf("Secret %s/%s (certificate): %s", cfg.Namespace, cfg.Spec.CertificateSecret, why)
	} else {
		source.Text = fmt.Sprintf("Secret %s/%s (certificate): %s", cfg.Namespace, secret.Name, certificateFacts(secret.Data["tls.crt"], cfg.Status.LastKeyID, d.now))
	}
	cmName := cfg.Spec.ConfigMapName
	if cmName == "" {
		cmName = cfg.Name + "-jwks"
	}
	cm := &corev1.ConfigMap{}
	set := source.add("ConfigMap %s/%s (JWK Set)", cfg.Namespace, cmName)
	if why, ok := d.get(ctx, cfg.Namespace, cmName, cm); !ok {
		set.Text += ": " + why
	} else if keys, err := jwkset.Unmarshal([]byte(cm.Data[jwkset.DocumentKey])); err != nil {
		set.Text += ": " + jwkset.DocumentKey + " does not parse: " + oneLine(err).Error()
	} else {
		kids := make([]string, len(keys))
		for i, k := range keys {
			kids[i] = k.KeyID + " (" + k.Algorithm + ")"
		}
		set.Text += fmt.Sprintf(": %d keys: %s", len(keys), strings.Join(kids, ", "))
		if _, ok := cm.Data[jwkset.DiscoveryKey]; ok {
			set.Text += "; with the OpenID discovery document"
		}
	}
	if ptr.Deref(cfg.Spec.Nginx.Enabled, true) {
		deploy := &appsv1.Deployment{}
		n := set.add("Deployment %s/%s (nginx)", cfg.Namespace, cfg.Name)
		if why, ok := d.get(ctx, cfg.Namespace, cfg.Name, deploy); !ok {
			n.Text += ": " + why
		} else {
			n.Text += fmt.Sprintf(": %d/%d replicas available, %d updated", deploy.Status.AvailableReplicas, ptr.Deref(deploy.Spec.Replicas, 1), deploy.Status.UpdatedReplicas)
		}
		svc := &corev1.Service{}
		s := set.add("Service %s/%s (nginx)", cfg.Namespace, cfg.Name)
		if why, ok := d.get(ctx, cfg.Namespace, cfg.Name, svc); !ok {
			s.Text += ": " + why
		}
	} else {
		set.add("nginx: disabled (spec.nginx.enabled false)")
	}
	out := []*node{source}
	if cfg.Spec.SigningSecret != "" {
		signing := &corev1.Secret{}
		n := &node{Text: fmt.Sprintf("Secret %s/%s (signing)", cfg.Namespace, cfg.Spec.SigningSecret)}
		if why, ok := d.get(ctx, cfg.Namespace, cfg.Spec.SigningSecret, signing); !ok {
			n.Text += ": " + why
		} else {
			n.Text += ": " + certificateFacts(signing.Data["tls.crt"], cfg.Status.SigningKeyID, d.now)
		}
		if cfg.Status.PendingKeyID != "" {
			n.add("pending: %s, copied here %s", cfg.Status.PendingKeyID, when(metaTime(cfg.Status.PendingPromotionTime), d.now))
		}
		out = append(out, n)
	}
	if len(cfg.Status.Keys) > 0 {
		keys := &node{Text: "Published keys"}
		for _, k := range cfg.Status.Keys {
			keys.add("%s %s, %s, certificate expires %s", k.KeyID, k.Algorithm, keyRole(cfg, k, d.now), when(metaTime(k.NotAfter), d.now))
		}
		out = append(out, keys)
	}
	return out
}

// keyRole names what a published key is for, as the status says: the key signers use
// (spec.signingSecret's, or the current certificate's without one), the next one
// (published, waiting to be copied to the signing Secret), or a retiring one (kept in
// the set for the tokens it signed).
func keyRole(cfg *jwksv1alpha1.JWKSConfig, k jwksv1alpha1.PublishedKey, now time.Time) string {
	current := k.KeyID == cfg.Status.LastKeyID
	switch {
	case cfg.Spec.SigningSecret == "" && current:
		return "signing (the current certificate's)"
	case k.KeyID == cfg.Status.SigningKeyID && current:
		return "signing (current, in the signing Secret)"
	case k.KeyID == cfg.Status.SigningKeyID:
		return "signing (previous: the signing Secret holds it until the next key is promoted)"
	case current || k.KeyID == cfg.Status.PendingKeyID:
		if t := metaTime(cfg.Status.PendingPromotionTime); k.KeyID == cfg.Status.PendingKeyID && !t.IsZero() {
			return "next: published, promoted to the signing Secret " + when(t, now)
		}
		return "next: published, promoted to the signing Secret once every server serves it"
	case k.RetiredAt != nil:
		return "retiring: retired " + when(k.RetiredAt.Time, now) + ", kept for the tokens it signed"
	}
	return "published"
}

// certificateFacts says what a tls.crt holds: its leaf's kid and expiry, and whether that
// is the kid expected (never any key material).
func certificateFacts(crt []byte, expected string, now time.Time) string {
	kid, err := jwkset.KeyIDOf(crt)
	if err != nil {
		return "tls.crt: " + err.Error()
	}
	text := "kid " + kid
	if certs := bundleCertificates(string(crt)); len(certs) > 0 {
		text += ", certificate expires " + when(certs[0].NotAfter, now)
	}
	if expected != "" && kid != expected {
		text += fmt.Sprintf(" (not %s, the one in status: a change not published yet)", expected)
	}
	return text
}

// clusterRole lists the ClusterRoles its selectors match.
func (d *describer) clusterRole(ctx context.Context, role *rbacv1.ClusterRole) *node {
	all := &rbacv1.ClusterRoleList{}
	if err := d.c.List(ctx, all); err != nil {
		return &node{Text: "Matching ClusterRoles: cannot be listed: " + oneLine(err).Error()}
	}
	selectors, texts, err := parseSelectors(role.AggregationRule.ClusterRoleSelectors)
	if err != nil {
		return nil
	}
	n := &node{Text: "Matching ClusterRoles (" + strings.Join(texts, " | ") + ")"}
	for _, other := range all.Items {
		for _, s := range selectors {
			if other.Name != role.Name && s.Matches(labels.Set(other.Labels)) {
				n.add("ClusterRole %s: %d rules", other.Name, len(other.Rules))
				break
			}
		}
	}
	if len(n.Children) == 0 {
		n.add("none")
	}
	return n
}

// role lists the Roles of its namespace its annotation's selector matches.
func (d *describer) role(ctx context.Context, role *rbacv1.Role) *node {
	selector, err := labels.Parse(role.Annotations[aggregation.SelectorAnnotation])
	if err != nil {
		return nil
	}
	all := &rbacv1.RoleList{}
	if err := d.c.List(ctx, all, client.InNamespace(role.Namespace)); err != nil {
		return &node{Text: "Matching Roles: cannot be listed: " + oneLine(err).Error()}
	}
	n := &node{Text: "Matching Roles (" + selector.String() + ")"}
	for _, other := range all.Items {
		if other.Name != role.Name && selector.Matches(labels.Set(other.Labels)) {
			n.add("Role %s/%s: %d rules", other.Namespace, other.Name, len(other.Rules))
		}
	}
	if len(n.Children) == 0 {
		n.add("none")
	}
	return n
}

// checksums lists the other objects of the same kind and scope in the namespace: a
// change publishes a new object before the older ones go.
func (d *describer) checksums(ctx context.Context, obj client.Object, list client.ObjectList, kindName string) *node {
	scope := obj.GetAnnotations()[tenginev1alpha1.ScopeAnnotation]
	n := &node{Text: "Scope: " + orNone(scope)}
	if err := d.c.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		n.add("other objects: cannot be listed: %s", oneLine(err).Error())
		return n
	}
	items, _ := meta.ExtractList(list)
	for _, it := range items {
		o := it.(client.Object)
		if o.GetName() == obj.GetName() || o.GetAnnotations()[tenginev1alpha1.ScopeAnnotation] != scope {
			continue
		}
		// Newer as data planes take it: created later, or at the same second with a
		// greater name (pkg/dataplane).
		rel := "older, being replaced"
		if mine, theirs := obj.GetCreationTimestamp().Time, o.GetCreationTimestamp().Time; theirs.After(mine) || theirs.Equal(mine) && o.GetName() > obj.GetName() {
			rel = "newer: this one is being replaced"
		}
		n.add("%s %s/%s (%s), age %s", kindName, o.GetNamespace(), o.GetName(), rel, age(o.GetCreationTimestamp().Time, d.now))
	}
	n.add("compare with the cluster: %s checksum diff%s", commandName(), namespaceArgs(scope))
	return n
}

// namespaceArgs are the --namespace flags of `checksum diff` for a recorded scope.
func namespaceArgs(scope string) string {
	s, err := checksum.ParseScope(scope)
	if err != nil || s.AllNamespaces() {
		return ""
	}
	return " --namespace " + strings.Join(s.Namespaces, " --namespace ")
}

func (d *describer) pcr(ctx context.Context, p *certificatesv1.PodCertificateRequest) []*node {
	pod := &corev1.Pod{}
	n := &node{Text: fmt.Sprintf("Pod %s/%s", p.Namespace, p.Spec.PodName)}
	if why, ok := d.get(ctx, p.Namespace, p.Spec.PodName, pod); !ok {
		n.Text += ": " + why
	} else if pod.UID != p.Spec.PodUID {
		n.Text += fmt.Sprintf(": another pod of that name (UID %s, the request's is %s)", pod.UID, p.Spec.PodUID)
	} else {
		n.Text += fmt.Sprintf(" on node %s, ServiceAccount %s", pod.Spec.NodeName, pod.Spec.ServiceAccountName)
	}
	facts := &node{Text: "Request"}
	facts.add("signer %s, node %s, ServiceAccount %s", p.Spec.SignerName, p.Spec.NodeName, p.Spec.ServiceAccountName)
	if p.Status.NotAfter != nil {
		facts.add("certificate valid until %s (%s), refresh from %s", p.Status.NotAfter.UTC().Format(time.RFC3339), when(p.Status.NotAfter.Time, d.now), when(metaTime(p.Status.BeginRefreshAt), d.now))
	}
	return []*node{n, facts, conditionsNode(p.Status.Conditions, d.now)}
}

// bundle lists the CAs of a signer's ClusterTrustBundle: the first signs.
func (d *describer) bundle(b *certificatesv1.ClusterTrustBundle) *node {
	n := &node{Text: "CAs of signer " + b.Spec.SignerName}
	for i, c := range bundleCertificates(b.Spec.TrustBundle) {
		role := "published (next or retired)"
		if i == 0 {
			role = "signing"
		}
		sum := sha256.Sum256(c.Raw)
		n.add("%q %s: valid %s to %s (%s), SHA-256 %s…", c.Subject.CommonName, role, c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339),
			when(c.NotAfter, d.now), hex.EncodeToString(sum[:8]))
	}
	return n
}

// cluster: Cluster → Shoot (or the brought-along kubeconfig) → SubscriptionRequest →
// KubeconfigRequests.
func (d *describer) cluster(ctx context.Context, c *operatorv1alpha1.Cluster) []*node {
	var out []*node
	if ref := c.Spec.KubeconfigSecretRef; ref != nil {
		n := &node{Text: fmt.Sprintf("Secret %s/%s (brought-along kubeconfig, key %s)", c.Namespace, ref.Name, orDefault(ref.Key, "kubeconfig"))}
		md := &metav1.PartialObjectMetadata{}
		md.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if why, ok := d.get(ctx, c.Namespace, ref.Name, md); !ok {
			n.Text += ": " + why
		}
		out = append(out, n)
	} else {
		name := c.Status.ShootName
		if name == "" {
			name = "(not created yet)"
		}
		shootNode := &node{Text: "Shoot " + name + " (in the Gardener project)"}
		sr := &controlplanev1alpha1.SubscriptionRequest{}
		srNode := shootNode.add("SubscriptionRequest %s/%s", c.Namespace, c.Name)
		if why, ok := d.get(ctx, c.Namespace, c.Name, sr); !ok {
			srNode.Text += ": " + why
		} else {
			r := subscriptionRow(sr, d.now)
			srNode.Text += fmt.Sprintf(": Ready=%s %s, credential %s", r.Ready, r.Reason, orNone(sr.Status.GardenerSecretName))
		}
		out = append(out, shootNode)
	}
	requests := &node{Text: "KubeconfigRequests"}
	for _, ns := range append([]string{c.Namespace}, c.Spec.KubeconfigRequestNamespaces...) {
		list := &operatorv1alpha1.KubeconfigRequestList{}
		if err := d.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			requests.add("in namespace %s: cannot be listed: %s", ns, oneLine(err).Error())
			continue
		}
		for i := range list.Items {
			kr := &list.Items[i]
			if kr.ClusterKey() != (types.NamespacedName{Namespace: c.Namespace, Name: c.Name}) {
				continue
			}
			r := kubeconfigRow(kr, d.now)
			requests.add("KubeconfigRequest %s/%s: Ready=%s %s, expires %s", kr.Namespace, kr.Name, r.Ready, orNone(r.Reason), when(metaTime(kr.Status.ExpirationTimestamp), d.now))
		}
	}
	if len(requests.Children) == 0 {
		requests.add("none")
	}
	return append(out, requests)
}

func (d *describer) kubeconfigRequest(ctx context.Context, kr *operatorv1alpha1.KubeconfigRequest) []*node {
	key := kr.ClusterKey()
	cluster := &operatorv1alpha1.Cluster{}
	cn := &node{Text: "Cluster " + key.String()}
	if why, ok := d.get(ctx, key.Namespace, key.Name, cluster); !ok {
		cn.Text += ": " + why
	} else {
		r := clusterRow(cluster, d.now)
		cn.Text += fmt.Sprintf(": Ready=%s %s, phase %s", r.Ready, orNone(r.Reason), clusterPhase(cluster))
		if !cluster.GrantsKubeconfigRequestsFrom(kr.Namespace) {
			cn.add("does not grant namespace %s (spec.kubeconfigRequestNamespaces)", kr.Namespace)
		}
	}
	if g := kr.Status.GrantedIn; g != nil && g.Key() != key {
		cn.add("still holding grants in Cluster %s (being withdrawn)", g.Key())
	}
	issued := &node{Text: "Credential"}
	issued.add("issued %s, expires %s", when(metaTime(kr.Status.IssuedAt), d.now), when(metaTime(kr.Status.ExpirationTimestamp), d.now))
	if kr.Status.SecretName != "" {
		s := issued.add("Secret %s/%s (holds the kubeconfig)", kr.Namespace, kr.Status.SecretName)
		md := &metav1.PartialObjectMetadata{}
		md.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if why, ok := d.get(ctx, kr.Namespace, kr.Status.SecretName, md); !ok {
			s.Text += ": " + why
		}
	}
	for _, a := range []string{operatorv1alpha1.RotateAnnotation, operatorv1alpha1.RevokeAnnotation} {
		if v, ok := kr.Annotations[a]; ok {
			issued.add("annotation %s=%s", a, v)
		}
	}
	issued.add("write it to a file: %s kubeconfig %s -n %s -o FILE", commandName(), kr.Name, kr.Namespace)
	return []*node{cn, issued}
}

func (d *describer) subscription(ctx context.Context, sr *controlplanev1alpha1.SubscriptionRequest) []*node {
	n := &node{Text: fmt.Sprintf("credential (CredentialsBinding in the Gardener project): %s", orNone(sr.Status.GardenerSecretName))}
	out := []*node{n}
	for _, ref := range sr.OwnerReferences {
		if ref.Kind != "Cluster" {
			continue
		}
		c := &operatorv1alpha1.Cluster{}
		cn := &node{Text: fmt.Sprintf("owned by Cluster %s/%s", sr.Namespace, ref.Name)}
		if why, ok := d.get(ctx, sr.Namespace, ref.Name, c); !ok {
			cn.Text += ": " + why
		} else {
			cn.Text += ": phase " + clusterPhase(c)
		}
		out = append(out, cn)
	}
	return out
}

// pod: the pod's podCertificate projections and their requests, and its events (the
// node agent's warnings).
func (d *describer) pod(ctx context.Context, ns, name string) (*node, error) {
	pod, reports, err := inspectPod(ctx, d.c, ns, name, d.now)
	if err != nil {
		return nil, err
	}
	tree := &node{Text: fmt.Sprintf("Pod %s/%s  node %s, ServiceAccount %s  age %s", ns, name, orNone(pod.Spec.NodeName), pod.Spec.ServiceAccountName, age(pod.CreationTimestamp.Time, d.now))}
	tree.adopt(projectionNodes(reports, d.now)...)
	tree.adopt(d.events(ctx, pod))
	return tree, nil
}

// inspectPod reads a pod and its namespace's PodCertificateRequests.
func inspectPod(ctx context.Context, c client.Client, ns, name string, now time.Time) (*corev1.Pod, []podcert.ProjectionReport, error) {
	pod := &corev1.Pod{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("pod %q not found in namespace %q", name, ns)
		}
		return nil, nil, oneLine(err)
	}
	pcrs := &certificatesv1.PodCertificateRequestList{}
	if err := c.List(ctx, pcrs, client.InNamespace(ns)); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil, errors.New("the cluster does not serve PodCertificateRequests (certificates.k8s.io/v1)")
		}
		return nil, nil, oneLine(err)
	}
	return pod, podcert.Inspect(podcert.WithAnnotationProjection(pod), pcrs.Items, now), nil
}

// annotationSource names, in what inspect prints, the projection of a pod opted in by
// annotation (podcert.AnnotationVolume): the node agent serves it without a volume.
const annotationSource = "annotation " + certificates.SignerAnnotation

// projectionNodes are the podCertificate projections of a pod, with their requests.
func projectionNodes(reports []podcert.ProjectionReport, now time.Time) []*node {
	if len(reports) == 0 {
		return []*node{{Text: "no podCertificate projection, and no annotation " + certificates.SignerAnnotation}}
	}
	var out []*node
	for _, r := range reports {
		source := fmt.Sprintf("volume %s, source %d", r.Key.VolumeName, r.Key.SourceIndex)
		if r.Key.VolumeName == podcert.AnnotationVolume {
			source = annotationSource + " (served by the node agent, no volume)"
		}
		n := &node{Text: fmt.Sprintf("%s: %s %s  state %s", source, r.SignerName, orNone(r.KeyType), r.State)}
		if !r.NotAfter.IsZero() {
			n.add("certificate notAfter %s (%s), beginRefreshAt %s (%s)", r.NotAfter.UTC().Format(time.RFC3339), when(r.NotAfter, now),
				r.BeginRefreshAt.UTC().Format(time.RFC3339), when(r.BeginRefreshAt, now))
		}
		if r.Reason != "" || r.Message != "" {
			n.add("%s", strings.TrimPrefix(strings.Join([]string{r.Reason, r.Message}, ": "), ": "))
		}
		for _, req := range r.Requests {
			text := fmt.Sprintf("PodCertificateRequest %s: %s", req.Name, req.Outcome)
			if req.Reason != "" && req.Reason != req.Outcome {
				text += " " + req.Reason
			}
			if req.Message != "" {
				text += ": " + req.Message
			}
			if !req.NotAfter.IsZero() {
				text += ", notAfter " + when(req.NotAfter, now)
			}
			n.add("%s (created %s)", text, when(req.Created, now))
		}
		out = append(out, n)
	}
	return out
}
