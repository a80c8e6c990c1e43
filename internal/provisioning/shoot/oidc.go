package shoot

import (
	"fmt"
	"net/url"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
)

const (
	// AuthenticationConfigKey is the ConfigMap key Gardener reads the
	// AuthenticationConfiguration from (its authentication-configuration admission webhook
	// and gardenlet both use "config.yaml").
	AuthenticationConfigKey = "config.yaml"
	// AuthenticationConfigAPIVersion is the version infrastructure-manager writes; Gardener
	// decodes apiserver.config.k8s.io v1alpha1 and v1beta1.
	AuthenticationConfigAPIVersion = "apiserver.config.k8s.io/v1beta1"
)

// AuthenticationConfigMapName is the ConfigMap in the project namespace that holds the
// structured authentication of the Shoot shootName, named as infrastructure-manager names it.
func AuthenticationConfigMapName(shootName string) string {
	return "structured-auth-config-" + shootName
}

// signingAlgorithms kube-apiserver's JWT authenticator accepts. Structured authentication
// has no list to narrow them: a Cluster's signingAlgs can only be checked, not passed on.
var signingAlgorithms = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"}

// oidcOf is the OIDC issuer of the Cluster's Shoot: its own spec.oidcConfig, else the
// landscape's default one (infrastructure-manager's kubernetes.defaultOperatorOidc, as
// pkg/gardener/structuredauth/oidcconfig.go GetOIDCConfigOrDefault picks it), else nil.
func oidcOf(spec operatorv1alpha1.ClusterSpec, p Params) *operatorv1alpha1.OIDCConfig {
	if spec.OIDCConfig != nil {
		return spec.OIDCConfig
	}
	if p.Landscape.DefaultOIDC != nil {
		return p.Landscape.DefaultOIDC.config()
	}
	return nil
}

// config is the landscape's OIDC issuer as a Cluster's spec.oidcConfig says it.
func (o *LandscapeOIDC) config() *operatorv1alpha1.OIDCConfig {
	return &operatorv1alpha1.OIDCConfig{ClientID: o.ClientID, IssuerURL: o.IssuerURL, GroupsClaim: o.GroupsClaim,
		UsernameClaim: o.UsernameClaim, UsernamePrefix: o.UsernamePrefix, SigningAlgs: o.SigningAlgs}
}

// AuthenticationConfigMap is the ConfigMap with the AuthenticationConfiguration of the
// Cluster's Shoot (its spec.oidcConfig, or the landscape's defaultOIDC, as one JWT
// authenticator), or nil when it has no OIDC. The caller applies it before the Shoot:
// Gardener refuses a Shoot that names a ConfigMap that does not exist.
func AuthenticationConfigMap(cluster *operatorv1alpha1.Cluster, p Params) (*corev1.ConfigMap, error) {
	oidc := oidcOf(cluster.Spec, p)
	if oidc == nil {
		return nil, nil
	}
	if problems := oidcProblems(oidc); len(problems) > 0 {
		return nil, &InvalidError{Problems: problems}
	}
	raw, err := yaml.Marshal(authenticationConfiguration(oidc))
	if err != nil {
		return nil, fmt.Errorf("encoding the AuthenticationConfiguration: %w", err)
	}
	shootName := p.NameOf(cluster)
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: AuthenticationConfigMapName(shootName), Namespace: p.Namespace,
			Labels: map[string]string{operatorv1alpha1.ClusterNamespaceLabel: cluster.Namespace, operatorv1alpha1.ClusterNameLabel: cluster.Name}},
		Data: map[string]string{AuthenticationConfigKey: string(raw)},
	}, nil
}

// authenticationConfiguration maps the legacy OIDC flags onto one JWT authenticator with
// the meaning kube-apiserver gave them: the client ID is the audience; the username claim
// defaults to "sub"; the username prefix "-" means none, and an unset one means none for
// the "email" claim and "<issuer>#" for any other; groups are not prefixed.
func authenticationConfiguration(o *operatorv1alpha1.OIDCConfig) map[string]any {
	usernameClaim := o.UsernameClaim
	if usernameClaim == "" {
		usernameClaim = "sub"
	}
	var usernamePrefix string
	switch {
	case o.UsernamePrefix == "-":
		usernamePrefix = ""
	case o.UsernamePrefix != "":
		usernamePrefix = o.UsernamePrefix
	case usernameClaim != "email":
		usernamePrefix = o.IssuerURL + "#"
	}
	// kube-apiserver demands a prefix (empty for none) wherever a claim is mapped.
	mappings := map[string]any{"username": map[string]any{"claim": usernameClaim, "prefix": usernamePrefix}}
	if o.GroupsClaim != "" {
		mappings["groups"] = map[string]any{"claim": o.GroupsClaim, "prefix": ""}
	}
	return map[string]any{
		"apiVersion": AuthenticationConfigAPIVersion,
		"kind":       "AuthenticationConfiguration",
		"jwt": []any{map[string]any{
			"issuer":        map[string]any{"url": o.IssuerURL, "audiences": []any{o.ClientID}},
			"claimMappings": mappings,
		}},
	}
}

// oidcProblems are what kube-apiserver's validation of an AuthenticationConfiguration
// (k8s.io/apiserver pkg/apis/apiserver/validation), which Gardener runs on the ConfigMap,
// would refuse in the authenticator made from o.
func oidcProblems(o *operatorv1alpha1.OIDCConfig) []string {
	var problems []string
	if o.ClientID == "" {
		problems = append(problems, "spec.oidcConfig.clientID is required")
	}
	switch u, err := url.Parse(o.IssuerURL); {
	case o.IssuerURL == "":
		problems = append(problems, "spec.oidcConfig.issuerURL is required")
	case err != nil:
		problems = append(problems, fmt.Sprintf("spec.oidcConfig.issuerURL %q is not a URL", o.IssuerURL))
	case u.Scheme != "https" || u.Host == "":
		problems = append(problems, fmt.Sprintf("spec.oidcConfig.issuerURL %q must be an https URL", o.IssuerURL))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		problems = append(problems, fmt.Sprintf("spec.oidcConfig.issuerURL %q must not contain a user, query or fragment", o.IssuerURL))
	}
	for _, alg := range o.SigningAlgs {
		if !slices.Contains(signingAlgorithms, alg) {
			problems = append(problems, fmt.Sprintf("spec.oidcConfig.signingAlgs: %q is not one of %v", alg, signingAlgorithms))
		}
	}
	return problems
}
