package cluster_test

import (
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/provisioning/gardenstandin"
)

// front is the garden stand-in's front (test/provisioning/gardenstandin) with this garden's admission
// plugins and webhooks (admit, garden_admission_test.go), which look other objects up in
// the garden.
type front struct {
	*gardenstandin.Front
	garden client.Client
}

func newFront(gardenEnv *testenv.Env, adminKubeconfig []byte) (*front, error) {
	f := &front{garden: gardenEnv.Client}
	var err error
	f.Front, err = gardenstandin.NewFront(gardenEnv.Config, gardenEnv.Client, adminKubeconfig, func(r *http.Request, ns string) (int, string) {
		if refused := f.admit(r, ns); refused != nil {
			return refused.code, refused.message
		}
		return 0, ""
	})
	return f, err
}

// adminUser adds a cluster-admin user to the shoot API server, as Gardener's admin
// kubeconfigs are.
func adminUser(env *envtest.Environment) ([]byte, error) {
	user, err := env.AddUser(envtest.User{Name: "gardener-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	return user.KubeConfig()
}
