package jwtsigner

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	externaljwtv1 "k8s.io/externaljwt/apis/v1"

	"github.com/trustplane/trustplane/internal/testcerts"
)

// unreachable is an API server that does not answer: a port nothing listens on.
func unreachable(t *testing.T) *rest.Config {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return &rest.Config{Host: "https://" + addr, Timeout: time.Second}
}

// TestServesTheSeedWhileTheAPIServerIsDown: a new control plane's signer, seeded with
// tls.crt and tls.key and no API server to read, opens its socket and serves the seed's
// key (FetchKeys, and Sign with it): what kube-apiserver needs to start.
func TestServesTheSeedWhileTheAPIServerIsDown(t *testing.T) {
	seed := newChain(t, testcerts.P256)
	dir := t.TempDir()
	writeSeed(t, dir, seed)
	opts := DefaultOptions()
	opts.Socket, opts.JWKSConfig, opts.StateDir = filepath.Join(t.TempDir(), "signer.sock"), "kube-system/sa", dir
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, unreachable(t), opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitSocket(t, opts.Socket, done)
	c := dial(t, opts.Socket)
	keys, err := c.FetchKeys(context.Background(), &externaljwtv1.FetchKeysRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys.GetKeys()) != 1 || keys.GetKeys()[0].GetKeyId() != kidOf(t, seed) || keys.GetRefreshHintSeconds() != int64(startupRefreshHint/time.Second) {
		t.Fatalf("FetchKeys from the seed = %v", keys)
	}
	tok, err := token(t, c, map[string]any{"sub": "system:serviceaccount:kube-system:x"})
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, tok, kidOf(t, seed), "ES256")
	// Nothing read from the cluster: no state.json is written over the seed's.
	if _, err := os.Stat(filepath.Join(dir, StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.json written without the cluster: %v", err)
	}
}

// TestRefusesAtStart: a --socket that is a regular file, and an Ed25519 seed, stop Run
// at once with one line naming them.
func TestRefusesAtStart(t *testing.T) {
	opts := DefaultOptions()
	opts.JWKSConfig = "kube-system/sa"
	opts.Socket = filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(opts.Socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), unreachable(t), opts)
	if err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("Run with a regular file as --socket = %v", err)
	}
	opts.Socket = filepath.Join(t.TempDir(), "signer.sock")
	opts.StateDir = t.TempDir()
	writeSeed(t, opts.StateDir, newChain(t, testcerts.Ed25519))
	err = Run(context.Background(), unreachable(t), opts)
	if err == nil || !strings.Contains(err.Error(), "Ed25519") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Run with an Ed25519 seed = %v", err)
	}
	t.Logf("%v", err)
}

func waitSocket(t *testing.T, path string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if info, err := os.Lstat(path); err == nil && info.Mode().Type() == os.ModeSocket {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended before serving: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the socket did not appear within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
