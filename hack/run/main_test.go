package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestUseLocalControlPlane is the decision behind `make run` run twice in one shell: the
// first run said `export KUBECONFIG=$PWD/.local/kubeconfig`, and the second must start
// the local control plane again rather than dial the one that stopped with the first.
func TestUseLocalControlPlane(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, ".local")
	other := filepath.Join(root, "other")
	for _, d := range []string{dir, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	own := filepath.Join(dir, "kubeconfig")
	foreign := filepath.Join(other, "kubeconfig")
	if err := os.WriteFile(foreign, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A symlink to the data directory, as a developer's checkout under a linked home has.
	linkedDir := filepath.Join(root, "linked")
	if err := os.Symlink(dir, linkedDir); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	sep := string(filepath.ListSeparator)

	for _, tc := range []struct {
		name, env                string
		wantLocal, wantSelfRefer bool
	}{
		{name: "unset", env: "", wantLocal: true},
		{name: "only separators", env: sep + sep, wantLocal: true},
		{name: "own kubeconfig", env: own, wantLocal: true, wantSelfRefer: true},
		{name: "own kubeconfig, relative", env: ".local/kubeconfig", wantLocal: true, wantSelfRefer: true},
		{name: "own kubeconfig, unclean", env: root + "//other/../.local/./kubeconfig", wantLocal: true, wantSelfRefer: true},
		{name: "own kubeconfig through a linked directory, not written yet", env: filepath.Join(linkedDir, "kubeconfig"), wantLocal: true, wantSelfRefer: true},
		{name: "own kubeconfig twice, with empty entries", env: sep + own + sep + sep + ".local/kubeconfig", wantLocal: true, wantSelfRefer: true},
		{name: "another cluster", env: foreign, wantLocal: false},
		{name: "own kubeconfig and another", env: own + sep + foreign, wantLocal: false},
		{name: "another and own kubeconfig", env: foreign + sep + own, wantLocal: false},
		{name: "a kubeconfig of the same name in another directory", env: filepath.Join(other, "kubeconfig"), wantLocal: false},
		{name: "the data directory itself", env: dir, wantLocal: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local, selfRefer := useLocalControlPlane(tc.env, dir)
			if local != tc.wantLocal || selfRefer != tc.wantSelfRefer {
				t.Errorf("useLocalControlPlane(%q) = local %v, self-reference %v; want %v, %v", tc.env, local, selfRefer, tc.wantLocal, tc.wantSelfRefer)
			}
		})
	}

	// Once written, a kubeconfig reached through a symlink to the file is the same file.
	if err := os.WriteFile(own, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	linkedFile := filepath.Join(root, "kubeconfig-link")
	if err := os.Symlink(own, linkedFile); err != nil {
		t.Fatal(err)
	}
	if local, selfRefer := useLocalControlPlane(linkedFile, dir); !local || !selfRefer {
		t.Errorf("a symlink to the own kubeconfig: local %v, self-reference %v", local, selfRefer)
	}
}

func TestPrefixWriter(t *testing.T) {
	var out bytes.Buffer
	w := newPrefixWriter(&out, "agent | ")
	for _, chunk := range []string{"one\ntw", "o\n", "", "three\nfour\n"} {
		if n, err := w.Write([]byte(chunk)); err != nil || n != len(chunk) {
			t.Fatalf("Write(%q) = %d, %v", chunk, n, err)
		}
	}
	want := "agent | one\nagent | two\nagent | three\nagent | four\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
