package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/conditions"
	"github.com/trustplane/trustplane/internal/status"
)

// staleReadProbe is a condition type no controller sets: written and removed again here.
const staleReadProbe = "E2EStaleReadProbe"

// writeStatusFromStaleRead: a status written from a read older than the stored object
// (internal/status reads the stored conditions from the status subresource and patches
// them at that version) works under the manager's token, as the manifests grant it, while
// the manager goes on writing the same object: a condition set from an old read is
// stored beside the manager's, and removed again, and the manager's Ready stays.
func writeStatusFromStaleRead(t *testing.T, obj conditions.Object) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.ServiceAccountKubeconfig(t, managerNamespace, "trustplane-manager"))
	if err != nil {
		t.Fatal(err)
	}
	manager, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(obj)
	for _, set := range []bool{true, false} {
		if err := manager.Get(ctx, key, obj); err != nil {
			t.Fatal(err)
		}
		// Another writer since the read: the stored object is newer than obj.
		touch := fmt.Appendf(nil, `{"metadata":{"annotations":{"e2e-touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
		if err := env.Client.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, touch)); err != nil {
			t.Fatal(err)
		}
		p := status.NewPatcher(obj)
		if set {
			status.Set(obj, staleReadProbe, metav1.ConditionTrue, "Probe", "written from a stale read")
		} else {
			c := obj.GetConditions()
			meta.RemoveStatusCondition(&c, staleReadProbe)
			obj.SetConditions(c)
		}
		if err := p.Patch(ctx, manager); err != nil {
			t.Fatalf("%T %s: a status patch from a stale read under the manager's token: %v", obj, key, err)
		}
		stored := obj.DeepCopyObject().(conditions.Object)
		if err := env.Client.Get(ctx, key, stored); err != nil {
			t.Fatal(err)
		}
		if got := meta.FindStatusCondition(stored.GetConditions(), staleReadProbe) != nil; got != set || meta.FindStatusCondition(stored.GetConditions(), conditions.Ready) == nil {
			t.Errorf("%T %s: after writing %s=%v from a stale read, stored conditions %+v", obj, key, staleReadProbe, set, stored.GetConditions())
		}
	}
}
