package security

import (
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	"github.com/trustplane/trustplane/internal/testenv"
)

func init() {
	register("run a command in the manager through a kubeconfig exec plugin", execInManager)
	register("receive the manager's token through tokenFile", stealManagerToken)
	register("read an internal URL's answer through the Cluster status", readInternalURL)
	register("fill the manager's memory through her Cluster's server", bombTheManager)
}

// internalOnly is what an internal endpoint answers that alice must never read.
const internalOnly = "INTERNAL-ONLY-7f3e"

// bringAlong stores alice's kubeconfig and a Cluster using it, as alice.
func bringAlong(t *testing.T, alice *tenant, name string, kubeconfig []byte) {
	t.Helper()
	mustCreate(t, alice.client, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: name + "-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": kubeconfig}})
	mustCreate(t, alice.client, &operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: alice.namespace, Name: name},
		Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: name + "-kubeconfig"},
			Administrators: []string{"alice@example.com"}}})
}

// kubeconfigFor is a kubeconfig for server, trusting the server's certificate when
// given, with user's lines as the user.
func kubeconfigFor(server string, serverCert *x509.Certificate, user string) []byte {
	ca := ""
	if serverCert != nil {
		ca = base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serverCert.Raw}))
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
current-context: t
contexts:
- {name: t, context: {cluster: t, user: t}}
clusters:
- {name: t, cluster: {server: %q, certificate-authority-data: %q}}
users:
- name: t
  user:
%s
`, server, ca, user)
}

// waitStalled waits for the Cluster to stall with reason, as alice reads it, and returns
// its conditions' messages and its events' notes, all that alice can read about it.
func waitStalled(t *testing.T, alice *tenant, name, reason string) string {
	t.Helper()
	var seen string
	testenv.Eventually(t, name+" Stalled "+reason, 30*time.Second, func() bool {
		c := &operatorv1alpha1.Cluster{}
		if err := alice.client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: name}, c); err != nil {
			return false
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, "Stalled")
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != reason {
			return false
		}
		seen = fmt.Sprintf("%+v", c.Status)
		return true
	})
	events := &eventsv1.EventList{}
	if err := alice.client.List(ctx, events, client.InNamespace(alice.namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Regarding.Name == name {
			seen += "\n" + e.Note
		}
	}
	return seen
}

// execInManager: an exec plugin in alice's kubeconfig never runs in the manager.
func execInManager(t *testing.T, alice *tenant) {
	ran := filepath.Join(t.TempDir(), "plugin-ran")
	bringAlong(t, alice, "exec", kubeconfigFor("https://127.0.0.1:1", nil, fmt.Sprintf(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "touch %s"]
      interactiveMode: Never`, ran)))
	seen := waitStalled(t, alice, "exec", operatorv1alpha1.ReasonInsecureKubeconfig)
	if !strings.Contains(seen, "users[0].user.exec") {
		t.Errorf("the status does not name the refused field: %s", seen)
	}
	if _, err := os.Stat(ran); !os.IsNotExist(err) {
		t.Errorf("the exec plugin ran in the manager: %v", err)
	}
}

// stealManagerToken: tokenFile naming the manager's own ServiceAccount token, with a
// server of alice's, is refused before any request is made.
func stealManagerToken(t *testing.T, alice *tenant) {
	var requests atomic.Int32
	listener := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	t.Cleanup(listener.Close)
	bringAlong(t, alice, "token", kubeconfigFor(listener.URL, listener.Certificate(), "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"))
	seen := waitStalled(t, alice, "token", operatorv1alpha1.ReasonInsecureKubeconfig)
	if !strings.Contains(seen, "users[0].user.tokenFile") {
		t.Errorf("the status does not name the refused field: %s", seen)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("alice's server received %d requests from the manager", n)
	}
}

// readInternalURL: a server alice names is reached (it may be an internal one), but what
// it answers never reaches anything alice can read, only its class and host.
func readInternalURL(t *testing.T, alice *tenant) {
	internal := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprintf(w, "<html>%s</html>", internalOnly)
	}))
	t.Cleanup(internal.Close)
	bringAlong(t, alice, "internal", kubeconfigFor(internal.URL, internal.Certificate(), "    token: anything"))
	seen := waitStalled(t, alice, "internal", operatorv1alpha1.ReasonClusterAccessDenied)
	if strings.Contains(seen, internalOnly) {
		t.Errorf("the internal answer reached what alice reads: %s", seen)
	}
	if !strings.Contains(seen, strings.TrimPrefix(internal.URL, "https://")) {
		t.Errorf("the status does not name the host: %s", seen)
	}
}

// bombTheManager: alice's Clusters name servers that answer every request with a gzip body
// that inflates to 512 MiB, and with a discovery document of 1 GiB. The manager asks for no
// compression, refuses the encoding it did not ask for, reads at most
// --cluster-target-max-response-bytes (8 MiB) of an answer, and the Clusters say why; its
// resident memory stays far below the shipped 512 Mi limit (it went to 3.8 GiB before).
func bombTheManager(t *testing.T, alice *tenant) {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = io.WriteString(zw, `{"kind":"APIVersions","versions":["v1"],"x":"`)
	zeros := bytes.Repeat([]byte("0"), 1<<20)
	for range 512 {
		_, _ = zw.Write(zeros)
	}
	_, _ = io.WriteString(zw, `"}`)
	_ = zw.Close()
	bomb := b.Bytes()
	gzipServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(bomb)
	}))
	t.Cleanup(gzipServer.Close)
	hugeServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"APIVersions","versions":["v1"],"x":"`)
		for range 1024 {
			if _, err := w.Write(zeros); err != nil {
				return // the manager stopped reading
			}
		}
	}))
	t.Cleanup(hugeServer.Close)
	bringAlong(t, alice, "gzip-bomb", kubeconfigFor(gzipServer.URL, gzipServer.Certificate(), "    token: anything"))
	bringAlong(t, alice, "huge-answer", kubeconfigFor(hugeServer.URL, hugeServer.Certificate(), "    token: anything"))
	for name, want := range map[string]string{"gzip-bomb": "content encoding that was not asked for", "huge-answer": "--cluster-target-max-response-bytes"} {
		testenv.Eventually(t, name+" to say why", 60*time.Second, func() bool {
			c := &operatorv1alpha1.Cluster{}
			if err := alice.client.Get(ctx, client.ObjectKey{Namespace: alice.namespace, Name: name}, c); err != nil {
				return false
			}
			ready := meta.FindStatusCondition(c.Status.Conditions, "Ready")
			return ready != nil && ready.Reason == operatorv1alpha1.ReasonClusterUnreachable && strings.Contains(ready.Message, want)
		})
	}
	// A few more retries of each, then the high-water mark of the whole run so far.
	time.Sleep(5 * time.Second)
	peak := testenv.PeakRSS(shipped.pid)
	t.Logf("manager peak RSS %d MiB", peak>>20)
	if peak > 300<<20 {
		t.Errorf("the manager's peak RSS is %d MiB, over 300 MiB", peak>>20)
	}
}
