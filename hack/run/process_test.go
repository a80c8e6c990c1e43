package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/internal/localcp"
	"github.com/trustplane/trustplane/internal/testenv"
)

// TestRerunInItsOwnShell runs make run's program the second time in the shell the first
// one told to `export KUBECONFIG=<dir>/kubeconfig`: it must start its local control plane
// again instead of dialling the stopped one, get the manager ready, make the Cluster
// sample's kubeconfig, run the node agent, and leave nothing running after SIGTERM.
func TestRerunInItsOwnShell(t *testing.T) {
	bin := runProgram(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// What the first run left behind: its kubeconfig, naming an API server that is gone.
	writeKubeconfig(t, kubeconfig, "https://"+testenv.FreeAddr(t))
	t.Setenv("KUBECONFIG", kubeconfig)
	addrs := freeAddresses(t)

	p := testenv.StartProcess(t, bin, runArgs(dir, addrs)...)
	p.WaitHTTP200(t, "http://"+addrs.Probes+"/readyz", 3*time.Minute)
	if !strings.Contains(p.Output(), "$KUBECONFIG is make run's own "+kubeconfig) {
		t.Errorf("make run did not say it ignores $KUBECONFIG; output:\n%s", p.Output())
	}
	testenv.Eventually(t, "the ready message", 30*time.Second, func() bool {
		return strings.Contains(p.Output(), "export KUBECONFIG="+kubeconfig)
	})

	admin := kubeClient(t, readKubeconfig(t, kubeconfig))
	checkSampleClusterKubeconfig(t, admin)
	if agents := processesMentioning(t, dir, "trustplane node-agent"); len(agents) != 1 {
		t.Errorf("node agents running: %q, want one", agents)
	}

	if took, err := p.Stop(time.Minute); err != nil {
		t.Fatalf("make run after SIGTERM (%v): %v", took, err)
	}
	if left := processesMentioning(t, dir, ""); len(left) > 0 {
		t.Errorf("still running after make run stopped: %q", left)
	}
}

// TestForeignClusterGetsNoLocalState runs make run with $KUBECONFIG naming another
// cluster: it runs the controllers there, starts no control plane of its own and writes
// no cluster-admin credential into that cluster.
func TestForeignClusterGetsNoLocalState(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	bin := runProgram(t)
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", env.AdminKubeconfig(t))
	addrs := freeAddresses(t)

	p := testenv.StartProcess(t, bin, runArgs(dir, addrs)...)
	p.WaitHTTP200(t, "http://"+addrs.Probes+"/readyz", 3*time.Minute)
	for _, made := range []string{"etcd", "kubeconfig"} {
		if _, err := os.Stat(filepath.Join(dir, made)); !os.IsNotExist(err) {
			t.Errorf("%s/%s exists (%v): a local control plane was started", dir, made, err)
		}
	}
	if agents := processesMentioning(t, dir, "trustplane node-agent"); len(agents) != 1 {
		t.Errorf("node agents running: %q, want one", agents)
	}
	ctx := context.Background()
	secret := &corev1.Secret{}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: localcp.SampleClusterNamespace, Name: localcp.SampleClusterSecret}, secret)
	if !apierrors.IsNotFound(err) {
		t.Errorf("Secret %s/%s in a cluster make run did not start: %v", localcp.SampleClusterNamespace, localcp.SampleClusterSecret, err)
	}
	testenv.Eventually(t, "the ready message", 30*time.Second, func() bool {
		return strings.Contains(p.Output(), "create Secret "+localcp.SampleClusterNamespace+"/"+localcp.SampleClusterSecret+" first")
	})

	if took, err := p.Stop(time.Minute); err != nil {
		t.Fatalf("make run after SIGTERM (%v): %v", took, err)
	}
	if left := processesMentioning(t, dir, ""); len(left) > 0 {
		t.Errorf("still running after make run stopped: %q", left)
	}
}

// TestDeathOfAHelperStopsMakeRun: make run does not go on half working when its node agent
// or its kube-controller-manager dies: it stops the manager and the control plane and
// fails, saying why.
func TestDeathOfAHelperStopsMakeRun(t *testing.T) {
	for _, tc := range []struct{ name, process, says string }{
		// Not just "node-agent": make run's own flags name it too.
		{"node agent", "trustplane node-agent", "make run: the node-agent exited: signal: killed"},
		{"controller manager", "kube-controller-manager", "make run: kube-controller-manager exited: signal: killed; its log is "},
	} {
		// Every process of make run names the test's directory, which holds the subtest's
		// name: that name must not contain what identifies the process.
		t.Run(tc.name, func(t *testing.T) {
			bin := runProgram(t)
			dir := t.TempDir()
			t.Setenv("KUBECONFIG", "")
			addrs := freeAddresses(t)
			p := testenv.StartProcess(t, bin, runArgs(dir, addrs)...)
			p.WaitHTTP200(t, "http://"+addrs.Probes+"/readyz", 3*time.Minute)

			found := processesMentioning(t, dir, tc.process)
			if len(found) != 1 {
				t.Fatalf("%s processes running: %q, want one", tc.process, found)
			}
			pid, err := strconv.Atoi(strings.SplitN(found[0], ":", 2)[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var exitErr error
			testenv.Eventually(t, "make run to exit", time.Minute, func() bool {
				var exited bool
				exited, exitErr = p.Exited()
				return exited
			})
			if exitErr == nil || !strings.Contains(p.Output(), tc.says) {
				t.Errorf("make run exited with %v; output:\n%s", exitErr, p.Output())
			}
			if left := processesMentioning(t, dir, ""); len(left) > 0 {
				t.Errorf("still running after make run stopped: %q", left)
			}
		})
	}
}

// checkSampleClusterKubeconfig proves the Secret make run wrote for the Cluster sample
// holds a self-contained kubeconfig that reaches the cluster as a cluster admin.
func checkSampleClusterKubeconfig(t *testing.T, admin client.Client) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: localcp.SampleClusterNamespace, Name: localcp.SampleClusterSecret}, secret); err != nil {
		t.Fatalf("the Cluster sample's Secret: %v", err)
	}
	kc, err := clientcmd.Load(secret.Data["kubeconfig"])
	if err != nil {
		t.Fatalf("the Cluster sample's kubeconfig: %v", err)
	}
	for name, user := range kc.AuthInfos {
		if user.Exec != nil || user.TokenFile != "" || user.ClientCertificate != "" || user.ClientKey != "" {
			t.Errorf("user %s of the sample kubeconfig refers to files or plugins: %+v", name, user)
		}
	}
	for name, cluster := range kc.Clusters {
		if cluster.CertificateAuthority != "" || len(cluster.CertificateAuthorityData) == 0 {
			t.Errorf("cluster %s of the sample kubeconfig has no inline CA", name)
		}
	}
	// Cluster admin: it may list Secrets in every namespace.
	asSample := kubeClient(t, kc)
	if err := asSample.List(context.Background(), &corev1.SecretList{}); err != nil {
		t.Errorf("listing Secrets with the sample kubeconfig: %v", err)
	}
}

// runProgram builds this program as `make run` does and returns its path.
func runProgram(t *testing.T) string {
	t.Helper()
	return testenv.Build(t, "./hack/run", "trustplane-run")
}

// runArgs are make run's flags with ports of the test's own, so that a developer's make
// run on the same machine does not collide.
func runArgs(dir string, addrs localcp.Addresses) []string {
	return []string{"--dir", dir, "--bin-dir", filepath.Join(testenv.RepoRoot(), "bin", "k8s"), "--node=false",
		"--health-probe-bind-address", addrs.Probes,
		"--metrics-bind-address", addrs.Metrics,
		"--jwks-server-bind-address", addrs.JWKS,
		"--node-agent-metrics-bind-address", addrs.NodeAgentMetrics,
	}
}

func freeAddresses(t *testing.T) localcp.Addresses {
	return localcp.Addresses{Metrics: testenv.FreeAddr(t), Probes: testenv.FreeAddr(t), JWKS: testenv.FreeAddr(t), NodeAgentMetrics: testenv.FreeAddr(t)}
}

// processesMentioning lists the processes (but this one) whose command line contains
// dir and, if not empty, also word: make run's control plane and agent name its --dir.
func processesMentioning(t *testing.T, dir, word string) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, path := range paths {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil { // gone meanwhile
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ")
		if strings.Contains(cmdline, dir) && strings.Contains(cmdline, word) {
			found = append(found, fmt.Sprintf("%d: %s", pid, cmdline))
		}
	}
	return found
}

func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	kc.AuthInfos["local"] = &clientcmdapi.AuthInfo{Token: "from-the-last-run"}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	kc.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

func readKubeconfig(t *testing.T, path string) *clientcmdapi.Config {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func kubeClient(t *testing.T, kc *clientcmdapi.Config) client.Client {
	t.Helper()
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveBuilds()
	os.Exit(code)
}
