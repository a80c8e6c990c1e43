// Package dataplane tests secret global consistency end to end: the secret-checksum control
// plane and the `trustplane dataplane` agent against a real API server, and Debian's nginx
// serving TLS from the agent's directory.
package dataplane_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/checksum/dataplaneagent"
	"github.com/trustplane/trustplane/internal/checksum/secretchecksum"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/pkg/dataplane"
)

const ns = "edge"

var ctx = context.Background()

func TestMain(m *testing.M) {
	if os.Getenv("TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	os.Exit(m.Run())
}

// startControlPlane runs the secret-checksum controller for ns until stop is called.
func startControlPlane(t *testing.T, env *testenv.Env) (stop func()) {
	return env.RunManager(t, func(mgr ctrl.Manager) error {
		opts := secretchecksum.DefaultOptions()
		opts.Namespaces, opts.PublishNamespace, opts.QuietPeriod = []string{ns}, ns, 200*time.Millisecond
		_, err := secretchecksum.Setup(mgr, opts)
		return err
	})
}

func agent(env *testenv.Env, dir, reload string) func(context.Context) error {
	return func(c context.Context) error {
		opts := dataplaneagent.DefaultOptions()
		opts.Namespace, opts.Dir, opts.ReloadCommand = ns, dir, reload
		opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", "0"
		opts.QuietPeriod = 100 * time.Millisecond
		return dataplaneagent.Run(c, env.Config, opts)
	}
}

func cert(t *testing.T) testcerts.Chain {
	t.Helper()
	key, _ := testcerts.NewKey(testcerts.P256)
	c, err := testcerts.NewChain(key, "edge.example.com", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pemSHA(t *testing.T, c testcerts.Chain) string {
	t.Helper()
	s, err := checksum.PemSHA(c.PEM())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putSecret(t *testing.T, cl client.Client, name, version string, c testcerts.Chain) {
	t.Helper()
	putSecretData(t, cl, ns, name, version, map[string][]byte{corev1.TLSCertKey: c.PEM(), corev1.TLSPrivateKeyKey: c.KeyPEM()})
}

// putSecretData creates or replaces a versioned Secret.
func putSecretData(t *testing.T, cl client.Client, namespace, name, version string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{checksum.DefaultVersionAnnotation: version}},
		Data:       data,
	}
	if data[corev1.TLSCertKey] != nil && data[corev1.TLSPrivateKeyKey] != nil {
		s.Type = corev1.SecretTypeTLS // as cert-manager writes them; CA-only ones are Opaque
	}
	if err := cl.Create(ctx, s); err != nil {
		cur := &corev1.Secret{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			t.Fatal(err)
		}
		cur.Annotations, cur.Data = s.Annotations, s.Data
		if err := cl.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
}

// putIngress creates or updates a versioned Ingress of Tengine-Ingress's default class.
func putIngress(t *testing.T, cl client.Client, name, version string) {
	t.Helper()
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			checksum.DefaultVersionAnnotation: version, checksum.IngressClassAnnotation: checksum.DefaultIngressClass}},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}
	if err := cl.Create(ctx, ing); err != nil {
		cur := &networkingv1.Ingress{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(ing), cur); err != nil {
			t.Fatal(err)
		}
		cur.Annotations = ing.Annotations
		if err := cl.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
}

// waitPublished waits until the control plane has published the checksum of ids.
func waitPublished(t *testing.T, cl client.Client, ids ...string) {
	t.Helper()
	want := checksum.Sum(ids)
	testenv.Eventually(t, "the control plane to publish "+want, 20*time.Second, func() bool {
		list := &tenginev1.SecretCheckSumList{}
		if err := cl.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, s := range list.Items {
			if s.Spec.Checksum == want {
				return true
			}
		}
		return false
	})
}

func fileIs(dir, name string, want []byte) func() bool {
	return func() bool {
		got, err := os.ReadFile(filepath.Join(dir, name))
		return err == nil && bytes.Equal(got, want)
	}
}

// gauge is the value of a gauge or counter in the process's registry, -1 when absent.
func gauge(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !matchLabels(m, labels) {
				continue
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

func matchLabels(m *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			found = found || (l.GetName() == want[i] && l.GetValue() == want[i+1])
		}
		if !found {
			return false
		}
	}
	return true
}

// nginxTLS runs Debian's nginx serving TLS with files of the agent's directory.
type nginxTLS struct {
	addr, reload string
	bin, conf    string
	prefix       string
	cmd          *exec.Cmd
}

func startNginx(t *testing.T, certDir string) *nginxTLS {
	t.Helper()
	return startNginxWith(t, certDir, "site-1", "")
}

// startNginxWith serves base.crt/.key from certDir and, with clientCA, asks clients for a
// certificate signed by that CA file (nginx refuses to start when it does not load).
func startNginxWith(t *testing.T, certDir, base, clientCA string) *nginxTLS {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	prefix := t.TempDir()
	addr := testenv.FreeAddr(t)
	conf := filepath.Join(prefix, "nginx.conf")
	var clientAuth string
	if clientCA != "" {
		clientAuth = fmt.Sprintf("ssl_client_certificate %s/%s;\n        ssl_verify_client optional;", certDir, clientCA)
	}
	body := fmt.Sprintf(`daemon off;
user root;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen %[2]s ssl;
        ssl_certificate     %[3]s/%[4]s.crt;
        ssl_certificate_key %[3]s/%[4]s.key;
        %[5]s
        location / { return 200 "ok\n"; }
    }
}
`, prefix, addr, certDir, base, clientAuth)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &nginxTLS{addr: addr, bin: bin, conf: conf, prefix: prefix, reload: fmt.Sprintf("%s -s reload -c %s -p %s", bin, conf, prefix)}
	n.start(t)
	t.Cleanup(func() { n.stop(t) })
	return n
}

// start runs nginx and waits until it serves TLS.
func (n *nginxTLS) start(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command(n.bin, "-c", n.conf, "-p", n.prefix)
	var logs bytes.Buffer
	n.cmd.Stderr = &logs
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("nginx: %v (make test installs it)", err)
	}
	testenv.Eventually(t, "nginx to serve TLS", 10*time.Second, func() bool { return n.leafSHA() != "" })
}

// stop ends nginx as its init system would (SIGTERM: it removes its pid file), so that
// `nginx -s reload` finds no nginx to signal.
func (n *nginxTLS) stop(t *testing.T) {
	t.Helper()
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
	n.cmd = nil
}

// leafSHA is the SHA-1 of the certificate nginx serves.
func (n *nginxTLS) leafSHA() string {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", n.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return ""
	}
	defer conn.Close()
	sum := sha1.Sum(conn.ConnectionState().PeerCertificates[0].Raw)
	return hex.EncodeToString(sum[:])
}

func TestDataPlaneEndToEnd(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	envStopped := false
	t.Cleanup(func() {
		if !envStopped {
			_ = env.Stop()
		}
	})
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := cert(t), cert(t)
	putSecret(t, env.Client, "site-1", "1", a)
	putSecret(t, env.Client, "site-2", "1", b)
	putIngress(t, env.Client, "web-1", "1")
	stopControl := startControlPlane(t, env)
	waitPublished(t, env.Client, "1-1-"+pemSHA(t, a), "2-1-"+pemSHA(t, b))

	// The agent starts with nothing on disk; nginx starts once the first verified set is there.
	reloadCmd := "true"
	stopAgent := testenv.Background(t, agent(env, dir, reloadCmd))
	// The agent writes a set file by file and reloads once it is complete, and it verifies
	// secrets and ingresses independently: wait for all of it, not for the first file.
	testenv.Eventually(t, "the first verified set, complete, and both tracks consistent", 20*time.Second, func() bool {
		return fileIs(dir, "site-1.crt", a.PEM())() && fileIs(dir, "site-2.key", b.KeyPEM())() &&
			gauge(t, "trustplane_dataplane_consistent", "track", "secrets") == 1 &&
			gauge(t, "trustplane_dataplane_consistent", "track", "ingresses") == 1
	})
	nginx := startNginx(t, dir)
	if got := nginx.leafSHA(); got != pemSHA(t, a) {
		t.Fatalf("nginx serves %s, want PemSHA %s", got, pemSHA(t, a))
	}
	stopAgent()
	stopAgent = testenv.Background(t, agent(env, dir, nginx.reload)) // from now on the agent reloads nginx

	t.Run("consistent rotation switches nginx", func(t *testing.T) {
		a2 := cert(t)
		putSecret(t, env.Client, "site-1", "2", a2)
		waitPublished(t, env.Client, "1-2-"+pemSHA(t, a2), "2-1-"+pemSHA(t, b))
		testenv.Eventually(t, "nginx to serve the rotated certificate", 20*time.Second, func() bool { return nginx.leafSHA() == pemSHA(t, a2) })
		a = a2
	})

	var a3 testcerts.Chain
	t.Run("mismatch keeps the verified set and names the differing IDs", func(t *testing.T) {
		stopControl() // the control plane falls behind: its checksum no longer covers site-1
		a3 = cert(t)
		putSecret(t, env.Client, "site-1", "3", a3)
		putIngress(t, env.Client, "web-1", "2")
		testenv.Eventually(t, "the ingress mismatch", 20*time.Second, func() bool {
			return gauge(t, "trustplane_dataplane_consistent", "track", "ingresses") == 0 &&
				gauge(t, "trustplane_dataplane_mismatch_ids", "track", "ingresses", "side", "local_only") == 1
		})
		testenv.Eventually(t, "the secret mismatch, one ID on each side", 20*time.Second, func() bool {
			return gauge(t, "trustplane_dataplane_consistent", "track", "secrets") == 0 &&
				gauge(t, "trustplane_dataplane_mismatch_ids", "track", "secrets", "side", "local_only") == 1 &&
				gauge(t, "trustplane_dataplane_mismatch_ids", "track", "secrets", "side", "published_only") == 1
		})
		localOnly, publishedOnly := "1-3-"+pemSHA(t, a3), "1-2-"+pemSHA(t, a)
		testenv.Eventually(t, "a ChecksumMismatch event naming both IDs", 20*time.Second, func() bool {
			list := &eventsv1.EventList{}
			_ = env.Client.List(ctx, list, client.InNamespace(ns))
			for _, e := range list.Items {
				if e.Reason == "ChecksumMismatch" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, localOnly) && strings.Contains(e.Note, publishedOnly) {
					return true
				}
			}
			return false
		})
		time.Sleep(500 * time.Millisecond)
		if !fileIs(dir, "site-1.crt", a.PEM())() || nginx.leafSHA() != pemSHA(t, a) {
			t.Fatal("an unverified certificate reached the directory or nginx")
		}
	})

	t.Run("recovers when both sides agree", func(t *testing.T) {
		stopControl = startControlPlane(t, env)
		testenv.Eventually(t, "nginx to serve the now verified certificate", 20*time.Second, func() bool { return nginx.leafSHA() == pemSHA(t, a3) })
		testenv.Eventually(t, "ingresses consistent again", 20*time.Second, func() bool { return gauge(t, "trustplane_dataplane_consistent", "track", "ingresses") == 1 })
		if gauge(t, "trustplane_dataplane_consistent", "track", "secrets") != 1 {
			t.Error("not consistent after recovery")
		}
	})

	t.Run("API server outage and a restart during it", func(t *testing.T) {
		stopControl()
		if err := env.Stop(); err != nil {
			t.Logf("stopping the API server: %v", err) // slow to stop with watches open; it is stopped
		}
		envStopped = true
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); err == nil {
			t.Fatal("the API server still answers")
		}
		time.Sleep(time.Second)
		if !fileIs(dir, "site-1.crt", a3.PEM())() || nginx.leafSHA() != pemSHA(t, a3) {
			t.Fatal("the outage touched the verified set")
		}
		// The agent restarts while the API server is down, on a node that lost the files.
		stopAgent()
		for _, f := range []string{"site-1.crt", "site-1.key", "site-2.crt", "site-2.key"} {
			os.Remove(filepath.Join(dir, f))
		}
		stopAgent = testenv.Background(t, agent(env, dir, nginx.reload))
		testenv.Eventually(t, "every file restored from the snapshot", 10*time.Second, func() bool {
			return fileIs(dir, "site-1.crt", a3.PEM())() && fileIs(dir, "site-2.key", b.KeyPEM())()
		})
		stopAgent()
	})

	t.Run("a corrupt snapshot is never served", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(dir, dataplane.SnapshotFile))
		if err != nil {
			t.Fatal(err)
		}
		raw[len(raw)/2] ^= 0x01
		if err := os.WriteFile(filepath.Join(dir, dataplane.SnapshotFile), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, "site-1.crt"))
		stopAgent = testenv.Background(t, agent(env, dir, ""))
		testenv.Eventually(t, "the corruption to be reported", 10*time.Second, func() bool { return gauge(t, "trustplane_dataplane_snapshot_corrupt") == 1 })
		time.Sleep(300 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(dir, "site-1.crt")); !os.IsNotExist(err) {
			t.Error("a file was written from a corrupt snapshot")
		}
		stopAgent()
	})
}
