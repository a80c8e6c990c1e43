package nodeagent

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// issuingAgent is an agent over a stub API whose requests the test issues, writing into
// a temporary --dir, and a pod with one volume projection asking for every file.
type issuingAgent struct {
	*Agent
	api      *stubAPI
	recorder *events.FakeRecorder
	dir      string
	pod      *corev1.Pod
}

func newIssuingAgent(t *testing.T) *issuingAgent {
	t.Helper()
	api := &stubAPI{pcrs: map[string]*certificatesv1.PodCertificateRequest{}}
	recorder := events.NewFakeRecorder(20)
	f, dir := testFiles(t)
	manager := podcert.NewManager(api, recorder, clock.RealClock{}, "node")
	manager.SetJitter(func() time.Duration { return 0 })
	a := &Agent{opts: DefaultOptions(), recorder: recorder, manager: manager, files: f, problems: map[podcert.Key]string{},
		reported: map[types.NamespacedName]map[string]bool{}, uids: map[types.NamespacedName]types.UID{}, writeFailed: map[podcert.Key]bool{}, noSPIFFEID: map[podcert.Key]string{}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", UID: "u"}, Spec: corev1.PodSpec{
		ServiceAccountName: "web",
		Volumes: []corev1.Volume{{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519",
				CredentialBundlePath: "bundle.pem", KeyPath: "tls/key.pem", CertificateChainPath: "tls/chain.pem"}}}}}}},
	}}
	return &issuingAgent{Agent: a, api: api, recorder: recorder, dir: dir, pod: pod}
}

// issue makes the projection's credential a newly issued one with chain label: it asks
// for keyType (another key type than before starts the projection afresh), handles the
// pod (a new request), issues the request, and handles it again.
func (ia *issuingAgent) issue(t *testing.T, keyType, label string) {
	t.Helper()
	ia.issueChain(t, keyType, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(label + " leaf")}))
}

// issueChain is issue with the certificate chain the signer returns.
func (ia *issuingAgent) issueChain(t *testing.T, keyType string, chain []byte) {
	t.Helper()
	ia.pod.Spec.Volumes[0].Projected.Sources[0].PodCertificate.KeyType = keyType
	key := ia.key()
	if err := ia.manager.Handle(context.Background(), ia.pod, key); err != nil {
		t.Fatal(err)
	}
	pcr := ia.api.pcrs[fmt.Sprintf("req-%d", ia.api.created)]
	pcr.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions:       []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue}},
		CertificateChain: string(chain), BeginRefreshAt: &metav1.Time{Time: time.Now().Add(time.Hour)}, NotAfter: &metav1.Time{Time: time.Now().Add(2 * time.Hour)},
	}
	if err := ia.manager.Handle(context.Background(), ia.pod, key); err != nil {
		t.Fatal(err)
	}
}

func (ia *issuingAgent) key() podcert.Key {
	for key := range podcert.Projections(ia.pod) {
		return key
	}
	panic("the pod has no projection")
}

func (ia *issuingAgent) src() *corev1.PodCertificateProjection {
	return podcert.Projections(ia.pod)[ia.key()]
}

// files reads the projection's four files, by name.
func (ia *issuingAgent) files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"tls/key.pem", "tls/chain.pem", "bundle.pem", BundleFile} {
		raw, err := os.ReadFile(filepath.Join(ia.dir, "apps/web/id-0", name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(raw)
	}
	return out
}

// failing makes the write of every file whose path ends in suffix stop half-way with
// ENOSPC, as on a full disk.
func failing(suffix string) func(*os.File, string, []byte) error {
	return func(tmp *os.File, rel string, content []byte) error {
		if !strings.HasSuffix(rel, suffix) {
			return writeAll(tmp, rel, content)
		}
		if _, err := tmp.Write(content[:len(content)/2]); err != nil {
			return err
		}
		return &os.PathError{Op: "write", Path: tmp.Name(), Err: syscall.ENOSPC}
	}
}

// TestAFailedWriteLeavesTheFilesAsTheyWere: a renewed credential whose chain cannot be
// written (a full disk) must not leave keyPath holding the new key beside the old chain
// (a pair no TLS stack accepts) until space frees: the projection's files are replaced
// together or not at all, and no temporary file stays behind.
func TestAFailedWriteLeavesTheFilesAsTheyWere(t *testing.T) {
	ia := newIssuingAgent(t)
	ia.issue(t, "ED25519", "first")
	if err := ia.writeBundle(context.Background(), ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	before := ia.files(t)

	ia.issue(t, "ECDSAP256", "second")
	ia.Agent.files.writeTemp = failing("tls/chain.pem")
	err := ia.writeBundle(context.Background(), ia.pod, ia.key(), ia.src())
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing on a full disk: %v, want ENOSPC", err)
	}
	for name, content := range ia.files(t) {
		if content != before[name] {
			t.Errorf("after the failed write %s holds the new credential's content while the others hold the last one's", name) // never a key in the output
		}
	}
	assertNoTemporaryFiles(t, ia.dir)

	ia.Agent.files.writeTemp = writeAll // space freed
	if err := ia.writeBundle(context.Background(), ia.pod, ia.key(), ia.src()); err != nil {
		t.Fatal(err)
	}
	after := ia.files(t)
	if after["tls/key.pem"] == before["tls/key.pem"] || after["tls/key.pem"]+after["tls/chain.pem"] != after[BundleFile] || after["bundle.pem"] != after[BundleFile] {
		t.Error("once space freed, the files are not the new credential") // never a key in the output
	}
}

func assertNoTemporaryFiles(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("a temporary file stays behind: %s", path)
		}
		return nil
	})
}

// TestAFailedWriteIsReportedOnce: a write that fails (a full disk) is an error, retried,
// and one Warning event BundleWriteFailed on the pod saying why, not one per retry; once
// a write succeeds, the next failure is reported again.
func TestAFailedWriteIsReportedOnce(t *testing.T) {
	ia := newIssuingAgent(t)
	ia.issue(t, "ED25519", "first")
	projections := podcert.Projections(ia.pod)
	ia.Agent.files.writeTemp = failing(BundleFile)
	for range 3 {
		err := ia.handleProjections(context.Background(), ia.pod, projections)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("a failed write: %v, want it returned (retried) as ENOSPC", err)
		}
	}
	got := drainEvents(ia.recorder)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning "+certificates.ReasonBundleWriteFailed+" ") ||
		!strings.Contains(got[0], "no space left on device") || !strings.Contains(got[0], "volume id") {
		t.Fatalf("events %q, want one %s naming the volume and ENOSPC", got, certificates.ReasonBundleWriteFailed)
	}
	ia.Agent.files.writeTemp = writeAll
	if err := ia.handleProjections(context.Background(), ia.pod, projections); err != nil {
		t.Fatal(err)
	}
	ia.issue(t, "ECDSAP256", "second")
	ia.Agent.files.writeTemp = failing(BundleFile)
	_ = ia.handleProjections(context.Background(), ia.pod, podcert.Projections(ia.pod))
	if got := drainEvents(ia.recorder); len(got) != 1 {
		t.Errorf("failing again after a success: events %q, want one", got)
	}
}
