//go:build bench

package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/localnode/localcluster"
	"github.com/trustplane/trustplane/internal/podcert"
	"github.com/trustplane/trustplane/internal/podcert/podcertsigner"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/internal/version"
)

// bench is one syncFrequency's run: its own control plane and node in dir.
type bench struct {
	dir, k8sBin, nodeBin, images, binary string
	sync                                 time.Duration

	cl *localcluster.Cluster
	c  client.Client
	// pods are the pods created so far, in order.
	pods []*corev1.Pod
}

// rotation is one CA rotation's times.
type rotation struct {
	// published is from the Secret written to the ClusterTrustBundle read back holding
	// the new CA.
	published time.Duration
	// perPod is, for each pod, from the bundle holding it to the pod's file holding it;
	// every is the longest of them: the budget.
	perPod []time.Duration
	every  time.Duration
}

// run starts the cluster and the signer, then measures each size; the cluster is gone
// (and checked to have left nothing behind) when it returns.
func (b *bench) run(sizes []int) (rows []testenv.BenchRow, err error) {
	netnsBefore := localcluster.NetNamespaces()
	start := time.Now()
	b.cl, err = localcluster.Start(localcluster.Config{
		Dir: b.dir, K8sBin: b.k8sBin, NodeBin: b.nodeBin, Images: b.images, NodeName: nodeName, SyncFrequency: b.sync,
		Log: func(format string, args ...any) { fmt.Printf("node: "+format+"\n", args...) },
	})
	if err != nil {
		return nil, err
	}
	running.push(b.cl.Stop)
	defer func() {
		running.stop()
		// What make run's Ctrl-C promises, and test/node checks: nothing stays behind.
		if left := localcluster.Leftovers(b.dir, netnsBefore); len(left) > 0 {
			err = errors.Join(err, fmt.Errorf("the stopped node left behind: %s", strings.Join(left, "; ")))
		}
	}()
	b.c = b.cl.Client
	fmt.Printf("syncFrequency %v: control plane and node up after %s\n", b.sync, time.Since(start).Round(100*time.Millisecond))
	ctx := context.Background()
	if err := b.startSigner(ctx); err != nil {
		return nil, err
	}
	for _, n := range sizes {
		runs, err := b.measure(ctx, n)
		if err != nil {
			return rows, err
		}
		rows = append(rows, b.rows(n, runs)...)
	}
	return rows, nil
}

// startSigner makes the namespace, starts the manager with only the signer, and waits
// for its live bundle.
func (b *bench) startSigner(ctx context.Context) error {
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	// Pods need the namespace's default ServiceAccount, which kube-controller-manager makes.
	if err := waitUntil(time.Minute, "namespace "+namespace+"'s default ServiceAccount", func() (bool, error) {
		return b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	}); err != nil {
		return err
	}
	log := filepath.Join(b.dir, "manager.log")
	logs, err := os.Create(log)
	if err != nil {
		return err
	}
	cmd := exec.Command(b.binary, "manager", "--kubeconfig", b.cl.CP.KubeconfigPath, "--controllers", podcertsigner.Name,
		"--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--jwks-server-bind-address", "0",
		"--podcertificate-signer-ca-namespace", namespace, "--podcertificate-signer-ca-secret", caSecret)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // never outlive the bench
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return fmt.Errorf("starting the manager: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logs.Close(); close(exited) }()
	running.push(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// The signer makes its CA Secret and publishes the CA in its live bundle.
	return waitUntil(time.Minute, "the signer's ClusterTrustBundle "+podcertsigner.BundleName(signerName)+" (manager log: "+log+")", func() (bool, error) {
		current, err := b.currentCA(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // not made yet
		}
		return b.bundleHolds(ctx, current)
	})
}

// currentCA is the CA that signs now, from the CA Secret.
func (b *bench) currentCA(ctx context.Context) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: caSecret}, secret); err != nil {
		return nil, err
	}
	block, _ := pem.Decode(secret.Data[podcert.CACertKey])
	if block == nil {
		return nil, fmt.Errorf("secret %s/%s has no CA in %s", namespace, caSecret, podcert.CACertKey)
	}
	return block.Bytes, nil
}

// bundleHolds says whether the signer's live ClusterTrustBundle holds the certificate der.
func (b *bench) bundleHolds(ctx context.Context, der []byte) (bool, error) {
	ctb := &certificatesv1.ClusterTrustBundle{}
	if err := b.c.Get(ctx, client.ObjectKey{Name: podcertsigner.BundleName(signerName)}, ctb); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return pemHolds([]byte(ctb.Spec.TrustBundle), der), nil
}

// pemHolds says whether the PEM certificates in data include der.
func pemHolds(data, der []byte) bool {
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return false
		}
		if block.Type == "CERTIFICATE" && bytes.Equal(block.Bytes, der) {
			return true
		}
	}
}

// measure brings the pods up to n, waits until each runs and its file holds the current
// CA, then measures -rotations rotations.
func (b *bench) measure(ctx context.Context, n int) ([]rotation, error) {
	start := time.Now()
	for i := len(b.pods); i < n; i++ {
		pod := trustingPod(fmt.Sprintf("app-%d", i))
		if err := b.c.Create(ctx, pod); err != nil {
			return nil, fmt.Errorf("creating pod %s: %w", pod.Name, err)
		}
		b.pods = append(b.pods, pod)
	}
	if err := waitUntil(3*time.Minute+time.Duration(n)*5*time.Second, fmt.Sprintf("%d pods to run", n), func() (bool, error) {
		for _, pod := range b.pods {
			if err := b.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return false, err
			}
			if pod.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	current, err := b.currentCA(ctx)
	if err != nil {
		return nil, err
	}
	if err := waitUntil(2*time.Minute+2*b.sync, "every pod's trust bundle file to hold the current CA", func() (bool, error) {
		for _, pod := range b.pods {
			if !b.fileHolds(pod, current) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	fmt.Printf("syncFrequency %v: %d pods running, each file holding the current CA, after %s\n", b.sync, n, time.Since(start).Round(100*time.Millisecond))
	runs := make([]rotation, 0, *rotations)
	for i := range *rotations {
		r, err := b.rotate(ctx)
		if err != nil {
			return nil, fmt.Errorf("rotation %d at %d pods: %w", i+1, n, err)
		}
		fmt.Printf("syncFrequency %v, %d pods, rotation %d of %d: Secret written to bundle holding it %v; bundle to every pod's file %v (first pod %v, p50 %v)\n",
			b.sync, n, i+1, *rotations, r.published.Round(time.Millisecond), r.every.Round(time.Millisecond),
			testenv.Percentile(r.perPod, 0).Round(time.Millisecond), testenv.Percentile(r.perPod, 0.5).Round(time.Millisecond))
		runs = append(runs, r)
	}
	return runs, nil
}

// trustingPod is a pod that trusts the signer as a workload does: a projected volume
// with the signer's live bundles, selected by signerName and the canarying label.
func trustingPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "app", Image: version.Image("pause"),
				VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: "/var/run/trust", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{
					SignerName:    ptr.To(signerName),
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{certificates.LabelCanarying: certificates.LabelCanaryingLive}},
					Path:          file,
				}}},
			}}}},
		},
	}
}

// fileHolds says whether the pod's projected file, as the kubelet wrote it on the host,
// holds the certificate der.
func (b *bench) fileHolds(pod *corev1.Pod, der []byte) bool {
	data, err := os.ReadFile(filepath.Join(b.cl.KubeletRootDir(), "pods", string(pod.UID), "volumes", "kubernetes.io~projected", volume, file))
	return err == nil && pemHolds(data, der)
}

// rotate writes a new CA into next.crt/next.key and times it until every pod's file
// holds it. Each read is -poll apart: the bundle first, then the files, so that a file
// is never seen holding the CA before the bundle (the kubelet only has it from there).
func (b *bench) rotate(ctx context.Context) (rotation, error) {
	next, err := podcert.NewCA("propagation bench CA "+time.Now().Format(time.RFC3339Nano), time.Now(), 24*time.Hour)
	if err != nil {
		return rotation{}, err
	}
	der := next.Cert.Raw
	// The signer writes the Secret too (its annotations): on a conflict, read and write again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		secret := &corev1.Secret{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: caSecret}, secret); err != nil {
			return err
		}
		secret.Data[podcert.NextCertKey], secret.Data[podcert.NextKeyKey] = next.CertPEM, next.KeyPEM
		return b.c.Update(ctx, secret)
	}); err != nil {
		return rotation{}, fmt.Errorf("writing the next CA into %s/%s: %w", namespace, caSecret, err)
	}
	written := time.Now()
	var published time.Time
	seen := make([]time.Time, len(b.pods))
	left := len(b.pods)
	deadline := written.Add(3*b.sync + 3*time.Minute)
	for ; left > 0 || published.IsZero(); time.Sleep(*poll) {
		if time.Now().After(deadline) {
			return rotation{}, fmt.Errorf("after %v, the bundle holds the new CA: %v; %d of %d pods' files do not", time.Since(written).Round(time.Second), !published.IsZero(), left, len(b.pods))
		}
		if published.IsZero() {
			holds, err := b.bundleHolds(ctx, der)
			if err != nil {
				return rotation{}, err
			}
			if holds {
				published = time.Now()
			}
		}
		for i, pod := range b.pods {
			if seen[i].IsZero() && b.fileHolds(pod, der) {
				seen[i] = time.Now()
				left--
			}
		}
	}
	r := rotation{published: published.Sub(written)}
	for _, at := range seen {
		d := max(at.Sub(published), 0)
		r.perPod = append(r.perPod, d)
		r.every = max(r.every, d)
	}
	return r, nil
}

// rows are one size's figures over its rotations, printed and recorded.
func (b *bench) rows(n int, runs []rotation) []testenv.BenchRow {
	var perPod, every, published []time.Duration
	for _, r := range runs {
		perPod = append(perPod, r.perPod...)
		every = append(every, r.every)
		published = append(published, r.published)
	}
	work := fmt.Sprintf("CA published to every pod's projected ClusterTrustBundle, kubelet syncFrequency %v, %d rotations", b.sync, len(runs))
	s := func(d time.Duration) float64 { return d.Seconds() }
	fmt.Printf("syncFrequency %v, %d pods, %d rotations: per pod p50 %.1f s, max %.1f s; every pod (the budget) p50 %.1f s, max %.1f s; Secret written to bundle p50 %.2f s, max %.2f s\n",
		b.sync, n, len(runs), s(testenv.Percentile(perPod, 0.5)), s(testenv.Percentile(perPod, 1)),
		s(testenv.Percentile(every, 0.5)), s(testenv.Percentile(every, 1)), s(testenv.Percentile(published, 0.5)), s(testenv.Percentile(published, 1)))
	row := func(figure string, d time.Duration) testenv.BenchRow {
		return testenv.BenchRow{System: "podcert", Work: work, Size: n, Figure: figure, Value: s(d), Unit: "s"}
	}
	return []testenv.BenchRow{
		row("per pod p50", testenv.Percentile(perPod, 0.5)),
		row("per pod max", testenv.Percentile(perPod, 1)),
		row("every pod p50", testenv.Percentile(every, 0.5)),
		row("every pod max (budget)", testenv.Percentile(every, 1)),
		row("Secret written to bundle p50", testenv.Percentile(published, 0.5)),
		row("Secret written to bundle max", testenv.Percentile(published, 1)),
	}
}

// waitUntil polls cond every 250 ms until it holds, fails, or timeout passes.
func waitUntil(timeout time.Duration, what string, cond func() (bool, error)) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(250 * time.Millisecond) {
		ok, err := cond()
		switch {
		case err != nil:
			return fmt.Errorf("waiting for %s: %w", what, err)
		case ok:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
	}
}
