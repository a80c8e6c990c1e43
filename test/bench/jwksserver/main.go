//go:build bench

// Command jwksserver is `make bench-jwks-server`: what a request and an idle connection
// cost trustplane's JWKS server, run as shipped (`trustplane jwks-server`, its own
// process) beside the manager against a real kube-apiserver and etcd.
//
//   - per request: mean latency, server CPU and bytes allocated per GET over one
//     keep-alive connection, for a small JWKSConfig and for one whose object a tenant
//     made as large as the API server takes (annotations near their 256 KiB limit, 224 KiB): the
//     server answers from its route table, so the two must cost the same;
//   - per idle connection: the server's resident memory per connection held open idle,
//     the most it holds at once (--jwks-server-max-connections), and how many are left
//     once the idle timeout has passed.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jwksv1alpha1 "github.com/trustplane/trustplane/api/jwks/v1alpha1"
	"github.com/trustplane/trustplane/internal/scheme"
	"github.com/trustplane/trustplane/internal/testcerts"
	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	requests    = flag.Int("requests", 20000, "GETs per JWKSConfig, one after another over one keep-alive connection.")
	idle        = flag.Int("idle", 3000, "Idle connections opened (more than --max-connections).")
	maxConns    = flag.Int("max-connections", 1000, "--jwks-server-max-connections of the server.")
	idleTimeout = flag.Duration("idle-timeout", 5*time.Second, "--jwks-server-idle-timeout of the server.")
)

func main() {
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-jwks-server:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	tb, err := testenv.StartBench("bench-jwks-server")
	if err != nil {
		return err
	}
	defer tb.Close()
	c, err := client.New(tb.Env.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	fmt.Println("bench-jwks-server: real kube-apiserver + etcd, trustplane manager and jwks-server binaries")
	mgr, err := start(tb, "manager", "--controllers=jwks", "--leader-elect=false", "--jwks-server-bind-address=0", "--jwks-issuer-claim-namespace=default")
	if err != nil {
		return err
	}
	defer stop(mgr.cmd)
	server := testenv.BenchAddr()
	srv, err := start(tb, "jwks-server", "--jwks-server-bind-address="+server, "--jwks-issuer-claim-namespace=default",
		"--jwks-server-max-connections="+strconv.Itoa(*maxConns), "--jwks-server-idle-timeout="+idleTimeout.String())
	if err != nil {
		return err
	}
	defer stop(srv.cmd)

	small, err := publish(ctx, c, "small", 0)
	if err != nil {
		return err
	}
	large, err := publish(ctx, c, "large", 224<<10)
	if err != nil {
		return err
	}
	var rows []testenv.BenchRow
	costs := map[string]requestCost{}
	for name, host := range map[string]string{"small": small, "large": large} {
		cost, err := measureRequests(server, srv, host, *requests)
		if err != nil {
			return err
		}
		costs[name] = cost
		work := fmt.Sprintf("GET jwks.json, %s JWKSConfig (%s)", name, map[string]string{"small": "no annotations", "large": "224 KiB of annotations"}[name])
		rows = append(rows,
			testenv.BenchRow{System: "jwks", Work: work, Size: *requests, Figure: "mean per request", Value: cost.seconds * 1e6, Unit: "µs"},
			testenv.BenchRow{System: "jwks", Work: work, Size: *requests, Figure: "server CPU per request", Value: cost.cpu * 1e6, Unit: "µs"},
			testenv.BenchRow{System: "jwks", Work: work, Size: *requests, Figure: "allocated per request", Value: cost.alloc, Unit: "B"})
	}
	ratio := costs["large"].alloc / costs["small"].alloc
	rows = append(rows, testenv.BenchRow{System: "jwks", Work: "GET jwks.json: allocation, 224 KiB JWKSConfig vs small", Size: *requests,
		Figure: "large/small per request", Value: ratio, Unit: "×", Ratio: &ratio, Target: "ratio <= 1.1", Pass: ratio <= 1.1})

	held, perConn, left, err := measureIdle(server, srv, small)
	if err != nil {
		return err
	}
	rows = append(rows,
		testenv.BenchRow{System: "jwks", Work: fmt.Sprintf("%d idle keep-alive connections", *idle), Size: *idle, Figure: "server RSS per connection held",
			Value: perConn / 1024, Unit: "KiB", Target: "< 64 KiB", Pass: perConn < 64<<10},
		testenv.BenchRow{System: "jwks", Work: fmt.Sprintf("%d idle keep-alive connections", *idle), Size: *idle, Figure: "most held at once",
			Value: float64(held), Unit: "connections", Target: fmt.Sprintf("<= %d (--jwks-server-max-connections)", *maxConns), Pass: held <= *maxConns},
		testenv.BenchRow{System: "jwks", Work: fmt.Sprintf("%d idle keep-alive connections", *idle), Size: *idle, Figure: "open after the idle timeout",
			Value: float64(left), Unit: "connections", Target: "0", Pass: left == 0})
	return testenv.RecordBench(rows...)
}

type process struct {
	cmd     *exec.Cmd
	metrics string
}

// start runs the trustplane binary with args and waits for /readyz.
func start(tb *testenv.Bench, args ...string) (*process, error) {
	metrics, probes := testenv.BenchAddr(), testenv.BenchAddr()
	cmd := exec.Command(tb.Binary, append(args, "--kubeconfig", tb.Kubeconfig, "--metrics-bind-address", metrics, "--health-probe-bind-address", probes)...)
	logs, err := os.Create(filepath.Join(tb.Dir, args[0]+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + probes + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return &process{cmd: cmd, metrics: metrics}, nil
			}
		}
	}
	stop(cmd)
	return nil, fmt.Errorf("%s did not become ready", args[0])
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
}

// publish creates a JWKSConfig with an issuer on a host of its own and annotations of
// filler bytes, waits until it is Published, and returns the issuer's host.
func publish(ctx context.Context, c client.Client, name string, filler int) (string, error) {
	key, _ := testcerts.NewKey(testcerts.P256)
	chain, err := testcerts.NewChain(key, name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: chain.PEM(), corev1.TLSPrivateKeyKey: chain.KeyPEM()}}
	if err := c.Create(ctx, secret); err != nil {
		return "", err
	}
	host := name + ".issuer.example"
	cfg := &jwksv1alpha1.JWKSConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: jwksv1alpha1.JWKSConfigSpec{CertificateSecret: name + "-tls", Issuer: "https://" + host, Nginx: jwksv1alpha1.NginxSpec{Enabled: ptr.To(false)}}}
	if filler > 0 {
		cfg.Annotations = map[string]string{}
		for i := 0; i*(32<<10) < filler; i++ {
			cfg.Annotations[fmt.Sprintf("filler.example/%d", i)] = strings.Repeat("x", 32<<10)
		}
	}
	if err := c.Create(ctx, cfg); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); err == nil && cfg.Status.LastKeyID != "" {
			return host, nil
		}
	}
	return "", fmt.Errorf("JWKSConfig %s was not published", name)
}

type requestCost struct{ seconds, cpu, alloc float64 }

// measureRequests sends n GETs for host's set over one keep-alive connection.
func measureRequests(server string, p *process, host string, n int) (requestCost, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: 1}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport}
	get := func() error {
		req, _ := http.NewRequest(http.MethodGet, "http://"+server+"/jwks.json", nil)
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s/jwks.json: %d", host, resp.StatusCode)
		}
		return nil
	}
	for range 200 { // warm up: the route, the connection, the server's pools
		if err := get(); err != nil {
			return requestCost{}, err
		}
	}
	alloc0, err := metric(p.metrics, "go_memstats_alloc_bytes_total")
	if err != nil {
		return requestCost{}, err
	}
	cpu0, t0 := testenv.ProcessCPU(p.cmd.Process.Pid), time.Now()
	for range n {
		if err := get(); err != nil {
			return requestCost{}, err
		}
	}
	elapsed, cpu := time.Since(t0), testenv.ProcessCPU(p.cmd.Process.Pid)-cpu0
	alloc1, err := metric(p.metrics, "go_memstats_alloc_bytes_total")
	if err != nil {
		return requestCost{}, err
	}
	return requestCost{seconds: elapsed.Seconds() / float64(n), cpu: cpu / float64(n), alloc: (alloc1 - alloc0) / float64(n)}, nil
}

// measureIdle opens --idle connections, each with one answered request and then idle, and
// returns the most the server held at once, its resident memory per connection held, and
// how many it still holds once the idle timeout has passed.
func measureIdle(server string, p *process, host string) (held int, perConn float64, left int, err error) {
	pid := p.cmd.Process.Pid
	time.Sleep(2 * time.Second) // let the server settle before the first reading
	before := testenv.ResidentSet(pid)
	conns := make([]net.Conn, 0, *idle)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range *idle {
		conn, err := net.DialTimeout("tcp", server, time.Second)
		if err != nil {
			break
		}
		conns = append(conns, conn)
		// Ask once without waiting: beyond the limit, the server accepts no more, and the
		// request waits in the kernel's queue.
		_, _ = fmt.Fprintf(conn, "GET /jwks.json HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	}
	answered := 0
	for _, conn := range conns[:min(len(conns), *maxConns)] {
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered++
		}
	}
	open, err := metric(p.metrics, "trustplane_jwks_server_connections")
	if err != nil {
		return 0, 0, 0, err
	}
	held = int(open)
	perConn = float64(testenv.ResidentSet(pid)-before) / float64(max(held, 1))
	fmt.Printf("idle: %d dialled, %d answered, %d held by the server, RSS %+d KiB\n", len(conns), answered, held, (testenv.ResidentSet(pid)-before)>>10)
	time.Sleep(*idleTimeout + 3*time.Second)
	// The connections beyond the limit are accepted as others close: wait them out too.
	time.Sleep(*idleTimeout + 3*time.Second)
	rest, err := metric(p.metrics, "trustplane_jwks_server_connections")
	return held, perConn, int(rest), err
}

// metric reads one unlabelled sample from a /metrics endpoint.
func metric(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s/metrics", name, addr)
}
