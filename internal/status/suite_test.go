package status

import (
	"context"
	"os"
	"testing"

	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

func namespace(t *testing.T) string { return env.Namespace(t, "status") }
