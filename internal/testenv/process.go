package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/scheme"
)

// Binary builds ./cmd/trustplane once per test binary and returns its path: tests run the
// command users run, as a child process.
func Binary(tb testing.TB) string {
	tb.Helper()
	return Build(tb, "./cmd/trustplane", "trustplane")
}

type build struct {
	once sync.Once
	path string
	err  error
}

var builds sync.Map // package → *build

// Build builds the main package pkg (a path inside this module) once per test binary, as
// a program called name, and returns its path.
func Build(tb testing.TB, pkg, name string) string {
	tb.Helper()
	v, _ := builds.LoadOrStore(pkg, &build{})
	b := v.(*build)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "trustplane-build-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// RemoveBuilds deletes what Build built; Main calls it once the tests are done.
func RemoveBuilds() {
	builds.Range(func(_, v any) bool {
		if b := v.(*build); b.path != "" {
			_ = os.RemoveAll(filepath.Dir(b.path))
		}
		return true
	})
}

// AdminKubeconfig writes a kubeconfig file for the test API server's admin and returns its path.
func (e *Env) AdminKubeconfig(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "admin.kubeconfig")
	if err := os.WriteFile(path, e.env.KubeConfig, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// KubeconfigClient is a client, with trustplane's scheme, of the cluster and user that the
// kubeconfig file at path names.
func KubeconfigClient(tb testing.TB, path string) client.Client {
	tb.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		tb.Fatalf("kubeconfig %s: %v", path, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// ServiceAccountKubeconfig writes a kubeconfig file that authenticates as the ServiceAccount
// namespace/name with a token from the TokenRequest API, as a pod running under that
// ServiceAccount would: tests prove the RBAC the manifests grant by running under it.
func (e *Env) ServiceAccountKubeconfig(tb testing.TB, namespace, name string) string {
	tb.Helper()
	return e.tokenKubeconfig(tb, namespace, name, nil)
}

// PodServiceAccountKubeconfig is ServiceAccountKubeconfig for a pod of a DaemonSet on
// node: the token is bound to a stand-in Pod of the ServiceAccount on that node (created
// here; with no kubelet it never runs), as kubelet binds a pod's projected token. So it
// carries the node's name in userInfo.extra (authentication.kubernetes.io/node-name, and
// node-uid when the Node exists), which admission policies may check; it stops
// authenticating when the stand-in Pod is deleted.
func (e *Env) PodServiceAccountKubeconfig(tb testing.TB, namespace, name, node string) string {
	tb.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: name + "-"},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: name, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: name, Image: "stand-in"}}},
	}
	if err := e.Client.Create(context.Background(), pod); err != nil {
		tb.Fatalf("creating a stand-in pod of ServiceAccount %s/%s on node %s: %v", namespace, name, node, err)
	}
	return e.tokenKubeconfig(tb, namespace, name, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
}

func (e *Env) tokenKubeconfig(tb testing.TB, namespace, name string, boundTo *authenticationv1.BoundObjectReference) string {
	tb.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600), BoundObjectRef: boundTo}}
	if err := e.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		tb.Fatalf("requesting a token for ServiceAccount %s/%s: %v", namespace, name, err)
	}
	path := filepath.Join(tb.TempDir(), name+".kubeconfig")
	if err := WriteKubeconfig(path, e.Config, tr.Status.Token); err != nil {
		tb.Fatal(err)
	}
	return path
}

// WriteKubeconfig writes a kubeconfig for cfg's server and CA that authenticates with token.
func WriteKubeconfig(path string, cfg *rest.Config, token string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

// Process is a child process of a test; its output is kept for the failure message.
type Process struct {
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan struct{}
	err    error
}

// StartProcess runs binary with args until the test ends, when it is stopped with SIGTERM
// (and killed if it does not stop within 30 s). Its combined output is logged if the test
// fails.
func StartProcess(tb testing.TB, binary string, args ...string) *Process {
	tb.Helper()
	p := &Process{cmd: exec.Command(binary, args...), output: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", filepath.Base(binary), err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(func() {
		if _, err := p.Stop(30 * time.Second); err != nil {
			tb.Errorf("%s %s: %v", filepath.Base(binary), strings.Join(args, " "), err)
		}
		if tb.Failed() {
			tb.Logf("output of %s %s:\n%s", filepath.Base(binary), strings.Join(args, " "), p.Output())
		}
	})
	return p
}

// Output is what the process wrote so far.
func (p *Process) Output() string { return p.output.String() }

// Pid is the process's ID (for its /proc figures: ResidentSet, PeakRSS).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited says whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM and waits up to timeout for the process to exit, then kills it. It
// returns how long the process took to stop, and an error if it had to be killed or exited
// non-zero after the signal.
func (p *Process) Stop(timeout time.Duration) (time.Duration, error) {
	if exited, _ := p.Exited(); exited {
		return 0, nil
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return time.Since(start), p.err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return time.Since(start), fmt.Errorf("still running %v after SIGTERM; killed", timeout)
	}
}

// WaitHTTP200 waits until url answers 200 OK (a readiness endpoint), failing the test
// after timeout or when the process exits first.
func (p *Process) WaitHTTP200(tb testing.TB, url string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			tb.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if exited, err := p.Exited(); exited {
			tb.Fatalf("process exited (%v) before %s answered 200; output:\n%s", err, url, p.Output())
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not answer 200 within %v; output:\n%s", url, timeout, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// RunCommand runs binary with args to completion and returns its stdout, stderr and exit code.
func RunCommand(tb testing.TB, binary string, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	cmd := exec.Command(binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		tb.Fatalf("running %s: %v", filepath.Base(binary), err)
	}
	return out.String(), errOut.String(), code
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// As is a client that impersonates user: the admin may impersonate anyone, so a test
// checks what RBAC and admission let that user do without a token of its own.
func (e *Env) As(tb testing.TB, user string) client.Client {
	tb.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
