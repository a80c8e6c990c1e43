package checksum

import (
	"reflect"
	"testing"

	tenginev1alpha1 "github.com/trustplane/trustplane/api/tengine/v1alpha1"
)

func TestExplain(t *testing.T) {
	const shaA, shaB = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	locals := []Local{
		{Object: "web/site-1", ID: "1-3-" + shaA}, // version bumped: published 1-2-A
		{Object: "web/site-2", ID: "2-1-" + shaB}, // certificate changed: published 2-1-A
		{Object: "web/site-3", ID: "3-1-" + shaA}, // new
		{Object: "web/site-4", LeftOut: &LeftOut{tenginev1alpha1.ReasonKeyMismatch, "tls.crt and tls.key do not load as a pair"}},
		{Object: "edge/other-10", ID: "10-1-" + shaA}, // agrees
		{Object: "web/ca-7", ID: "7-2-"},              // CA-only, version bumped
	}
	localOnly, publishedOnly := Diff(
		[]string{"1-3-" + shaA, "2-1-" + shaB, "3-1-" + shaA, "10-1-" + shaA, "7-2-"},
		[]string{"1-2-" + shaA, "2-1-" + shaA, "4-1-" + shaA, "5-1-" + shaA, "10-1-" + shaA, "7-1-"})
	got := Explain(localOnly, publishedOnly, locals)
	want := []Difference{
		{ID: "1-3-" + shaA, Side: OnlyInCluster, Objects: []string{"web/site-1"}, Why: "version 3 in the cluster, 2 published"},
		{ID: "1-2-" + shaA, Side: OnlyPublished, Objects: []string{"web/site-1"}, Why: "replaced in the cluster by 1-3-" + shaA},
		{ID: "2-1-" + shaB, Side: OnlyInCluster, Objects: []string{"web/site-2"}, Why: "certificate changed (SHA-1 bbbbbbbbbbbb… in the cluster, aaaaaaaaaaaa… published)"},
		{ID: "2-1-" + shaA, Side: OnlyPublished, Objects: []string{"web/site-2"}, Why: "replaced in the cluster by 2-1-" + shaB},
		{ID: "3-1-" + shaA, Side: OnlyInCluster, Objects: []string{"web/site-3"}, Why: "not in the published checksum: created, made valid or changed after it was published"},
		{ID: "4-1-" + shaA, Side: OnlyPublished, Objects: []string{"web/site-4"}, Why: "web/site-4 is left out (KeyMismatch: tls.crt and tls.key do not load as a pair)"},
		{ID: "5-1-" + shaA, Side: OnlyPublished, Why: "no object with numeric ID 5 in the cluster: deleted, renamed, or outside the scope"},
		{ID: "7-2-", Side: OnlyInCluster, Objects: []string{"web/ca-7"}, Why: "version 2 in the cluster, 1 published"},
		{ID: "7-1-", Side: OnlyPublished, Objects: []string{"web/ca-7"}, Why: "replaced in the cluster by 7-2-"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	// An unrelated object of the same numeric ID is not blamed: the certificate says which.
	got = Explain(nil, []string{"2-3-" + shaA}, []Local{
		{Object: "edge/api-2", LeftOut: &LeftOut{tenginev1alpha1.ReasonNotVersioned, "annotation missing"}, PemSHA: shaA},
		{Object: "other/pool-2", LeftOut: &LeftOut{tenginev1alpha1.ReasonNotVersioned, "annotation missing"}, PemSHA: shaB},
	})
	if len(got) != 1 || !reflect.DeepEqual(got[0].Objects, []string{"edge/api-2"}) || got[0].Why != "edge/api-2 is left out (NotVersioned: annotation missing)" {
		t.Errorf("narrowed: %+v", got)
	}
	// Ingress IDs have no PemSHA.
	got = Explain([]string{"5-2"}, []string{"5-1"}, []Local{{Object: "web/app-5", ID: "5-2"}})
	if len(got) != 2 || got[0].Why != "version 2 in the cluster, 1 published" {
		t.Errorf("ingress: %+v", got)
	}
}
