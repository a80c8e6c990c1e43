// Package e2e runs trustplane as users run it: the binary built from ./cmd/trustplane, one
// child process per subcommand, started with the args of the rendered manifests (the
// manager's Deployment, the node agent's DaemonSet, the data-plane sidecar a gateway gets
// from the kustomize component) and authenticated with a token of the ServiceAccount those
// manifests grant — never as admin — against a real API server. What a pod's environment
// supplies is passed explicitly: the downward-API values, loopback ports, a kubeconfig with
// the ServiceAccount's token, and the namespace the manager would read from its token mount.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/trustplane/trustplane/internal/testenv"
)

var (
	env *testenv.Env
	ctx = context.Background()
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

func rendered(t *testing.T, dir string) []*unstructured.Unstructured { return testenv.Rendered(t, dir) }

func install(t *testing.T, objs []*unstructured.Unstructured) { env.Install(t, objs) }

func podSpecOf(t *testing.T, objs []*unstructured.Unstructured, kind, name string) corev1.PodSpec {
	return testenv.PodSpecOf(t, objs, kind, name)
}

func argsOf(t *testing.T, c corev1.Container, fieldValues map[string]string, overrides ...string) []string {
	return testenv.ArgsOf(t, c, fieldValues, overrides...)
}

func container(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	return testenv.ContainerOf(t, pod, name)
}

func urlOf(addr, path string) string { return fmt.Sprintf("http://%s%s", addr, path) }
