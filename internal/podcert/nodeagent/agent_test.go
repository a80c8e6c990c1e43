package nodeagent

import (
	"testing"

	"github.com/spf13/pflag"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trustplane/trustplane/internal/podcert"
)

func TestAnnotationOptIn(t *testing.T) {
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	if got := podcert.Projections(podcert.WithAnnotationProjection(plain)); len(got) != 0 {
		t.Errorf("a pod without the annotation got projections: %v", got)
	}
	opted := plain.DeepCopy()
	opted.Annotations = map[string]string{SignerAnnotation: "example.com/s", KeyTypeAnnotation: "ED25519"}
	got := podcert.Projections(podcert.WithAnnotationProjection(opted))
	if len(got) != 1 {
		t.Fatalf("projections: %v", got)
	}
	for key, src := range got {
		if key.VolumeName != podcert.AnnotationVolume || src.SignerName != "example.com/s" || src.KeyType != "ED25519" {
			t.Errorf("projection %v %+v", key, src)
		}
	}
	if len(opted.Spec.Volumes) != 0 {
		t.Error("the cached pod was modified")
	}
	defaulted := plain.DeepCopy()
	defaulted.Annotations = map[string]string{SignerAnnotation: "example.com/s"}
	for _, src := range podcert.Projections(podcert.WithAnnotationProjection(defaulted)) {
		if src.KeyType != "ECDSAP256" {
			t.Errorf("default key type %s", src.KeyType)
		}
	}
}

func TestServedProjections(t *testing.T) {
	volume := corev1.Volume{Name: "id", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519"}},
	}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{volume}}}
	keys := func(a *Agent, pod *corev1.Pod) []podcert.Key {
		var out []podcert.Key
		for k := range podcert.Projections(a.served(pod)) {
			out = append(out, k)
		}
		return out
	}
	byDefault := &Agent{opts: DefaultOptions()}
	if got := keys(byDefault, pod); len(got) != 0 {
		t.Errorf("kubelet's volume served by default: %v", got)
	}
	if pod.Spec.Volumes[0].Projected.Sources[1].PodCertificate == nil {
		t.Error("the cached pod was modified")
	}
	optedIn := pod.DeepCopy()
	optedIn.Annotations = map[string]string{ServeAnnotation: ServeAgent}
	if got := keys(byDefault, optedIn); len(got) != 1 || got[0].VolumeName != "id" || got[0].SourceIndex != 1 {
		t.Errorf("opted-in volume: %v", got)
	}
	all := &Agent{opts: DefaultOptions()}
	all.opts.ServeAllPods = true
	if got := keys(all, pod); len(got) != 1 || got[0].SourceIndex != 1 {
		t.Errorf("--serve-all-pods: %v", got)
	}
	annotated := pod.DeepCopy()
	annotated.Annotations = map[string]string{SignerAnnotation: "example.com/s"}
	if got := keys(byDefault, annotated); len(got) != 1 || got[0].VolumeName != podcert.AnnotationVolume {
		t.Errorf("signer annotation beside kubelet's volume: %v", got)
	}
}

func TestBundleModeFlag(t *testing.T) {
	opts := DefaultOptions()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	opts.AddFlags(fs)
	if err := fs.Parse([]string{"--node-name=n", "--bundle-mode=0640", "--bundle-gid=2000"}); err != nil {
		t.Fatal(err)
	}
	if opts.BundleMode != 0o640 || opts.BundleGID != 2000 || opts.Validate() != nil {
		t.Errorf("mode %v gid %d: %v", opts.BundleMode, opts.BundleGID, opts.Validate())
	}
	for _, bad := range []string{"--bundle-mode=0400", "--bundle-mode=9", "--bundle-gid=-2"} {
		o := DefaultOptions()
		o.NodeName = "n"
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.AddFlags(fs)
		if fs.Parse([]string{bad}) == nil && o.Validate() == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
