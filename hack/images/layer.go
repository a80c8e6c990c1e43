package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file, directory or symbolic link of an image's root file system.
type entry struct {
	// path in the image, absolute.
	path string
	mode int64
	// Exactly one of these, or none for a directory.
	data   []byte // the file's content
	source string // a file on this machine to copy
	link   string // a symbolic link's target
	// uid and gid own the entry (root unless set).
	uid, gid int
}

func dir(p string, mode int64) entry            { return entry{path: p, mode: mode} }
func file(p string, data string) entry          { return entry{path: p, mode: 0o644, data: []byte(data)} }
func copied(p, source string, mode int64) entry { return entry{path: p, mode: mode, source: source} }
func symlink(p, target string) entry            { return entry{path: p, mode: 0o777, link: target} }

func (e entry) isDir() bool { return e.data == nil && e.source == "" && e.link == "" }

// layer is one OCI layer holding entries, with their parent directories, in name order,
// every time stamp set to modTime and every owner numeric: the same entries give the same
// digest on any machine and at any time.
func layer(entries []entry, modTime time.Time) (v1.Layer, error) {
	data, err := tarOf(withParents(entries), modTime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// withParents adds the directories entries sit in that are not listed (mode 0755), and
// sorts the result by path.
func withParents(entries []entry) []entry {
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.path] = true
	}
	all := append([]entry(nil), entries...)
	for _, e := range entries {
		for p := path.Dir(e.path); p != "/" && !seen[p]; p = path.Dir(p) {
			seen[p] = true
			all = append(all, dir(p, 0o755))
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].path < all[j].path })
	return all
}

func tarOf(entries []entry, modTime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: strings.TrimPrefix(e.path, "/"), Mode: e.mode, ModTime: modTime,
			Uid: e.uid, Gid: e.gid, Format: tar.FormatPAX,
		}
		content := e.data
		switch {
		case e.link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		case e.isDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		default:
			if e.source != "" {
				var err error
				if content, err = os.ReadFile(e.source); err != nil {
					return nil, fmt.Errorf("adding %s to the image: %w", e.path, err)
				}
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(content))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// users is /etc/passwd and /etc/group naming root and the one unprivileged user an image
// runs as, so that tools inside see a name for its uid.
func users(name string, id int) []entry {
	return []entry{
		file("/etc/passwd", fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/nonexistent:/sbin/nologin\n", name, id, id, name)),
		file("/etc/group", fmt.Sprintf("root:x:0:\n%s:x:%d:\n", name, id)),
	}
}
