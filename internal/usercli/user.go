package usercli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/scheme"
)

// pluginName is the file name under which kubectl runs the binary as a plugin
// (`kubectl trustplane ...`).
const pluginName = "kubectl-trustplane"

// commandName is how the user called the binary: "kubectl trustplane" when kubectl runs
// it as a plugin, else "trustplane". Help and examples say it.
func commandName() string {
	if base := filepath.Base(os.Args[0]); base == pluginName || strings.HasPrefix(base, pluginName+".") {
		return "kubectl trustplane"
	}
	return "trustplane"
}

// examples indents example lines and starts each with the command's name; a line that
// says {tp} itself (a pipeline) gets the name there instead.
func examples(lines ...string) string {
	name := commandName()
	out := make([]string, len(lines))
	for i, l := range lines {
		switch {
		case strings.Contains(l, "{tp}"):
			out[i] = "  " + strings.ReplaceAll(l, "{tp}", name)
		case strings.HasPrefix(l, "#") || l == "":
			out[i] = "  " + l
		default:
			out[i] = "  " + name + " " + l
		}
	}
	return strings.Join(out, "\n")
}

// clientFlags are what every verb that talks to a cluster as a user takes: kubectl's own
// connection flags (--kubeconfig, --context, -n, --cluster, --user, --server, --token,
// --as, --request-timeout, ...), bound by client-go's clientcmd as kubectl's are, and -A
// where listing across namespaces makes sense. connect is the one way a verb gets its
// client and namespace.
//
// k8s.io/cli-runtime's ConfigFlags binds the same flags to the same clientcmd types, but
// its package also holds the resource builder, which brings kustomize and with it the
// standard library's plugin package: that would turn off the linker's dead-code
// elimination of exported methods for the whole binary, the manager and agents included
// (34% larger). cli-runtime's printers are used for -o json|yaml.
type clientFlags struct {
	loading       *clientcmd.ClientConfigLoadingRules
	overrides     *clientcmd.ConfigOverrides
	allNamespaces bool
}

// newClientFlags binds the connection flags to cmd; withAll adds -A/--all-namespaces;
// without namespace, -n is left for the command to define.
func newClientFlags(cmd *cobra.Command, withAll, namespace bool) *clientFlags {
	f := &clientFlags{loading: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}}
	fs := cmd.Flags()
	fs.StringVar(&f.loading.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests.")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	// As kubectl: no basic authentication; -n and -s.
	names.AuthOverrideFlags.Username, names.AuthOverrideFlags.Password = clientcmd.FlagInfo{}, clientcmd.FlagInfo{}
	names.ContextOverrideFlags.Namespace.ShortName, names.ClusterOverrideFlags.APIServer.ShortName = "n", "s"
	if !namespace {
		names.ContextOverrideFlags.Namespace = clientcmd.FlagInfo{}
	}
	clientcmd.BindOverrideFlags(f.overrides, fs, names)
	if withAll {
		fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "List the objects of every namespace.")
	}
	return f
}

// out and errOut are the command's streams (a test may set them with SetOut/SetErr).
func out(cmd *cobra.Command) io.Writer    { return cmd.OutOrStdout() }
func errOut(cmd *cobra.Command) io.Writer { return cmd.ErrOrStderr() }

// connect is a client of the cluster the flags and the kubeconfig select, with
// trustplane's scheme, and the namespace they select: -n, else the kubeconfig context's,
// else "default"; "" (every namespace) with -A. API warnings go to stderr once each, as
// kubectl prints them.
func (f *clientFlags) connect(stderr io.Writer) (client.Client, string, error) {
	// Nothing logs here: controller-runtime would complain once about a missing logger.
	ctrl.SetLogger(logr.Discard())
	loaded := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(f.loading, f.overrides)
	cfg, err := loaded.ClientConfig()
	if err != nil {
		return nil, "", oneLine(err)
	}
	ns, _, err := loaded.Namespace()
	if err != nil {
		return nil, "", oneLine(err)
	}
	if f.allNamespaces {
		ns = ""
	}
	cfg.WarningHandler = rest.NewWarningWriter(stderr, rest.WarningWriterOptions{Deduplicate: true})
	// A verb makes a few requests, some per namespace or kind: no client-side throttling
	// (and none of its log lines) for them, as kubectl sets for itself.
	cfg.QPS, cfg.Burst = 50, 100
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to %s: %w", cfg.Host, oneLine(err))
	}
	return c, ns, nil
}

// oneLine keeps the first line of an error: the command's error is printed as one line.
func oneLine(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return errors.New(strings.TrimSpace(msg[:i]))
	}
	return err
}

// apiError words what the API server (or the lack of an API) says about kind k, in one
// line: a cluster without trustplane's CRDs, an object that does not exist, a refusal.
func apiError(err error, k *kind, namespace, name string) error {
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err):
		return notServed(k)
	case apierrors.IsNotFound(err) && name != "":
		if k.Namespaced {
			return fmt.Errorf("%s %q not found in namespace %q", k.Name, name, namespace)
		}
		return fmt.Errorf("%s %q not found", k.Name, name)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: %w", k.plural(), oneLine(err))
	}
	return oneLine(err)
}

// notServed is the error for a kind whose API the cluster does not serve.
func notServed(k *kind) error {
	if k.trustplane() {
		return fmt.Errorf("the cluster does not serve %s (%s): trustplane's CRDs are not installed (kubectl apply --server-side -k config/crd, or the Helm chart)", k.Kind, k.GVK.GroupVersion())
	}
	return fmt.Errorf("the cluster does not serve %s (%s)", k.Kind, k.GVK.GroupVersion())
}
