package nodeagent

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// files is --dir as the agent writes it. A pod may be able to write into its own bundle
// directory (a hostPath of it), and the agent runs as root, so nothing below --dir is
// trusted: every operation goes through an os.Root (openat with O_NOFOLLOW underneath),
// which no path or link can leave, and every directory is checked before it is entered.
// A symbolic link, anything but a directory, or a directory someone else made is refused
// (a *refusedError), never followed, so the agent changes modes and owners only of what
// it made and writes only inside its tree.
type files struct {
	dir      string
	fileMode os.FileMode
	dirMode  os.FileMode
	gid      int // -1: the agent's own group, left alone
	uid      int // the agent's: the owner of every directory it made
	// writeTemp writes content into the new temporary file for rel; tests replace it to
	// fail as a full disk does (a short write, then ENOSPC).
	writeTemp func(tmp *os.File, rel string, content []byte) error

	mu   sync.Mutex
	root *os.Root
}

// refusedError is a path below --dir that the agent does not write through, and why. It
// stays refused until whoever put something there removes it.
type refusedError struct {
	Path, Why string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("refusing %s: %s", e.Path, e.Why)
}

const whySymlink = "it is a symbolic link, which the agent never follows"

// dirModeFor is the directory mode matching a file mode: its read bits become search bits
// too (0640 files → 0750 directories), so whoever may read a file may reach it.
func dirModeFor(fileMode os.FileMode) os.FileMode {
	return 0o700 | fileMode&0o044 | (fileMode&0o044)>>2 | fileMode&0o011
}

func newFiles(dir string, fileMode os.FileMode, gid int) *files {
	return &files{dir: dir, fileMode: fileMode, dirMode: dirModeFor(fileMode), gid: gid, uid: os.Geteuid(), writeTemp: writeAll}
}

// writeAll is files.writeTemp outside tests.
func writeAll(tmp *os.File, _ string, content []byte) error {
	_, err := tmp.Write(content)
	return err
}

// current is the root, opened again when --dir was removed or replaced since (a host
// cleanup, say): an open root would otherwise write into a directory no one sees.
func (f *files) current() (*os.Root, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.root != nil {
		onDisk, errDisk := os.Stat(f.dir)
		held, errHeld := f.root.Stat(".")
		if errDisk == nil && errHeld == nil && os.SameFile(onDisk, held) {
			return f.root, nil
		}
		_ = f.root.Close() // a directory no longer at --dir
		f.root = nil
	}
	// The root is the operator's (a hostPath, say): made when missing, never re-owned.
	if err := os.MkdirAll(f.dir, f.dirMode); err != nil {
		return nil, fmt.Errorf("creating --dir: %w", err)
	}
	root, err := os.OpenRoot(f.dir)
	if err != nil {
		return nil, fmt.Errorf("opening --dir: %w", err)
	}
	f.root = root
	return root, nil
}

// fileContent is what one file below --dir (rel, a local path) is to hold.
type fileContent struct {
	rel     string
	content []byte
}

// write makes rel (a local path below --dir) hold content, atomically, with the bundle
// mode and group, making its directories. An identical file is left alone (no rename,
// so watchers see no change).
func (f *files) write(rel string, content []byte) error {
	return f.writeSet([]fileContent{{rel, content}})
}

// writeSet makes each file of set hold its content, as write does, and replaces them
// together or not at all: every changed content is first written in full to a new file
// beside its name (the step a full disk or a failing device fails), and only once all
// are written are they renamed into place, in order. So a failed write leaves each file
// as it was and no temporary file behind, never keyPath with a new key beside
// certificateChainPath with the old chain until space frees. (A reader may still see
// the renames one by one, a window of microseconds: each file is atomic, not the set.)
func (f *files) writeSet(set []fileContent) error {
	root, err := f.current()
	if err != nil {
		return err
	}
	var pending []*stagedFile
	defer func() {
		for _, s := range pending {
			s.discard()
		}
	}()
	for _, c := range set {
		s, err := f.stage(root, c.rel, c.content)
		if err != nil {
			return err
		}
		if s != nil {
			pending = append(pending, s)
		}
	}
	for _, s := range pending {
		if err := s.dir.Rename(s.tmp, s.name); err != nil {
			return fmt.Errorf("writing %s: %w", s.rel, err)
		}
	}
	for _, s := range pending {
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("writing %s: %w", s.rel, err)
		}
	}
	return nil
}

// replaceSet writes set as writeSet does, then removes, from the directory dirRel, every
// entry whose name stale says may go and that set did not just write (a trust bundle of a
// trust domain no longer configured): removed only once the set is in place, each
// without following it (a link is removed as a link, never its target). A directory of
// that name is refused, not emptied. A nil stale removes nothing.
func (f *files) replaceSet(dirRel string, set []fileContent, stale func(name string) bool) error {
	if err := f.writeSet(set); err != nil {
		return err
	}
	if stale == nil {
		return nil
	}
	written := map[string]bool{}
	for _, c := range set {
		if filepath.Dir(filepath.Clean(c.rel)) == filepath.Clean(dirRel) {
			written[filepath.Base(c.rel)] = true
		}
	}
	root, err := f.current()
	if err != nil {
		return err
	}
	dir, err := f.enterAll(root, dirRel, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	h, err := dir.Open(".")
	if err != nil {
		return fmt.Errorf("reading %s: %w", dirRel, err)
	}
	entries, err := h.ReadDir(-1)
	_ = h.Close()
	if err != nil {
		return fmt.Errorf("reading %s: %w", dirRel, err)
	}
	removed := false
	for _, e := range entries {
		if !stale(e.Name()) || written[e.Name()] {
			continue
		}
		rel := filepath.Join(dirRel, e.Name())
		if e.IsDir() {
			return &refusedError{Path: rel, Why: "it is a directory where the agent removes a stale file"}
		}
		if err := dir.Remove(e.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", rel, err)
		}
		removed = true
	}
	if removed {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("removing from %s: %w", dirRel, err)
		}
	}
	return nil
}

// stagedFile is new content written in full to tmp in dir, to be renamed over name.
type stagedFile struct {
	dir            *os.Root
	rel, name, tmp string
}

// discard removes the temporary file (a no-op once renamed) and closes its directory.
func (s *stagedFile) discard() {
	_ = s.dir.Remove(s.tmp)
	_ = s.dir.Close()
}

// stage writes content for rel to a new file beside it, making its directories; nil
// when rel already holds content.
func (f *files) stage(root *os.Root, rel string, content []byte) (*stagedFile, error) {
	dirRel, name := filepath.Split(rel)
	dir, err := f.enterAll(root, dirRel, true)
	if err != nil {
		return nil, err
	}
	same, err := f.holds(dir, rel, name, content)
	if err != nil || same {
		_ = dir.Close()
		return nil, err
	}
	tmp, err := f.writeTempFile(dir, rel, name, content)
	if err != nil {
		_ = dir.Close()
		return nil, err
	}
	return &stagedFile{dir: dir, rel: rel, name: name, tmp: tmp}, nil
}

// removeAll removes rel and everything below it; what is missing is no error. A link on
// the way is refused; rel itself, a link or not, is removed without being followed.
func (f *files) removeAll(rel string) error {
	root, err := f.current()
	if err != nil {
		return err
	}
	dirRel, name := filepath.Split(rel)
	dir, err := f.enterAll(root, dirRel, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.RemoveAll(name)
}

// enterAll opens the directory rel below root one component at a time, each made
// (when create) and checked by enter. The caller closes what it returns.
func (f *files) enterAll(root *os.Root, rel string, create bool) (*os.Root, error) {
	dir, err := root.OpenRoot(".")
	if err != nil {
		return nil, err
	}
	path := ""
	for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		if part == "." {
			continue
		}
		path = filepath.Join(path, part)
		next, err := f.enter(dir, path, part, create)
		_ = dir.Close() // read-only handle
		if err != nil {
			return nil, err
		}
		dir = next
	}
	return dir, nil
}

// enter opens the directory name of parent (at path below --dir): made when missing and
// create, refused when it is a link, not a directory, or not the agent's, and given the
// bundle group and directory mode.
func (f *files) enter(parent *os.Root, path, name string, create bool) (*os.Root, error) {
	if create {
		if err := parent.Mkdir(name, f.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("creating %s: %w", path, err)
		}
	}
	checked, err := parent.Lstat(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if why := f.notOurDirectory(checked); why != "" {
		return nil, &refusedError{Path: path, Why: why}
	}
	dir, err := parent.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := f.ownDirectory(dir, path, checked); err != nil {
		_ = dir.Close()
		return nil, err
	}
	return dir, nil
}

// notOurDirectory says why info is not a directory the agent made, or "".
func (f *files) notOurDirectory(info fs.FileInfo) string {
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return whySymlink
	case !info.IsDir():
		return "it is not a directory"
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != f.uid {
		return fmt.Sprintf("it is a directory of uid %d, not one the agent made", st.Uid)
	}
	return ""
}

// ownDirectory gives the opened directory dir the bundle group and directory mode, when
// they differ, through its own descriptor: no path resolution stands between the check
// and the change. checked is what Lstat saw before it was opened: a directory swapped in
// between is refused.
func (f *files) ownDirectory(dir *os.Root, path string, checked fs.FileInfo) error {
	h, err := dir.Open(".")
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer h.Close()
	info, err := h.Stat()
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if !os.SameFile(info, checked) {
		return &refusedError{Path: path, Why: "it was replaced while being checked"}
	}
	if err := f.own(h, info, f.dirMode); err != nil {
		return fmt.Errorf("setting the group and mode of %s: %w", path, err)
	}
	return nil
}

// own gives the open file h the bundle group and mode, when they differ (no umask in
// the way). Through the descriptor: nothing a path could redirect.
func (f *files) own(h *os.File, info fs.FileInfo, mode os.FileMode) error {
	if !f.hasGroup(info) {
		if err := h.Chown(-1, f.gid); err != nil {
			return err
		}
	}
	if info.Mode().Perm() != mode {
		return h.Chmod(mode)
	}
	return nil
}

// owned says whether info has mode and the bundle group.
func (f *files) owned(info fs.FileInfo, mode os.FileMode) bool {
	return info.Mode().Perm() == mode && f.hasGroup(info)
}

func (f *files) hasGroup(info fs.FileInfo) bool {
	if f.gid < 0 {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Gid) == f.gid
}

// holds says whether name in dir is a regular file with exactly content, the bundle mode
// and group (another mode or group, after the flags changed, is written anew). Anything
// but a regular file there (a link, a directory, a FIFO) is refused; it is never opened.
func (f *files) holds(dir *os.Root, rel, name string, content []byte) (bool, error) {
	info, err := dir.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		return false, &refusedError{Path: rel, Why: whySymlink}
	case !info.Mode().IsRegular():
		return false, &refusedError{Path: rel, Why: "it is not a regular file (" + info.Mode().Type().String() + ")"}
	}
	// O_NONBLOCK: a FIFO swapped in after the Lstat must not hang the agent.
	h, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, err
	}
	defer h.Close()
	if opened, err := h.Stat(); err != nil || !os.SameFile(info, opened) || !f.owned(opened, f.fileMode) {
		return false, nil // replaced meanwhile, or another mode or group: write it anew
	}
	old, err := io.ReadAll(io.LimitReader(h, int64(len(content))+1))
	return err == nil && bytes.Equal(old, content), nil
}

// writeTempFile writes content to a new file beside name, with the bundle group and
// mode, synced, and returns its name; on a failure nothing of it stays. No existing file
// is ever opened for writing (a hard link to a file elsewhere stays as it is).
func (f *files) writeTempFile(dir *os.Root, rel, name string, content []byte) (string, error) {
	tmpName := "." + name + ".tmp-" + rand.Text()
	// O_EXCL: never follows a link, never opens an existing file.
	tmp, err := dir.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.fileMode)
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", rel, err)
	}
	err = f.fill(tmp, rel, content)
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		_ = dir.Remove(tmpName)
		return "", fmt.Errorf("writing %s: %w", rel, err)
	}
	return tmpName, nil
}

// fill writes content to the new file tmp, gives it the bundle group and mode, and syncs it.
func (f *files) fill(tmp *os.File, rel string, content []byte) error {
	if err := f.writeTemp(tmp, rel, content); err != nil {
		return err
	}
	info, err := tmp.Stat()
	if err != nil {
		return err
	}
	if err := f.own(tmp, info, f.fileMode); err != nil {
		return err
	}
	return tmp.Sync()
}

// syncDir makes the renames in dir durable.
func syncDir(dir *os.Root) error {
	h, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer h.Close()
	return h.Sync()
}
