package nodeagent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"github.com/trustplane/trustplane/api/certificates"
	"github.com/trustplane/trustplane/internal/podcert"
)

// outside is a directory beside --dir, as a host directory a planted link points at: it
// must keep its mode, entries and content whatever the agent is asked to write.
type outside struct {
	dir     string
	mode    os.FileMode
	entries []string
}

func newOutside(t *testing.T) *outside {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host-etc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tls"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := &outside{dir: dir}
	o.mode, o.entries = o.state(t)
	return o
}

func (o *outside) state(t *testing.T) (os.FileMode, []string) {
	t.Helper()
	info, err := os.Lstat(o.dir)
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	err = filepath.Walk(o.dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		entries = append(entries, fmt.Sprintf("%s %v %d:%d", path, info.Mode(), st.Uid, st.Gid))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode(), entries
}

// untouched fails the test when the outside directory or anything in it changed.
func (o *outside) untouched(t *testing.T) {
	t.Helper()
	mode, entries := o.state(t)
	if mode != o.mode {
		t.Errorf("the outside directory's mode changed: %v → %v", o.mode, mode)
	}
	if !slices.Equal(entries, o.entries) {
		t.Errorf("the outside directory's entries changed:\n%q\n→\n%q", o.entries, entries)
	}
	if raw, err := os.ReadFile(filepath.Join(o.dir, "passwd")); err != nil || string(raw) != "root:x:0:0\n" {
		t.Errorf("the outside file changed: %q %v", raw, err)
	}
}

const projectionDir = "apps/web/id-0"

// testFiles is --dir in a temporary directory, with the deployment's mode and a group.
func testFiles(t *testing.T) (*files, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "podcerts")
	return newFiles(dir, 0o640, os.Getgid()), dir
}

func TestWriteMakesTheTreeWithTheBundleModeAndGroup(t *testing.T) {
	f, dir := testFiles(t)
	for _, name := range []string{"tls/key.pem", BundleFile} {
		if err := f.write(filepath.Join(projectionDir, name), []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"apps", "apps/web", projectionDir, projectionDir + "/tls"} {
		assertOwned(t, filepath.Join(dir, p), os.ModeDir|0o750)
	}
	for _, name := range []string{"tls/key.pem", BundleFile} {
		path := filepath.Join(dir, projectionDir, name)
		assertOwned(t, path, 0o640)
		if raw, _ := os.ReadFile(path); string(raw) != name {
			t.Errorf("%s holds %q", name, raw)
		}
	}
	// The same content again: the file is left alone (watchers see no change).
	before, _ := os.Stat(filepath.Join(dir, projectionDir, BundleFile))
	if err := f.write(filepath.Join(projectionDir, BundleFile), []byte(BundleFile)); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(dir, projectionDir, BundleFile))
	if !os.SameFile(before, after) {
		t.Error("an identical bundle was replaced")
	}
	// The same content with another mode (--bundle-mode changed): given the bundle mode.
	if err := os.Chmod(filepath.Join(dir, projectionDir, BundleFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.write(filepath.Join(projectionDir, BundleFile), []byte(BundleFile)); err != nil {
		t.Fatal(err)
	}
	assertOwned(t, filepath.Join(dir, projectionDir, BundleFile), 0o640)
	if leftovers, _ := filepath.Glob(filepath.Join(dir, projectionDir, ".*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

func assertOwned(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != mode {
		t.Errorf("%s: mode %v, want %v", path, info.Mode(), mode)
	}
	if gid := int(info.Sys().(*syscall.Stat_t).Gid); gid != os.Getgid() {
		t.Errorf("%s: gid %d, want %d", path, gid, os.Getgid())
	}
}

// TestLinksAreNeverFollowed plants a symbolic link at every level of a bundle's path, to
// a directory (or file) outside --dir, as a pod with a hostPath of its own bundle
// directory can: the write is refused, naming the link, and nothing outside changes.
func TestLinksAreNeverFollowed(t *testing.T) {
	for _, tc := range []struct {
		name, link, write string
		toFile            bool
	}{
		{name: "namespace directory", link: "apps", write: BundleFile},
		{name: "pod directory", link: "apps/web", write: BundleFile},
		{name: "volume directory", link: projectionDir, write: BundleFile},
		{name: "keyPath component", link: projectionDir + "/tls", write: "tls/key.pem"},
		{name: "bundle file to a directory", link: projectionDir + "/" + BundleFile, write: BundleFile},
		{name: "bundle file to a file", link: projectionDir + "/" + BundleFile, write: BundleFile, toFile: true},
		{name: "keyPath file", link: projectionDir + "/tls/key.pem", write: "tls/key.pem", toFile: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := testFiles(t)
			out := newOutside(t)
			target := out.dir
			if tc.toFile {
				target = filepath.Join(out.dir, "passwd")
			}
			plant(t, filepath.Join(dir, tc.link), func(p string) error { return os.Symlink(target, p) })

			err := f.write(filepath.Join(projectionDir, tc.write), []byte("attacker-chosen key"))
			var refused *refusedError
			if !errors.As(err, &refused) || refused.Path != tc.link || !strings.Contains(refused.Why, "symbolic link") {
				t.Errorf("write through a link at %s: %v, want it refused naming %s", tc.link, err, tc.link)
			}
			out.untouched(t)
			if info, err := os.Lstat(filepath.Join(dir, tc.link)); err != nil || info.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the planted link was changed: %v %v", info, err)
			}
		})
	}
}

// plant makes the parents of path (as the agent would have) and then what(path).
func plant(t *testing.T, path string, what func(string) error) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := what(path); err != nil {
		t.Fatal(err)
	}
}

// TestLinksInsideTheTreeAreRefusedToo: a link to another pod's directory stays inside
// --dir but would hand one pod's key to another; it is refused like any link.
func TestLinksInsideTheTreeAreRefusedToo(t *testing.T) {
	f, dir := testFiles(t)
	if err := f.write("apps/other/id-0/"+BundleFile, []byte("other's")); err != nil {
		t.Fatal(err)
	}
	plant(t, filepath.Join(dir, projectionDir), func(p string) error { return os.Symlink("../other/id-0", p) })
	var refused *refusedError
	if err := f.write(filepath.Join(projectionDir, BundleFile), []byte("mine")); !errors.As(err, &refused) {
		t.Errorf("write through a link inside the tree: %v", err)
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, "apps/other/id-0", BundleFile)); string(raw) != "other's" {
		t.Errorf("the other pod's bundle became %q", raw)
	}
}

// TestOnlyDirectoriesTheAgentMadeAreEntered: a file where a directory belongs, a FIFO
// where the bundle goes (opening it would hang), and a directory of another user are
// refused.
func TestOnlyDirectoriesTheAgentMadeAreEntered(t *testing.T) {
	for _, tc := range []struct {
		name, at, write, why string
		plant                func(string) error
	}{
		{"a file as the volume directory", projectionDir, BundleFile, "not a directory",
			func(p string) error { return os.WriteFile(p, nil, 0o600) }},
		{"a FIFO as the bundle", projectionDir + "/" + BundleFile, BundleFile, "not a regular file",
			func(p string) error { return syscall.Mkfifo(p, 0o600) }},
		{"a directory as the bundle", projectionDir + "/" + BundleFile, BundleFile, "not a regular file",
			func(p string) error { return os.Mkdir(p, 0o700) }},
		{"another user's directory", projectionDir + "/tls", "tls/key.pem", "uid 4242",
			func(p string) error {
				if os.Geteuid() != 0 {
					t.Skip("needs root to give a directory to another user")
				}
				if err := os.Mkdir(p, 0o777); err != nil {
					return err
				}
				return os.Chown(p, 4242, 4242)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, dir := testFiles(t)
			plant(t, filepath.Join(dir, tc.at), tc.plant)
			before, _ := os.Lstat(filepath.Join(dir, tc.at))
			done := make(chan error, 1)
			go func() { done <- f.write(filepath.Join(projectionDir, tc.write), []byte("key")) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the write hangs")
			}
			var refused *refusedError
			if !errors.As(err, &refused) || refused.Path != tc.at || !strings.Contains(refused.Why, tc.why) {
				t.Errorf("%v, want %s refused: %s", err, tc.at, tc.why)
			}
			if after, _ := os.Lstat(filepath.Join(dir, tc.at)); after.Mode() != before.Mode() {
				t.Errorf("its mode changed: %v → %v", before.Mode(), after.Mode())
			}
		})
	}
}

// TestRemoveNeverFollowsALink: forgetting a pod whose directory is a link removes the
// link; a link above it is refused; nothing outside goes.
func TestRemoveNeverFollowsALink(t *testing.T) {
	f, dir := testFiles(t)
	out := newOutside(t)
	plant(t, filepath.Join(dir, "apps/web"), func(p string) error { return os.Symlink(out.dir, p) })
	if err := f.removeAll("apps/web"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "apps/web")); !os.IsNotExist(err) {
		t.Errorf("the link is still there: %v", err)
	}
	out.untouched(t)

	plant(t, filepath.Join(dir, "team"), func(p string) error { return os.Symlink(out.dir, p) })
	var refused *refusedError
	if err := f.removeAll("team/tls"); !errors.As(err, &refused) || refused.Path != "team" {
		t.Errorf("removing through a link: %v", err)
	}
	out.untouched(t)
	if err := f.removeAll("gone/web"); err != nil {
		t.Errorf("removing what is not there: %v", err)
	}
}

// TestReplacedRootIsOpenedAgain: --dir removed under a running agent (a host cleanup) is
// made again, not written to while unlinked.
func TestReplacedRootIsOpenedAgain(t *testing.T) {
	f, dir := testFiles(t)
	if err := f.write(filepath.Join(projectionDir, BundleFile), []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := f.write(filepath.Join(projectionDir, BundleFile), []byte("two")); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, projectionDir, BundleFile)); string(raw) != "two" {
		t.Errorf("after --dir was replaced: %q %v", raw, err)
	}
}

// TestRefusalIsReportedOncePerPodAndPath: a Warning event on the pod, not one per refresh.
func TestRefusalIsReportedOncePerPodAndPath(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	a := &Agent{recorder: rec, reported: map[types.NamespacedName]map[string]bool{}, uids: map[types.NamespacedName]types.UID{}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
	key := podcert.Key{Namespace: "apps", PodName: "web", VolumeName: "id"}
	refused := &refusedError{Path: projectionDir, Why: "it is a symbolic link, which the agent never follows"}
	for range 3 {
		a.refuse(t.Context(), pod, key, refused)
	}
	a.refuse(t.Context(), pod, key, &refusedError{Path: projectionDir + "/tls", Why: "it is not a directory"})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 2 || !strings.Contains(got[0], certificates.ReasonBundlePathRefused) || !strings.Contains(got[0], projectionDir) || !strings.Contains(got[0], "symbolic link") {
		t.Errorf("events %q, want one per refused path", got)
	}
}
