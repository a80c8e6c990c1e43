package cli

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	crconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
)

// TestClusterCommandsAskForUncompressedAnswers: what an API server receives from a
// cluster command's connection (restConfig) asks for no gzip, where client-go's default
// connection does; the server records each request's Accept-Encoding as it arrives.
func TestClusterCommandsAskForUncompressedAnswers(t *testing.T) {
	var mu sync.Mutex
	var encodings []string
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings = append(encodings, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.0"}`))
	}))
	defer server.Close()
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["c"] = &clientcmdapi.Cluster{Server: server.URL, InsecureSkipTLSVerify: true}
	kubeconfig.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
	kubeconfig.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kubeconfig.CurrentContext = "c"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kubeconfig, file); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", file)
	askedFor := func(get func() (*rest.Config, error)) string {
		t.Helper()
		cfg, err := get()
		if err != nil {
			t.Fatal(err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		encodings = nil
		mu.Unlock()
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(encodings, ",")
	}
	if got := askedFor(restConfig); strings.Contains(got, "gzip") {
		t.Errorf("a cluster command's request asked for %q: want no gzip", got)
	}
	// The contrast: a default connection asks for gzip, so the check above can fail.
	if got := askedFor(crconfig.GetConfig); !strings.Contains(got, "gzip") {
		t.Errorf("client-go's default connection asked for %q: the test no longer shows what it means to", got)
	}
}
