package aggregation_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/trustplane/trustplane/internal/aggregation/rbac"
	"github.com/trustplane/trustplane/internal/testenv"
	"github.com/trustplane/trustplane/test/aggregation/sidebyside"
)

// TestSideBySideWithKubeControllerManager feeds the same seeded corpus and churn to
// kube-controller-manager v1.37.1 and to trustplane, each against its own API server, and
// requires identical rules on every ClusterRole — the bootstrap admin/edit/view roles
// included. trustplane's fan-out is indexed while upstream re-evaluates everything, so
// this is also the proof that the index loses no update.
func TestSideBySideWithKubeControllerManager(t *testing.T) {
	root := testenv.RepoRoot()
	dir := t.TempDir()
	binary := filepath.Join(dir, "trustplane")
	if out, err := exec.Command("go", "build", "-o", binary, filepath.Join(root, "cmd/trustplane")).CombinedOutput(); err != nil {
		t.Fatalf("building trustplane: %v\n%s", err, out)
	}
	kcm, err := sidebyside.StartSide("kube-controller-manager", dir, sidebyside.KubeControllerManager(filepath.Dir(testenv.Tool(t, "k8s/kube-controller-manager"))))
	if err != nil {
		t.Fatal(err)
	}
	defer kcm.Stop()
	tp, err := sidebyside.StartSide("trustplane", dir, sidebyside.Trustplane(binary))
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Stop()
	sides := []*sidebyside.Side{kcm, tp}
	ctx := context.Background()

	for _, seed := range []int64{1, 2, 3} {
		corpus := sidebyside.NewCorpus(seed, "s"+string(rune('0'+seed))+"-")
		corpus.EmptyTop = seed == 1 // one {} selector per cluster: two would select each other
		// Initial world, then churn in bursts with short pauses, so both controllers see
		// events both batched and one at a time.
		ops := corpus.Initial(80, 12)
		for _, burst := range [][]sidebyside.Op{ops, corpus.Churn(150), corpus.Churn(150)} {
			for _, op := range burst {
				for _, s := range sides {
					if err := sidebyside.Apply(ctx, s.Client, op); err != nil {
						t.Fatalf("seed %d: %s on %s: %v", seed, op.Name, s.Name, err)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, s := range sides {
			if _, err := sidebyside.WaitConverged(ctx, s.Client, 2*time.Minute); err != nil {
				t.Fatalf("seed %d: %s: %v (logs in %s)", seed, s.Name, err, dir)
			}
		}
		// Then isolated changes, each converged before the next, so no later event can
		// mask an update that the fan-out failed to deliver. The bench's replay of events
		// one at a time starts here too: it must end where kube-controller-manager does.
		converged := &rbacv1.ClusterRoleList{}
		if err := kcm.Client.List(ctx, converged); err != nil {
			t.Fatal(err)
		}
		replay := sidebyside.NewReplay(converged.Items)
		for i, op := range corpus.Churn(40) {
			if _, err := replay.Apply(op); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			for _, s := range sides {
				if err := sidebyside.Apply(ctx, s.Client, op); err != nil {
					t.Fatalf("seed %d: %s on %s: %v", seed, op.Name, s.Name, err)
				}
			}
			for _, s := range sides {
				if _, err := sidebyside.WaitConverged(ctx, s.Client, 15*time.Second); err != nil {
					t.Fatalf("seed %d, isolated change %d (%s %v): %s: %v", seed, i, op.Name, op.Patch, s.Name, err)
				}
			}
		}
		want, err := sidebyside.Snapshot(ctx, kcm.Client)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sidebyside.Snapshot(ctx, tp.Client)
		if err != nil {
			t.Fatal(err)
		}
		if diff := sidebyside.Diff(want, got); len(diff) > 0 {
			t.Fatalf("seed %d: %d ClusterRoles differ (kube-controller-manager first):\n%s", seed, len(diff), strings.Join(sidebyside.Head(diff), "\n"))
		}
		if diff := replayDiff(ctx, t, kcm, replay); len(diff) > 0 {
			t.Fatalf("seed %d: the replay of the isolated changes ends elsewhere than kube-controller-manager on %d ClusterRoles:\n%s", seed, len(diff), strings.Join(sidebyside.Head(diff), "\n"))
		}
		aggregated := 0
		for name, rules := range got {
			if strings.Contains(name, "agg") || strings.HasSuffix(name, "top") {
				if rules != "null" && rules != "[]" {
					aggregated++
				}
			}
		}
		if aggregated < 5 {
			t.Fatalf("seed %d: only %d aggregators hold rules: the corpus does not exercise aggregation", seed, aggregated)
		}
		t.Logf("seed %d: %d ClusterRoles identical, %d corpus aggregators with rules", seed, len(got), aggregated)
	}
}

// replayDiff names the ClusterRoles whose rules differ between a side and a replay.
func replayDiff(ctx context.Context, t *testing.T, s *sidebyside.Side, replay *sidebyside.Replay) []string {
	t.Helper()
	list := &rbacv1.ClusterRoleList{}
	if err := s.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	replayed := replay.Rules()
	var diff []string
	for _, r := range list.Items {
		if rules, ok := replayed[r.Name]; !ok || !rbac.RulesEqual(rules, r.Rules) {
			diff = append(diff, fmt.Sprintf("%s: %s holds %v, the replay %v", r.Name, s.Name, r.Rules, rules))
		}
		delete(replayed, r.Name)
	}
	for name := range replayed {
		diff = append(diff, name+": only in the replay")
	}
	sort.Strings(diff)
	return diff
}
