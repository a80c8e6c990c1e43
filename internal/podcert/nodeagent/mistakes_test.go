package nodeagent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/trustplane/trustplane/internal/podcert"
)

// TestMistakesReportedOncePerProblem: the same mistake on every pass is one event and no
// error; corrected, the request is made; the same mistake again, a new event. Volume
// sources are named by their volume; a missing ServiceAccount is reported the same way.
func TestMistakesReportedOncePerProblem(t *testing.T) {
	recorder := events.NewFakeRecorder(20)
	api := &stubAPI{pcrs: map[string]*certificatesv1.PodCertificateRequest{}}
	a := &Agent{opts: DefaultOptions(), recorder: recorder, problems: map[podcert.Key]string{},
		manager: podcert.NewManager(api, recorder, clock.RealClock{}, "node")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u",
		Annotations: map[string]string{SignerAnnotation: "example.com/s", KeyTypeAnnotation: "RSA1024"}},
		Spec: corev1.PodSpec{ServiceAccountName: "web"}}
	pass := func() {
		t.Helper()
		served := a.served(pod) // as Reconcile passes it: with the annotation projection
		for key, src := range podcert.Projections(served) {
			if err := a.handleProjection(context.Background(), served, key, src); err != nil {
				t.Fatalf("a mistake returned as an error, to be retried: %v", err)
			}
		}
	}
	for range 3 {
		pass()
	}
	want := `Warning InvalidProjection pod certificate not requested: metadata.annotations[podcert.trustplane.io/key-type]: Unsupported value: "RSA1024": supported values: "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"`
	if got := drainEvents(recorder); len(got) != 1 || got[0] != want || api.created != 0 {
		t.Fatalf("events %q (want one: %s), %d requests", got, want, api.created)
	}
	pod.Annotations[KeyTypeAnnotation] = "ED25519"
	pass()
	if got := drainEvents(recorder); len(got) != 0 || api.created != 1 {
		t.Fatalf("the corrected pod: events %q, %d requests", got, api.created)
	}
	pod.Annotations[KeyTypeAnnotation] = "RSA1024"
	pass()
	if got := drainEvents(recorder); len(got) != 1 {
		t.Fatalf("the mistake made again: events %q, want one", got)
	}

	a.forgetProblems(types.NamespacedName{Namespace: "ns", Name: "p"})
	if len(a.problems) != 0 {
		t.Errorf("a gone pod's reports kept: %v", a.problems)
	}
	key := podcert.Key{Namespace: "ns", PodName: "p", PodUID: "u", VolumeName: "id", SourceIndex: 2}
	_ = a.handleProjection(context.Background(), pod, key, &corev1.PodCertificateProjection{SignerName: "pod-identity", KeyType: "ED25519"})
	if got := drainEvents(recorder); len(got) != 1 || !strings.Contains(got[0], `volume id source 2 not requested: spec.volumes[id].projected.sources[2].podCertificate.signerName: Invalid value: "pod-identity"`) {
		t.Errorf("volume source: events %q", got)
	}

	// A new pod (the ServiceAccount is a request's first need).
	pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "q", UID: "u2", Annotations: map[string]string{SignerAnnotation: "example.com/s"}}}
	for account, want := range map[string]string{
		"gone": `Warning ServiceAccountNotFound pod certificate not requested: ServiceAccount "gone" not found in namespace ns`,
		"":     `Warning InvalidProjection pod certificate not requested: spec.serviceAccountName: Required value`,
	} {
		pod.Spec.ServiceAccountName = account
		for range 3 {
			pass()
		}
		if got := drainEvents(recorder); len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("ServiceAccount %q: events %q, want one: %s", account, got, want)
		}
	}
}

// stubAPI knows the ServiceAccount "web" only; requests stay pending.
type stubAPI struct {
	created int
	pcrs    map[string]*certificatesv1.PodCertificateRequest
}

func (s *stubAPI) CreatePCR(_ context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	s.created++
	pcr = pcr.DeepCopy()
	pcr.Name, pcr.CreationTimestamp = fmt.Sprintf("req-%d", s.created), metav1.NewTime(time.Now())
	s.pcrs[pcr.Name] = pcr
	return pcr, nil
}

func (s *stubAPI) GetPCR(_, name string) (*certificatesv1.PodCertificateRequest, error) {
	if pcr, ok := s.pcrs[name]; ok {
		return pcr, nil
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("podcertificaterequests"), name)
}

func (s *stubAPI) ServiceAccountUID(_ context.Context, _, name string) (types.UID, error) {
	if name != "web" {
		return "", apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
	}
	return "sa-uid", nil
}

func (s *stubAPI) NodeUID(context.Context) (types.UID, error) { return "node-uid", nil }

func drainEvents(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
