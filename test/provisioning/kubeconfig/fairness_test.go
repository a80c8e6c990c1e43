package kubeconfig_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorv1alpha1 "github.com/trustplane/trustplane/api/operator/v1alpha1"
	kubeconfigctrl "github.com/trustplane/trustplane/internal/provisioning/kubeconfig"
)

// floodRequests is how many requests one tenant points at a dead target: ten times the
// controller's default workers, as in the issue that found the starvation (320).
const floodRequests = 320

// blackHole is a TCP server that accepts every connection and never answers: a target
// whose every request waits for its timeout. It stops when the test ends.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestADeadTargetFloodLeavesOtherTenantsAlone: one tenant points hundreds of requests at a
// cluster that never answers; another tenant's request is still issued, and its revocation
// takes effect (Secret gone, token refused by the target) within seconds. Before workers
// were shared per namespace and a dead target failed fast, every worker waited in line on
// the dead target's lock, and such a revocation took minutes.
func TestADeadTargetFloodLeavesOtherTenantsAlone(t *testing.T) {
	setup(t)
	flood := mgmt.Namespace(t, "flood")
	parsed, err := clientcmd.Load(target.Environment().KubeConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range parsed.Clusters {
		c.Server = "https://" + blackHole(t)
	}
	deadConfig, err := clientcmd.Write(*parsed)
	if err != nil {
		t.Fatal(err)
	}
	createAll(t,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: flood, Name: "dead-admin"}, Data: map[string][]byte{"kubeconfig": deadConfig}},
		&operatorv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: flood, Name: "dead"},
			Spec: operatorv1alpha1.ClusterSpec{KubeconfigSecretRef: &operatorv1alpha1.SecretKeyReference{Name: "dead-admin"}}})
	var requests []client.Object
	for i := range floodRequests {
		requests = append(requests, roleRequest(flood, fmt.Sprintf("flood-%03d", i), "dead"))
	}
	createAll(t, requests...)
	t.Cleanup(func() { forceDelete(t, requests) })
	waitFor(t, "the flood to reach the dead target", func() bool {
		kr := &operatorv1alpha1.KubeconfigRequest{}
		return mgmt.Client.Get(ctx, client.ObjectKey{Namespace: flood, Name: "flood-000"}, kr) == nil && kr.Status.GrantedIn != nil
	})

	// The other tenant, at a healthy cluster, while the flood goes on.
	createAll(t, roleRequest(ns, "beside-the-flood", "target"))
	kr := waitReady(t, "beside-the-flood", metav1.ConditionTrue, operatorv1alpha1.ReasonIssued)
	kc := clientFrom(t, kr)
	start := time.Now()
	patchAnnotation(t, "beside-the-flood", operatorv1alpha1.RevokeAnnotation, "true")
	waitFor(t, "the revocation to be done beside the flood", func() bool {
		kr := &operatorv1alpha1.KubeconfigRequest{}
		if err := mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "beside-the-flood"}, kr); err != nil {
			t.Fatal(err)
		}
		secretGone := apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "beside-the-flood-kubeconfig"}, &corev1.Secret{}))
		accounts := &corev1.ServiceAccountList{}
		if err := target.Client.List(ctx, accounts, client.MatchingLabels{kubeconfigctrl.RequestNameLabel: "beside-the-flood"}); err != nil {
			t.Fatal(err)
		}
		return kr.Status.Kubeconfig == "" && kr.Status.GrantedIn == nil && secretGone && len(accounts.Items) == 0
	})
	t.Logf("revoked beside a flood of %d requests at a dead target in %v (status, Secret and target objects)", floodRequests, time.Since(start).Round(time.Millisecond))
	// kube-apiserver caches a successful token authentication for 10 s: then it refuses it.
	waitFor(t, "the target to refuse the revoked token", func() bool {
		_, err := kc.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err)
	})
	if err := mgmt.Client.Delete(ctx, kr); err != nil {
		t.Fatal(err)
	}
}

// forceDelete deletes objs without their finalizers: requests at a target that is gone
// would otherwise wait for it for ever, and every later test's controller with them.
func forceDelete(t *testing.T, objs []client.Object) {
	t.Helper()
	for _, obj := range objs {
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
		if err := mgmt.Client.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
		if err := mgmt.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	}
}
