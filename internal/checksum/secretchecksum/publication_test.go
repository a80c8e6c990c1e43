package secretchecksum

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	tenginev1 "github.com/trustplane/trustplane/api/tengine/v1"
	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
	"github.com/trustplane/trustplane/internal/checksum"
	"github.com/trustplane/trustplane/internal/scheme"
)

// TestRefusedAsTooLargeIsPublishedWithoutIDs: an API server (or etcd) whose limit is
// below ours refuses the object; the checksum is published without its IDs instead of
// being retried for ever. A fake injects the refusal: a real etcd needs ~30,000 IDs
// (make bench-checksum shows that path).
func TestRefusedAsTooLargeIsPublishedWithoutIDs(t *testing.T) {
	creates := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			if sum := obj.(*tenginev1.SecretCheckSum); len(sum.Spec.IDs) > 0 {
				return apierrors.NewInternalError(errString("etcdserver: request is too large"))
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	opts := DefaultOptions()
	opts.PublishNamespace = "edge"
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: recorder, Clock: clock.RealClock{}, Metrics: defaultMetrics, opts: opts,
		reports: newReporter(c, clock.RealClock{}, defaultMetrics)}
	ids := []string{"1-1-aa", "2-1-bb"}
	obj, err := r.publish(context.Background(), publication{checksum.TrackSecrets, ScopeCluster, "edge"}, ids, checksum.Sum(ids))
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*tenginev1.SecretCheckSum)
	if creates != 2 || len(got.Spec.IDs) != 0 || got.Spec.Checksum != checksum.Sum(ids) ||
		!strings.Contains(got.Annotations[checksum.IDsOmittedAnnotation], "refused the object as too large") {
		t.Errorf("creates %d, published %+v, annotations %v", creates, got.Spec, got.Annotations)
	}
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, tenginev1alpha1.ReasonIDsOmitted) {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no IDsOmitted event")
	}
}

type errString string

func (e errString) Error() string { return string(e) }
