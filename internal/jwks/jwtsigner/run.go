// Package jwtsigner is `trustplane jwt-signer`: kube-apiserver's external service account
// token signer (KEP-740, the k8s.io/externaljwt v1 gRPC API: Sign, FetchKeys, Metadata)
// on a unix socket, the one kube-apiserver's --service-account-signing-endpoint names,
// serving one JWKSConfig's keys. kube-apiserver then signs service account tokens with
// the JWKSConfig's signing key and verifies them with its published set, so the tokens
// verify wherever the set is published, and rotate as it rotates: publish first, sign
// later.
//
// What it serves:
//   - Sign: a JWS with the header {"alg","kid","typ":"JWT"} signed with tls.key of
//     spec.signingSecret when it is set, else of spec.certificateSecret; only when that
//     key's kid (the RFC 7638 thumbprint) is in the published set. A key that is not
//     published, a missing Secret or a missing set answers FailedPrecondition, which
//     kube-apiserver reports to the TokenRequest's caller: never a token.
//   - FetchKeys: every key of the published set (the JWKSConfig's ConfigMap, jwks.json),
//     retired keys within their TTL included, as PKIX DER; the data timestamp is the
//     JWKSConfig's status.lastUpdateTime, the refresh hint its spec.cacheMaxAge.
//   - Metadata: --max-token-expiration.
//
// What kube-apiserver v1.37 accepts, checked against its client
// (pkg/serviceaccount/externaljwt/plugin): RS256, ES256, ES384 and ES512 only (so no
// Ed25519/EdDSA, PS* or RS384/RS512 key: its /openid/v1/jwks would publish an RSA key as
// RS256 and fails as a whole on an Ed25519 one), a kid of 1 to 1024 bytes, typ JWT and no
// other header field, a positive refresh hint, at least one key, and at least 10 minutes
// of token lifetime in Metadata. The signer refuses to start, with one line naming the
// key, when the first keys it would serve hold a key kube-apiserver cannot use; one that
// arrives later is answered with FailedPrecondition.
//
// It reads the JWKSConfig, the ConfigMap and the Secret through a cache of the
// JWKSConfig's namespace (a watch: a rotation is served as soon as the cache sees it) and
// needs get, list and watch on jwksconfigs, configmaps and secrets there (rbac.go).
//
// # Bootstrap
//
// kube-apiserver fetches the keys before it serves, and gives up when the signer has not
// answered within a minute; a signer that reads its JWKSConfig from that same API server
// cannot answer from the cluster then. So, with --state-dir, the signer keeps what it last
// served from the cluster (the set, the signing key, the data timestamp) in
// <state-dir>/state.json (mode 0600, replaced atomically, written at every change it
// serves), and at start serves that until the cluster's view is complete: the JWKSConfig,
// its published set and its signing key all read. A restart therefore serves the same
// keys. While it serves from the state dir the refresh hint is 10 seconds, so
// kube-apiserver takes the cluster's set soon after the signer does. The socket is
// opened only once there is something to serve, so kube-apiserver (which waits for the
// socket) never fetches an empty answer.
//
// A brand-new control plane has no state and no JWKSConfig yet. It is seeded with the
// key it will keep: put the certificate and key that the JWKSConfig's certificate Secret
// will hold in the state dir as tls.crt and tls.key. The signer serves the set of that one
// key and signs with it. Once the API server is up, create the Secret from the same files
// (`kubectl create secret tls <certificateSecret> --cert tls.crt --key tls.key`) and the
// JWKSConfig (with or without spec.signingSecret); when the manager has published the set,
// the signer serves the cluster's view and writes state.json, which from then on wins over
// the seed. The seed is thus nothing but the first certificate Secret, written before the
// cluster exists; no key is invented, and no token is signed with a key the cluster will
// not publish (as long as the Secret is created from the same files).
//
// Without --state-dir nothing is served, and the socket is not opened, until the signer
// has read the cluster: right for a signer that reads another cluster than the
// kube-apiserver it serves.
package jwtsigner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Run serves until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	key, err := opts.Key()
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("jwt-signer")
	// The socket path is checked first: a file that is not a socket stops the signer
	// before it connects anywhere.
	if err := checkSocket(opts.Socket); err != nil {
		return err
	}
	var initial *Snapshot
	if opts.StateDir != "" {
		if initial, err = LoadState(opts.StateDir, key.String(), time.Now()); err != nil {
			return err
		}
		if initial != nil {
			log.Info("serving the state dir's keys until the cluster's view is complete", "from", initial.From, "signingKid", initial.KeyID, "kids", keyIDs(initial))
		}
	}
	src, err := NewSource(cfg, key, opts.StateDir, initial, log)
	if err != nil {
		return err
	}
	var serving atomic.Bool
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return src.Run(ctx) })
	g.Go(func() error {
		select {
		case <-ctx.Done():
			return nil
		case <-src.Ready():
		}
		l, err := Listen(opts.Socket)
		if err != nil {
			return err
		}
		server := NewGRPCServer(NewServer(src.Current, opts.MaxTokenExpiration))
		go func() {
			<-ctx.Done()
			server.GracefulStop()
		}()
		log.Info("serving kube-apiserver's external JWT signer API", "socket", opts.Socket)
		serving.Store(true)
		return server.Serve(l)
	})
	if opts.HealthProbeBindAddress != "0" && opts.HealthProbeBindAddress != "" {
		g.Go(func() error { return serveProbes(ctx, opts.HealthProbeBindAddress, serving.Load) })
	}
	return g.Wait()
}

// checkSocket refuses a --socket path that holds anything but a socket.
func checkSocket(path string) error {
	l, err := Listen(path)
	if err != nil {
		return err
	}
	return l.Close() // removes the socket file again
}

// serveProbes answers /healthz always and /readyz once the socket serves.
func serveProbes(ctx context.Context, addr string, ready func() bool) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "not serving the socket yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("--health-probe-bind-address %s: %w", addr, err)
	}
	return nil
}
