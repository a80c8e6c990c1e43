// Package tenantkubeconfig turns a kubeconfig a tenant brought along (a Cluster's
// kubeconfigSecretRef) into a rest.Config the manager may use, and tenant-chosen servers'
// failures into messages a tenant may read. It has no Kubernetes client.
//
// A kubeconfig is a program as much as a file: client-go runs its exec plugins, reads the
// files it names (the manager's own ServiceAccount token among them), impersonates whom
// it says and dials through the proxy it names. Read by the manager, all of that would run
// with the manager's rights, not the tenant's. So, as Flux does for the kubeconfigs of its
// remote applies (fluxcd/pkg runtime/client KubeConfig), only the inline parts are taken:
// the server, CA data, client certificate and key data, and a bearer token. Unlike Flux,
// whatever else the kubeconfig says is refused by name rather than dropped silently, so
// the tenant learns which field to remove.
package tenantkubeconfig

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// Policy says what a tenant's kubeconfig may use beyond the inline credentials. The zero
// value allows nothing more (and has no timeout: use DefaultPolicy).
type Policy struct {
	// AllowExec lets users[].user.exec credential plugins run, but only the commands in
	// ExecCommands (client-go's plugin allowlist enforces it again when it runs them).
	AllowExec bool
	// ExecCommands are the absolute paths of the plugins AllowExec lets run.
	ExecCommands []string
	// AllowInsecureTLS honours clusters[].cluster.insecure-skip-tls-verify.
	AllowInsecureTLS bool
	// Timeout bounds connecting to a tenant's server and each request to it: a server
	// that never answers must not hold a worker for long.
	Timeout time.Duration
	// MaxResponseBytes bounds each answer of a tenant's server, counted as it is read
	// (compression is off: what is read is what is decoded).
	MaxResponseBytes int64
	// MaxInFlight bounds the requests to one tenant's server at once, across controllers.
	MaxInFlight int
}

// DefaultPolicy is the flag default: inline credentials only, 5 s per request, answers of
// at most 8 MiB (a discovery document of a cluster with hundreds of CRDs is about 2 MiB),
// 8 requests at once per server.
func DefaultPolicy() Policy {
	return Policy{Timeout: 5 * time.Second, MaxResponseBytes: 8 << 20, MaxInFlight: 8}
}

// AddFlags registers the policy's flags (the names Flux uses for the same switches).
func (p *Policy) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&p.AllowExec, "insecure-kubeconfig-exec", p.AllowExec, "Let brought-along kubeconfigs use exec credential plugins, only those in --insecure-kubeconfig-exec-commands; they run inside the manager, with its rights.")
	fs.StringSliceVar(&p.ExecCommands, "insecure-kubeconfig-exec-commands", p.ExecCommands, "Absolute paths of the exec credential plugins --insecure-kubeconfig-exec allows (the tenant still chooses their arguments and environment).")
	fs.BoolVar(&p.AllowInsecureTLS, "insecure-kubeconfig-tls", p.AllowInsecureTLS, "Let brought-along kubeconfigs turn off TLS verification (insecure-skip-tls-verify).")
	fs.DurationVar(&p.Timeout, "cluster-target-timeout", p.Timeout, "Limit on connecting to a tenant's cluster and on each request to it (brought-along kubeconfigs).")
	fs.Int64Var(&p.MaxResponseBytes, "cluster-target-max-response-bytes", p.MaxResponseBytes, "Largest answer read from a tenant's cluster (brought-along kubeconfigs), in bytes, uncompressed: a longer one fails the call (ClusterUnreachable, naming this flag).")
	fs.IntVar(&p.MaxInFlight, "cluster-target-max-in-flight", p.MaxInFlight, "Most requests to one tenant's cluster at once (brought-along kubeconfigs), across controllers; more wait.")
}

// Validate checks the flags.
func (p Policy) Validate() error {
	if p.Timeout <= 0 {
		return fmt.Errorf("--cluster-target-timeout must be positive, not %v", p.Timeout)
	}
	if p.MaxResponseBytes < 64<<10 {
		return fmt.Errorf("--cluster-target-max-response-bytes must be at least 65536 (a discovery answer), not %d", p.MaxResponseBytes)
	}
	if p.MaxInFlight < 1 {
		return fmt.Errorf("--cluster-target-max-in-flight must be at least 1, not %d", p.MaxInFlight)
	}
	if p.AllowExec && len(p.ExecCommands) == 0 {
		return errors.New("--insecure-kubeconfig-exec needs --insecure-kubeconfig-exec-commands: the plugins allowed to run (absolute paths)")
	}
	if !p.AllowExec && len(p.ExecCommands) != 0 {
		return errors.New("--insecure-kubeconfig-exec-commands is set without --insecure-kubeconfig-exec")
	}
	for _, c := range p.ExecCommands {
		if !filepath.IsAbs(c) || filepath.Clean(c) != c {
			return fmt.Errorf("--insecure-kubeconfig-exec-commands: %q is not a clean absolute path, e.g. /usr/local/bin/kubelogin", c)
		}
	}
	return nil
}

// ErrInvalid marks a kubeconfig that does not parse or names no usable context.
var ErrInvalid = errors.New("invalid kubeconfig")

// RefusedError is a kubeconfig field the policy refuses, named by its path in the
// kubeconfig (e.g. users[0].user.tokenFile).
type RefusedError struct {
	Field string
	Why   string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("kubeconfig field %s is refused: %s", e.Field, e.Why)
}

// RESTConfig is the one way a kubeconfig from a Secret becomes a rest.Config: it parses
// raw, refuses (with a *RefusedError naming the first such field) whatever p does not
// allow, and builds the config from the allowed inline fields of the current context
// only, with p's timeout and no proxy. Every cluster and user entry is checked, not only
// the current one, so a refused field is reported wherever it is.
func RESTConfig(raw []byte, p Policy) (*rest.Config, error) {
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(raw, &kc); err != nil {
		// yaml's message quotes no values, only positions and types.
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for i := range kc.Clusters {
		if err := checkCluster(fmt.Sprintf("clusters[%d].cluster", i), &kc.Clusters[i].Cluster, p); err != nil {
			return nil, err
		}
	}
	for i := range kc.AuthInfos {
		if err := checkUser(fmt.Sprintf("users[%d].user", i), &kc.AuthInfos[i].AuthInfo, p); err != nil {
			return nil, err
		}
	}
	ctxName := kc.CurrentContext
	if ctxName == "" && len(kc.Contexts) == 1 {
		ctxName = kc.Contexts[0].Name
	}
	ci := slices.IndexFunc(kc.Contexts, func(c clientcmdv1.NamedContext) bool { return c.Name == ctxName })
	if ci < 0 {
		return nil, fmt.Errorf("%w: current-context %q names no context", ErrInvalid, ctxName)
	}
	kctx := kc.Contexts[ci].Context
	cl := slices.IndexFunc(kc.Clusters, func(c clientcmdv1.NamedCluster) bool { return c.Name == kctx.Cluster })
	if cl < 0 {
		return nil, fmt.Errorf("%w: contexts[%d].context.cluster %q names no cluster", ErrInvalid, ci, kctx.Cluster)
	}
	cluster := kc.Clusters[cl].Cluster
	server, err := checkServer(fmt.Sprintf("clusters[%d].cluster.server", cl), cluster.Server)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{
		Host:      server,
		UserAgent: "trustplane",
		// Never compressed, whatever the kubeconfig says: a small gzip body may inflate to
		// gigabytes (bounded.go).
		DisableCompression: true,
		WrapTransport:      bounded(p.MaxResponseBytes, p.MaxInFlight),
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: cluster.TLSServerName,
			CAData:     cluster.CertificateAuthorityData,
			Insecure:   cluster.InsecureSkipTLSVerify && p.AllowInsecureTLS,
		},
		Timeout: p.Timeout,
		// Never the manager's HTTP(S)_PROXY: that proxy carries the manager's own
		// traffic from where it stands, and a tenant must not reach through it whatever
		// it can reach (or present whatever credentials it adds). A tenant's server is
		// dialled directly, as a proxy-url of the tenant's choosing is refused too.
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil },
		Dial:  (&net.Dialer{Timeout: p.Timeout, KeepAlive: 30 * time.Second}).DialContext,
	}
	if kctx.AuthInfo != "" {
		u := slices.IndexFunc(kc.AuthInfos, func(a clientcmdv1.NamedAuthInfo) bool { return a.Name == kctx.AuthInfo })
		if u < 0 {
			return nil, fmt.Errorf("%w: contexts[%d].context.user %q names no user", ErrInvalid, ci, kctx.AuthInfo)
		}
		user := kc.AuthInfos[u].AuthInfo
		cfg.CertData, cfg.KeyData, cfg.BearerToken = user.ClientCertificateData, user.ClientKeyData, user.Token
		if user.Exec != nil {
			cfg.ExecProvider = execProvider(user.Exec, p)
		}
	}
	return cfg, nil
}

func refused(field, why string) error { return &RefusedError{Field: field, Why: why} }

const fileRef = "files are read from the manager's file system, not the tenant's; inline the data instead"

func checkCluster(path string, c *clientcmdv1.Cluster, p Policy) error {
	switch {
	case c.CertificateAuthority != "":
		return refused(path+".certificate-authority", fileRef+" (certificate-authority-data)")
	case c.ProxyURL != "":
		return refused(path+".proxy-url", "the manager dials a tenant's server directly, never through a proxy the tenant names")
	case c.InsecureSkipTLSVerify && !p.AllowInsecureTLS:
		return refused(path+".insecure-skip-tls-verify", "TLS verification cannot be turned off unless the operator runs with --insecure-kubeconfig-tls; give certificate-authority-data instead")
	}
	return nil
}

func checkUser(path string, u *clientcmdv1.AuthInfo, p Policy) error {
	switch {
	case u.TokenFile != "":
		return refused(path+".tokenFile", fileRef+" (token)")
	case u.ClientCertificate != "":
		return refused(path+".client-certificate", fileRef+" (client-certificate-data)")
	case u.ClientKey != "":
		return refused(path+".client-key", fileRef+" (client-key-data)")
	case u.AuthProvider != nil:
		return refused(path+".auth-provider", "auth provider plugins are not supported; use a token or a client certificate")
	case u.Impersonate != "":
		return refused(path+".as", "impersonation is not allowed: the kubeconfig's own credentials are used as they are")
	case u.ImpersonateUID != "":
		return refused(path+".as-uid", "impersonation is not allowed: the kubeconfig's own credentials are used as they are")
	case len(u.ImpersonateGroups) != 0:
		return refused(path+".as-groups", "impersonation is not allowed: the kubeconfig's own credentials are used as they are")
	case len(u.ImpersonateUserExtra) != 0:
		return refused(path+".as-user-extra", "impersonation is not allowed: the kubeconfig's own credentials are used as they are")
	case u.Username != "" || u.Password != "":
		return refused(path+".username", "basic authentication is not supported; use a token or a client certificate")
	case u.Exec != nil && !p.AllowExec:
		return refused(path+".exec", "exec credential plugins run inside the manager and are allowed only with --insecure-kubeconfig-exec")
	case u.Exec != nil && !slices.Contains(p.ExecCommands, u.Exec.Command):
		return refused(path+".exec.command", fmt.Sprintf("%q is not in --insecure-kubeconfig-exec-commands (absolute paths, matched exactly)", u.Exec.Command))
	}
	return nil
}

// checkServer accepts an absolute http(s) URL with a host and nothing a URL could hide
// credentials or surprises in.
func checkServer(field, server string) (string, error) {
	u, err := url.Parse(server)
	switch {
	case server == "":
		return "", fmt.Errorf("%w: %s is empty (e.g. https://api.example.com:6443)", ErrInvalid, field)
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return "", fmt.Errorf("%w: %s is not an http(s) URL with a host (e.g. https://api.example.com:6443)", ErrInvalid, field)
	case u.User != nil:
		return "", refused(field, "credentials in the server URL are not allowed")
	case u.RawQuery != "" || u.Fragment != "":
		return "", refused(field, "a query or fragment in the server URL is not allowed")
	}
	return server, nil
}

// execProvider copies the plugin's settings and pins client-go's allowlist to p's
// commands: even a command resolved differently at run time does not run unless listed.
func execProvider(in *clientcmdv1.ExecConfig, p Policy) *clientcmdapi.ExecConfig {
	out := &clientcmdapi.ExecConfig{
		Command:            in.Command,
		Args:               slices.Clone(in.Args),
		APIVersion:         in.APIVersion,
		InstallHint:        in.InstallHint,
		ProvideClusterInfo: in.ProvideClusterInfo,
		// Nobody is at the manager's terminal.
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		PluginPolicy:    clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyAllowlist},
	}
	for _, e := range in.Env {
		out.Env = append(out.Env, clientcmdapi.ExecEnvVar{Name: e.Name, Value: e.Value})
	}
	for _, c := range p.ExecCommands {
		out.PluginPolicy.Allowlist = append(out.PluginPolicy.Allowlist, clientcmdapi.AllowlistEntry{Command: c})
	}
	return out
}

// HostOf is the host[:port] of a rest.Config's server, for messages.
func HostOf(cfg *rest.Config) string {
	if u, err := url.Parse(cfg.Host); err == nil && u.Host != "" {
		return u.Host
	}
	return strings.TrimPrefix(strings.TrimPrefix(cfg.Host, "https://"), "http://")
}
