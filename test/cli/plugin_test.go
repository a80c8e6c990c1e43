package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/testenv"
)

// plugin installs the built binary as kubectl-trustplane in a directory of its own and
// returns the directory, to put first on PATH.
func plugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(testenv.Binary(t), filepath.Join(dir, "kubectl-trustplane")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// kubectl runs bin/k8s/kubectl (or $TRUSTPLANE_BIN's) with PATH starting at dir.
func kubectl(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return kubectlWith(t, dir, nil, nil, args...)
}

// kubectlWith runs bin/k8s/kubectl (or $TRUSTPLANE_BIN's) with PATH starting at dir, env added to the
// environment and stdin from in.
func kubectlWith(t *testing.T, dir string, env []string, in []byte, args ...string) result {
	t.Helper()
	cmd := exec.Command(testenv.Tool(t, "k8s/kubectl"), args...)
	cmd.Env = append(append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH")), env...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestKubectlPlugin: `kubectl trustplane get -A` runs the binary as a plugin; its help
// says so.
func TestKubectlPlugin(t *testing.T) {
	ns := env.Namespace(t, "plugin")
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	create(t, cfg)
	kid := publishSet(t, cfg, newChain(t))
	dir := plugin(t)

	r := kubectl(t, dir, "trustplane", "get", "-A", "--kubeconfig", admin(t))
	found := false
	for _, l := range lines(r.stdout) {
		f := strings.Fields(l)
		found = found || len(f) > 3 && f[0] == ns && f[1] == "jwksconfig/issuer" && f[2] == "True" && strings.Contains(l, "kid="+kid[:12])
	}
	if !strings.HasPrefix(r.stdout, "NAMESPACE") || !found {
		t.Errorf("kubectl trustplane get -A lacks %s's JWKSConfig:\n%s", ns, r.stdout)
	}
	// Not-Ready objects first, and the exit status says whether there are any; a request
	// revoked on purpose (False Revoked) is no failure.
	sawReady, notReady := false, 0
	for _, l := range lines(r.stdout)[1:] {
		f := strings.Fields(l)
		isReady := len(f) > 3 && (f[1] == "True" || f[2] == "True" || f[2] == "Revoked" || f[3] == "Revoked")
		if !isReady {
			notReady++
			if sawReady {
				t.Errorf("a not-Ready object after Ready ones:\n%s", r.stdout)
			}
		}
		sawReady = sawReady || isReady
	}
	if (notReady > 0) != (r.code == 1) || (r.code != 0 && r.code != 1) {
		t.Errorf("exit %d with %d not Ready:\n%s\n%s", r.code, notReady, r.stdout, r.stderr)
	}
	out := kubectl(t, dir, "trustplane", "get", "jwksconfig", "issuer", "-n", ns, "--kubeconfig", admin(t)).ok(t)
	contains(t, out, "issuer   True    Published")

	for _, args := range [][]string{{"trustplane", "--help"}, {"trustplane", "get", "--help"}} {
		out := kubectl(t, dir, args...).ok(t)
		contains(t, out, "kubectl trustplane ")
		if strings.Contains(strings.ReplaceAll(out, "kubectl trustplane", ""), "  trustplane get") {
			t.Errorf("help of %v names the binary, not the plugin:\n%s", args, out)
		}
	}
	out = kubectl(t, dir, "plugin", "list").ok(t)
	contains(t, out, "kubectl-trustplane")
}

// TestHelp: every verb documents itself with an example.
func TestHelp(t *testing.T) {
	out := tpRaw(t, "--help").ok(t)
	contains(t, out, "Day 2", "Processes", "get", "describe", "kubeconfig", "rotate", "revoke", "reconcile", "jwks", "checksum", "podcert", "manager")
	for _, verb := range [][]string{{"get"}, {"describe"}, {"kubeconfig"}, {"rotate"}, {"revoke"}, {"reconcile"},
		{"jwks", "inspect"}, {"jwks", "verify"}, {"checksum", "diff"}, {"podcert", "inspect"}} {
		out := tpRaw(t, append(verb, "--help")...).ok(t)
		contains(t, out, "Examples:\n  trustplane "+verb[0])
		if verb[0] != "jwks" || verb[1] == "verify" {
			contains(t, out, "--kubeconfig", "--context")
		}
	}
}

// complete runs a completion request, the connection flags after the verb (its first
// two words, or three for jwks verify).
func complete(t *testing.T, args ...string) string {
	t.Helper()
	at := 2
	if args[1] == "jwks" {
		at = 3
	}
	with := append(append(append([]string{}, args[:at]...), "--kubeconfig", admin(t)), args[at:]...)
	return tpRaw(t, with...).ok(t)
}

// TestCompletion: shell completion of kinds and of object names read from the cluster.
func TestCompletion(t *testing.T) {
	ns := env.Namespace(t, "complete")
	for _, name := range []string{"alpha", "beta"} {
		create(t, &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "x"}})
	}
	create(t, kubeconfigRequest(ns, "reader", "prod"))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "get", "jwksconfig", "-n", ns, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "get", "jwksconfig", "-n", ns, "b"}, []string{"beta"}},
		{[]string{"__complete", "describe", "jwks", "-n", ns, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "kubeconfig", "-n", ns, ""}, []string{"reader"}},
		{[]string{"__complete", "rotate", "kubeconfigrequest", "-n", ns, ""}, []string{"reader"}},
		{[]string{"__complete", "reconcile", "jwksconfig", "-n", ns, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "jwks", "verify", "x", "-n", ns, "--jwksconfig", ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "get", "kubeconfig"}, []string{"kubeconfigrequest\tKubeconfigRequest (Clusters)"}},
	} {
		out := complete(t, tc.args...)
		got := lines(out)
		got = got[:len(got)-1] // the directive
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	out := complete(t, "__complete", "get", "")
	contains(t, out, "jwksconfig\tJWKSConfig (JWKS)", "signerca\t", "subscriptionrequest\t", ":4")
}

// day2Verbs are the verbs `--help` lists in its Day 2 group, with the subcommands of
// those that only group others ("jwks inspect").
func day2Verbs(t *testing.T, help func(args ...string) string) []string {
	t.Helper()
	var verbs []string
	listed := func(text, heading string) []string {
		var names []string
		in := false
		for _, l := range lines(text) {
			switch {
			case strings.HasPrefix(l, heading):
				in = true
			case in && strings.TrimSpace(l) == "":
				return names
			case in:
				names = append(names, strings.Fields(l)[0])
			}
		}
		return names
	}
	for _, verb := range listed(help("--help"), "Day 2") {
		subs := listed(help(verb, "--help"), "Available Commands:")
		if len(subs) == 0 {
			verbs = append(verbs, verb)
		}
		for _, sub := range subs {
			if sub != "help" && sub != "completion" {
				verbs = append(verbs, verb+" "+sub)
			}
		}
	}
	if len(verbs) < 10 {
		t.Fatalf("the help lists only the day-2 verbs %v", verbs)
	}
	return verbs
}

// TestKubectlPluginEveryVerb runs every day-2 verb the help lists as kubectl runs the
// plugin (`kubectl trustplane VERB`, the binary found on PATH as kubectl-trustplane, the
// cluster from $KUBECONFIG), against real objects, with the Cluster and Kubeconfig
// controllers running: output and exit status of each.
func TestKubectlPluginEveryVerb(t *testing.T) {
	runOperators(t)
	ns := env.Namespace(t, "plugin-verbs")
	broughtAlong(t, ns)
	chain := newChain(t)
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "issuer"},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: "issuer-tls", Issuer: "https://idp.example", Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	create(t, cfg)
	kid := publishSet(t, cfg, chain)
	site := tlsSecret(t, ns, "site-1", "1")
	create(t, site, kubeconfigRequest(ns, "reader", "self"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}})
	publish(t, ns, &tenginev1.SecretCheckSum{}, []string{secretID(t, site)})
	publish(t, ns, &tenginev1.IngressCheckSum{}, nil)
	waitKubeconfigReady(t, ns, "reader", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)

	dir := plugin(t)
	kubeconfig := []string{"KUBECONFIG=" + admin(t)}
	run := func(in []byte, args ...string) result {
		t.Helper()
		return kubectlWith(t, dir, kubeconfig, in, append([]string{"trustplane"}, args...)...)
	}
	tested := map[string]bool{}
	verb := func(name string, in []byte, args ...string) result {
		t.Helper()
		tested[name] = true
		return run(in, args...)
	}

	out := verb("get", nil, "get", "-n", ns).ok(t)
	contains(t, out, "cluster/self", "AdministratorsBound", "jwksconfig/issuer", "kid="+kid[:12],
		"kubeconfigrequest/reader", "Issued", "secretchecksum/published-")
	verb("get", nil, "get", "jwksconfig", "nosuch", "-n", ns).fails(t, `jwksconfig "nosuch" not found in namespace "`+ns+`"`)

	out = verb("describe", nil, "describe", "kcr", "reader", "-n", ns).ok(t)
	contains(t, out, "KubeconfigRequest "+ns+"/reader Ready=True Issued", "├─Cluster "+ns+"/self: Ready=True AdministratorsBound",
		"write it to a file: kubectl trustplane kubeconfig reader -n "+ns+" -o FILE")

	file := filepath.Join(t.TempDir(), "reader.kubeconfig")
	r := verb("kubeconfig", nil, "kubeconfig", "reader", "-n", ns, "-o", file)
	if r.ok(t) != "" || !strings.HasPrefix(r.stderr, "wrote the kubeconfig of KubeconfigRequest "+ns+"/reader (Cluster "+ns+"/self, expires in ") {
		t.Errorf("kubeconfig -o: %+v", r)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the kubeconfig written: %v", err)
	}

	out = verb("rotate", nil, "rotate", "kcr", "reader", "-n", ns, "--wait").ok(t)
	contains(t, out, "kubeconfigrequest/reader: rotated; new credential issued")

	out = verb("reconcile", nil, "reconcile", "cluster", "self", "-n", ns).ok(t)
	contains(t, out, "cluster/self: reconciled; Ready=True AdministratorsBound")
	verb("reconcile", nil, "reconcile", "secretchecksum", "x", "-n", ns).fails(t, "a secretchecksum has no reconcile to ask for")

	out = verb("jwks inspect", chain.PEM(), "jwks", "inspect", "-").ok(t)
	contains(t, out, `"kid": "`+kid+`"`, `"alg": "ES256"`)

	claims := jwt.Claims{Issuer: "https://idp.example", Subject: "alice", Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	out = verb("jwks verify", []byte(token(t, chain.LeafKey, kid, claims)), "jwks", "verify", "-", "--jwksconfig", "issuer", "-n", ns).ok(t)
	contains(t, out, "valid: signed by kid "+kid+" (ES256) of JWKSConfig "+ns+"/issuer; issuer https://idp.example, subject alice")
	verb("jwks verify", []byte("not-a-jwt"), "jwks", "verify", "-", "--jwksconfig", "issuer", "-n", ns).fails(t, "not a JWT")

	out = verb("checksum diff", nil, "checksum", "diff", "-n", ns).ok(t)
	contains(t, out, "Scope: namespaces="+ns, "Secrets: match: checksum "+checksum.Sum([]string{secretID(t, site)})+" of 1 IDs", "Ingresses: match")

	out = verb("podcert inspect", nil, "podcert", "inspect", "web", "-n", ns).ok(t)
	contains(t, out, "Pod "+ns+"/web", "no podCertificate projection", "Warnings: none")
	verb("podcert inspect", nil, "podcert", "inspect", "nosuch", "-n", ns).fails(t, `pod "nosuch" not found in namespace "`+ns+`"`)

	poolSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "aws-used", Labels: map[string]string{"hyperscalerType": "aws", "tenantName": "ga-9", "dirty": "true"}}}
	create(t, poolSecret)
	out = verb("pool list", nil, "pool", "list", "-n", ns).ok(t)
	contains(t, out, "aws-used", "dirty", "ga-9")
	out = verb("pool clean", nil, "pool", "clean", "-n", ns, "aws-used").ok(t)
	contains(t, out, "aws-used: handed back to account ga-9")

	// Revoked on purpose: the credential is refused, and get is content (exit 0).
	out = verb("revoke", nil, "revoke", "kcr", "reader", "-n", ns, "--wait").ok(t)
	contains(t, out, "kubeconfigrequest/reader: revoked")
	verb("kubeconfig", nil, "kubeconfig", "reader", "-n", ns).fails(t, "KubeconfigRequest "+ns+"/reader is revoked")
	out = run(nil, "get", "kcr", "-n", ns).ok(t)
	contains(t, out, "reader   False   Revoked")

	help := func(args ...string) string { t.Helper(); return run(nil, args...).ok(t) }
	for _, v := range day2Verbs(t, help) {
		if !tested[v] {
			t.Errorf("the plugin's verb %q is not run by this test", v)
		}
	}
	out = run(nil, "version").ok(t)
	contains(t, out, "trustplane ")
}
