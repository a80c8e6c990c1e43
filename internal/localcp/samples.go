package localcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// What the samples in config/samples expect of the cluster they are applied to beyond the
// CRDs; `make run` provides it on its local control plane.
const (
	// SampleNodeName is the Node of the pod-certificate sample: make run runs a node
	// agent for it, as kubelet would run its pod-certificate manager.
	SampleNodeName = "sample-node"
	// SampleClusterNamespace and SampleClusterSecret name the Secret whose "kubeconfig"
	// the brought-along Cluster sample reads.
	SampleClusterNamespace = "default"
	SampleClusterSecret    = "sample-cluster-kubeconfig"

	// The identity behind that kubeconfig: a ServiceAccount bound to cluster-admin, in a
	// namespace of its own so that nothing else shares its Secrets or RBAC.
	sampleAdminNamespace = "trustplane-samples"
	sampleAdminName      = "sample-cluster-admin"
	sampleAdminBinding   = "trustplane-sample-cluster-admin"
	// A developer's session may last days; make run issues a new token on every start
	// anyway, because the API server's signing key is new on every start.
	sampleAdminTokenLifetime = 7 * 24 * time.Hour

	// fieldManager owns everything make run applies.
	fieldManager = "trustplane-run"
)

// WriteSampleClusterKubeconfig gives the brought-along Cluster sample a cluster to bring
// along: the one cfg reaches. It applies a ServiceAccount bound to cluster-admin, asks
// the TokenRequest API for a token and stores a kubeconfig with cfg's server, its CA
// inline and that token in Secret SampleClusterNamespace/SampleClusterSecret. The
// kubeconfig holds no file paths and no exec plugins, so the manager can use it wherever
// it runs. Calling it again replaces the token, e.g. after a restart of the API server
// has made the previous one invalid.
func WriteSampleClusterKubeconfig(ctx context.Context, cfg *rest.Config) error {
	if cfg.Host == "" || len(cfg.CAData) == 0 {
		return errors.New("the sample cluster kubeconfig needs the API server's URL and CA certificate in the config")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	if err := applySampleAdmin(ctx, cs); err != nil {
		return err
	}
	token, err := cs.CoreV1().ServiceAccounts(sampleAdminNamespace).CreateToken(ctx, sampleAdminName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(sampleAdminTokenLifetime.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", sampleAdminNamespace, sampleAdminName, err)
	}
	kubeconfig, err := tokenKubeconfig(cfg, token.Status.Token)
	if err != nil {
		return err
	}
	secret := corev1ac.Secret(SampleClusterSecret, SampleClusterNamespace).
		WithLabels(managedBy()).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{"kubeconfig": kubeconfig})
	if _, err := cs.CoreV1().Secrets(SampleClusterNamespace).Apply(ctx, secret, applyOptions()); err != nil {
		return fmt.Errorf("applying Secret %s/%s: %w", SampleClusterNamespace, SampleClusterSecret, err)
	}
	return nil
}

// applySampleAdmin applies the namespace, the ServiceAccount and its cluster-admin binding.
func applySampleAdmin(ctx context.Context, cs kubernetes.Interface) error {
	ns := corev1ac.Namespace(sampleAdminNamespace).WithLabels(managedBy())
	if _, err := cs.CoreV1().Namespaces().Apply(ctx, ns, applyOptions()); err != nil {
		return fmt.Errorf("applying namespace %s: %w", sampleAdminNamespace, err)
	}
	sa := corev1ac.ServiceAccount(sampleAdminName, sampleAdminNamespace).WithLabels(managedBy())
	if _, err := cs.CoreV1().ServiceAccounts(sampleAdminNamespace).Apply(ctx, sa, applyOptions()); err != nil {
		return fmt.Errorf("applying ServiceAccount %s/%s: %w", sampleAdminNamespace, sampleAdminName, err)
	}
	binding := rbacv1ac.ClusterRoleBinding(sampleAdminBinding).
		WithLabels(managedBy()).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName("cluster-admin")).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(sampleAdminNamespace).WithName(sampleAdminName))
	if _, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, binding, applyOptions()); err != nil {
		return fmt.Errorf("applying ClusterRoleBinding %s: %w", sampleAdminBinding, err)
	}
	return nil
}

// tokenKubeconfig is a self-contained kubeconfig for cfg's API server that authenticates
// with token.
func tokenKubeconfig(cfg *rest.Config, token string) ([]byte, error) {
	const name = "trustplane-local"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[sampleAdminName] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: sampleAdminName}
	kc.CurrentContext = name
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("encoding the sample cluster kubeconfig: %w", err)
	}
	return raw, nil
}

func managedBy() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": fieldManager}
}

func applyOptions() metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
}

// ApplyStandInNode creates Node SampleNodeName when no kubelet runs for it: the node agent
// needs the Node (its UID goes into every PodCertificateRequest), and the sample Pods are
// bound to it. A real node's kubelet registers the Node itself.
func ApplyStandInNode(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	node := corev1ac.Node(SampleNodeName).WithLabels(managedBy())
	if _, err := cs.CoreV1().Nodes().Apply(ctx, node, applyOptions()); err != nil {
		return fmt.Errorf("applying the stand-in Node %s: %w", SampleNodeName, err)
	}
	return nil
}
