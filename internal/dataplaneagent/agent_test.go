package dataplaneagent

import (
	"testing"

	"github.com/trustplane/trustplane/pkg/dataplane"
)

// The ID covers only the leaf: a new intermediate behind the same leaf must still be
// written, and so must a new key.
func TestSameSecretsSeesChainAndKeyChanges(t *testing.T) {
	served := []dataplane.Secret{{Name: "site", ID: "1-1-abc", Crt: []byte("leaf+intermediate-1"), Key: []byte("key")}}
	if !sameSecrets(served, []dataplane.Secret{served[0]}) {
		t.Error("an identical set counts as changed")
	}
	for what, s := range map[string]dataplane.Secret{
		"chain": {Name: "site", ID: "1-1-abc", Crt: []byte("leaf+intermediate-2"), Key: []byte("key")},
		"key":   {Name: "site", ID: "1-1-abc", Crt: []byte("leaf+intermediate-1"), Key: []byte("key-2")},
	} {
		if sameSecrets(served, []dataplane.Secret{s}) {
			t.Errorf("a changed %s counts as the same set", what)
		}
	}
}
