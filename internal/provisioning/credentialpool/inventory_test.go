package credentialpool

import (
	"fmt"
	"testing"

	cp "github.com/trustplane/trustplane/api/controlplane/v1alpha1"
)

// TestCountAsKEBCounts: free, claimed, dirty and shared credentials by hyperscalerType as
// kyma-environment-broker's collector selects them, and each credential's users.
func TestCountAsKEBCounts(t *testing.T) {
	typ, tenant, dirty, shared := cp.LabelHyperscalerType, cp.LabelTenantName, cp.LabelDirty, cp.LabelShared
	pool := []Credential{
		cred("free-1", typ, "aws"), cred("free-2", typ, "aws"), cred("free-gcp", typ, "gcp"),
		cred("claimed-a", typ, "aws", tenant, "ga-a"), cred("claimed-a2", typ, "aws", tenant, "ga-a"), cred("claimed-b", typ, "gcp", tenant, "ga-b"),
		cred("dirty-claimed", typ, "aws", tenant, "ga-c", dirty, "true"), cred("dirty-free", typ, "aws", dirty, "true"),
		cred("shared-1", typ, "aws", shared, "true"), cred("shared-2", typ, "aws", shared, "true"),
		cred("no-type", tenant, "ga-a"),
	}
	inv := Count(pool, map[string]int{"claimed-a": 2, "shared-1": 5, "free-1": 0, "no-type": 3})
	for _, c := range []struct{ what, got, want string }{
		{"available", fmt.Sprint(inv.Available), "map[aws:2 gcp:1]"},
		{"claimed", fmt.Sprint(inv.Claimed), "map[[aws ga-a]:2 [aws ga-c]:1 [gcp ga-b]:1]"},
		{"dirty", fmt.Sprint(inv.Dirty), "map[aws:2]"},
		{"shared", fmt.Sprint(inv.Shared), "map[aws:2]"},
		{"instances", fmt.Sprint(inv.Instances), "map[claimed-a:2 shared-1:5]"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.what, c.got, c.want)
		}
	}
}
