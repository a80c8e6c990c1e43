package jwtsigner

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	externaljwtv1 "k8s.io/externaljwt/apis/v1"

	"github.com/trustplane/trustplane/internal/jwks/jwkset"
	"github.com/trustplane/trustplane/internal/testcerts"
)

func newChain(t *testing.T, kt testcerts.KeyType) testcerts.Chain {
	t.Helper()
	key, err := testcerts.NewKey(kt)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := testcerts.NewChain(key, "issuer.example", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

// setOf is the JWK Set trustplane publishes for the chains, first one current.
func setOf(t *testing.T, alg string, chains ...testcerts.Chain) []byte {
	t.Helper()
	var keys []jwkset.PublishedKey
	for i, c := range chains {
		k, err := jwkset.ParseChain(c.PEM(), alg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		pk := jwkset.PublishedKey{Key: k}
		if i > 0 {
			retired := time.Now().Add(-time.Minute)
			pk.RetiredAt = &retired
		}
		keys = append(keys, pk)
	}
	set, err := jwkset.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func kidOf(t *testing.T, c testcerts.Chain) string {
	t.Helper()
	kid, err := jwkset.KeyIDOf(c.PEM())
	if err != nil {
		t.Fatal(err)
	}
	return kid
}

// serve serves current on a real unix socket and returns a client of it, as
// kube-apiserver dials it.
func serve(t *testing.T, current func() *Snapshot) externaljwtv1.ExternalJWTSignerClient {
	t.Helper()
	path := filepath.Join(t.TempDir(), "signer.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGRPCServer(NewServer(current, 2*time.Hour))
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return dial(t, path)
}

func dial(t *testing.T, path string) externaljwtv1.ExternalJWTSignerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return externaljwtv1.NewExternalJWTSignerClient(conn)
}

// token asks the signer to sign claims and assembles the token as kube-apiserver does:
// header.claims.signature.
func token(t *testing.T, c externaljwtv1.ExternalJWTSignerClient, claims map[string]any) (string, error) {
	t.Helper()
	raw, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	payload := base64.RawURLEncoding.EncodeToString(raw)
	resp, err := c.Sign(context.Background(), &externaljwtv1.SignJWTRequest{Claims: payload})
	if err != nil {
		return "", err
	}
	return resp.GetHeader() + "." + payload + "." + resp.GetSignature(), nil
}

// checkHeader decodes the header as kube-apiserver does (unknown fields refused) and
// checks what it checks.
func checkHeader(t *testing.T, tok, wantKid, wantAlg string) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}
	if err := dec.Decode(&h); err != nil {
		t.Fatalf("header %s: %v", raw, err)
	}
	if h.Typ != "JWT" || h.Kid != wantKid || h.Alg != wantAlg {
		t.Errorf("header %s, want typ JWT, kid %s, alg %s", raw, wantKid, wantAlg)
	}
}

// TestSignedTokensVerifyWithFetchedKeys: for every key type kube-apiserver takes, a
// token assembled from Sign verifies (go-jose) with the key FetchKeys answers for its
// kid; FetchKeys answers the retired key too, with the set's timestamp and hint.
func TestSignedTokensVerifyWithFetchedKeys(t *testing.T) {
	for _, kt := range []testcerts.KeyType{testcerts.RSA2048, testcerts.P256, testcerts.P384, testcerts.P521} {
		t.Run(string(kt), func(t *testing.T) {
			current, retired := newChain(t, kt), newChain(t, testcerts.P256)
			stamp := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
			snap := Build(Input{From: "test", Set: setOf(t, "", current, retired), SigningKey: current.KeyPEM(), DataTimestamp: stamp, RefreshHint: 90 * time.Second})
			if !snap.Serves() {
				t.Fatalf("snapshot does not serve: %v / %v", snap.KeysErr, snap.SignErr)
			}
			c := serve(t, func() *Snapshot { return snap })

			meta, err := c.Metadata(context.Background(), &externaljwtv1.MetadataRequest{})
			if err != nil || meta.GetMaxTokenExpirationSeconds() != 7200 {
				t.Fatalf("Metadata = %v, %v; want 7200 s", meta, err)
			}
			keys, err := c.FetchKeys(context.Background(), &externaljwtv1.FetchKeysRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if keys.GetRefreshHintSeconds() != 90 || !keys.GetDataTimestamp().AsTime().Equal(stamp) || len(keys.GetKeys()) != 2 {
				t.Fatalf("FetchKeys = %d keys, hint %d, timestamp %v", len(keys.GetKeys()), keys.GetRefreshHintSeconds(), keys.GetDataTimestamp().AsTime())
			}
			byKid := map[string]crypto.PublicKey{}
			for _, k := range keys.GetKeys() {
				pub, err := x509.ParsePKIXPublicKey(k.GetKey())
				if err != nil {
					t.Fatalf("key %s is not PKIX: %v", k.GetKeyId(), err)
				}
				if k.GetExcludeFromOidcDiscovery() {
					t.Errorf("key %s excluded from discovery", k.GetKeyId())
				}
				byKid[k.GetKeyId()] = pub
			}
			if byKid[kidOf(t, current)] == nil || byKid[kidOf(t, retired)] == nil {
				t.Fatalf("FetchKeys kids %v, want the current %s and the retired %s", keyIDs(snap), kidOf(t, current), kidOf(t, retired))
			}

			tok, err := token(t, c, map[string]any{"iss": "https://issuer.example", "sub": "system:serviceaccount:a:b", "exp": time.Now().Add(time.Hour).Unix()})
			if err != nil {
				t.Fatal(err)
			}
			alg := snap.Algorithm
			checkHeader(t, tok, kidOf(t, current), alg)
			jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
			if err != nil {
				t.Fatal(err)
			}
			payload, err := jws.Verify(byKid[jws.Signatures[0].Header.KeyID])
			if err != nil {
				t.Fatalf("token does not verify with the fetched key: %v", err)
			}
			if !strings.Contains(string(payload), "system:serviceaccount:a:b") {
				t.Errorf("payload %s", payload)
			}
			if _, err := jws.Verify(byKid[kidOf(t, retired)]); err == nil {
				t.Error("token verifies with the retired key too")
			}
		})
	}
}

// TestSignRefusesAKeyNotPublished: a signing key whose kid is not in the set gets
// FailedPrecondition with a message, never a signature; FetchKeys still answers the set.
func TestSignRefusesAKeyNotPublished(t *testing.T) {
	published, unpublished := newChain(t, testcerts.P256), newChain(t, testcerts.P256)
	snap := Build(Input{From: "test", Set: setOf(t, "", published), SigningKey: unpublished.KeyPEM(), DataTimestamp: time.Now(), RefreshHint: time.Minute})
	if snap.Unusable() != nil {
		t.Fatalf("a key not yet published is no unusable key: %v", snap.Unusable())
	}
	c := serve(t, func() *Snapshot { return snap })
	resp, err := c.Sign(context.Background(), &externaljwtv1.SignJWTRequest{Claims: base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"x"}`))})
	if status.Code(err) != codes.FailedPrecondition || resp != nil {
		t.Fatalf("Sign = %v, %v; want FailedPrecondition", resp, err)
	}
	if !strings.Contains(err.Error(), kidOf(t, unpublished)) || !strings.Contains(err.Error(), "not in the published set") {
		t.Errorf("message %q does not name the key and the reason", err)
	}
	t.Logf("Sign: %v", err)
	keys, err := c.FetchKeys(context.Background(), &externaljwtv1.FetchKeysRequest{})
	if err != nil || len(keys.GetKeys()) != 1 || keys.GetKeys()[0].GetKeyId() != kidOf(t, published) {
		t.Fatalf("FetchKeys = %v, %v", keys, err)
	}
	// Nothing read yet: Unavailable, not an empty answer.
	empty := serve(t, func() *Snapshot { return nil })
	if _, err := empty.FetchKeys(context.Background(), &externaljwtv1.FetchKeysRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("FetchKeys with nothing read = %v, want Unavailable", err)
	}
	// Claims that are not unpadded base64url are refused.
	good := Build(Input{From: "test", Set: setOf(t, "", published), SigningKey: published.KeyPEM(), DataTimestamp: time.Now(), RefreshHint: time.Minute})
	c = serve(t, func() *Snapshot { return good })
	if _, err := c.Sign(context.Background(), &externaljwtv1.SignJWTRequest{Claims: "eyJ9=="}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Sign with padded claims = %v, want InvalidArgument", err)
	}
}

// TestRefusesKeysKubeAPIServerCannotUse: Ed25519 (EdDSA), PS256, RS512 and an
// RSA signing key published as PS256 are unusable, named in one line.
func TestRefusesKeysKubeAPIServerCannotUse(t *testing.T) {
	ed, rsaChain, p256 := newChain(t, testcerts.Ed25519), newChain(t, testcerts.RSA2048), newChain(t, testcerts.P256)
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{"Ed25519 signing key", Input{Set: setOf(t, "", ed), SigningKey: ed.KeyPEM()}, "Ed25519"},
		{"Ed25519 retired key in the set", Input{Set: setOf(t, "", p256, ed), SigningKey: p256.KeyPEM()}, "Ed25519"},
		{"PS256", Input{Set: setOf(t, "PS256", rsaChain), SigningKey: rsaChain.KeyPEM()}, "PS256"},
		{"RS512", Input{Set: setOf(t, "RS512", rsaChain), SigningKey: rsaChain.KeyPEM()}, "RS512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.RefreshHint = time.Minute
			err := Build(tc.in).Unusable()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Unusable() = %v, want one line naming %s", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}
	// The same refusal at start, from a seed.
	dir := t.TempDir()
	writeSeed(t, dir, ed)
	if _, err := LoadState(dir, "ns/name", time.Now()); err == nil || !strings.Contains(err.Error(), "Ed25519") {
		t.Errorf("LoadState of an Ed25519 seed = %v, want a refusal naming Ed25519", err)
	}
}

func writeSeed(t *testing.T, dir string, c testcerts.Chain) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, SeedCertificate), c.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SeedKey), c.KeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestListenReplacesOnlyAStaleSocket: a regular file is refused, a live socket is
// refused, the socket an earlier run left is replaced.
func TestListenReplacesOnlyAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a regular file = %v", err)
	}
	if _, err := Listen(dir); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen on a directory = %v", err)
	}
	sock := filepath.Join(dir, "sock")
	live, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(sock); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("Listen on a live socket = %v", err)
	}
	// An earlier run killed: its socket file stays, nobody accepts.
	live.(interface{ SetUnlinkOnClose(bool) }).SetUnlinkOnClose(false)
	_ = live.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatal(err)
	}
	again, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen on a stale socket: %v", err)
	}
	_ = again.Close()
}

// TestStateRoundTrip: the state is written 0600 and read back as the same keys; the
// state of another JWKSConfig is refused.
func TestStateRoundTrip(t *testing.T) {
	current, retired := newChain(t, testcerts.P384), newChain(t, testcerts.RSA2048)
	snap := Build(Input{From: "test", Set: setOf(t, "", current, retired), SigningKey: current.KeyPEM(), DataTimestamp: time.Now(), RefreshHint: time.Hour})
	dir := t.TempDir()
	if err := SaveState(dir, "ns/a", snap); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, StateFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, %v", info, err)
	}
	back, err := LoadState(dir, "ns/a", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if back.KeyID != snap.KeyID || strings.Join(keyIDs(back), ",") != strings.Join(keyIDs(snap), ",") || !back.DataTimestamp.Equal(snap.DataTimestamp.UTC()) {
		t.Errorf("state read back as %s %v, want %s %v", back.KeyID, keyIDs(back), snap.KeyID, keyIDs(snap))
	}
	if back.RefreshHint != startupRefreshHint {
		t.Errorf("refresh hint from state %v, want %v", back.RefreshHint, startupRefreshHint)
	}
	if _, err := LoadState(dir, "ns/b", time.Now()); err == nil || !strings.Contains(err.Error(), "not of --jwksconfig ns/b") {
		t.Errorf("LoadState for another JWKSConfig = %v", err)
	}
	if none, err := LoadState(t.TempDir(), "ns/a", time.Now()); none != nil || err != nil {
		t.Errorf("LoadState of an empty dir = %v, %v", none, err)
	}
}

func TestValidate(t *testing.T) {
	ok := DefaultOptions()
	ok.Socket, ok.JWKSConfig = "/run/s.sock", "kube-system/sa"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mutate func(*Options)
		flag   string
	}{
		{func(o *Options) { o.Socket = "" }, "--socket"},
		{func(o *Options) { o.JWKSConfig = "sa" }, "--jwksconfig"},
		{func(o *Options) { o.JWKSConfig = "Kube/sa" }, "--jwksconfig"},
		{func(o *Options) { o.MaxTokenExpiration = 5 * time.Minute }, "--max-token-expiration"},
		{func(o *Options) { o.MaxTokenExpiration = 90*time.Minute + time.Millisecond }, "--max-token-expiration"},
	} {
		o := ok
		tc.mutate(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.flag)
		}
	}
}
