package jwtsigner

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	externaljwtv1 "k8s.io/externaljwt/apis/v1"
)

// Server answers kube-apiserver's ExternalJWTSigner calls from the current snapshot.
type Server struct {
	externaljwtv1.UnimplementedExternalJWTSignerServer

	current            func() *Snapshot
	maxTokenExpiration time.Duration
}

// NewServer serves what current returns at each call; current returns nil while there
// is nothing to serve.
func NewServer(current func() *Snapshot, maxTokenExpiration time.Duration) *Server {
	return &Server{current: current, maxTokenExpiration: maxTokenExpiration}
}

// Sign signs the claims kube-apiserver sends (base64url, unpadded) with the published
// signing key: the header is {"alg","kid","typ":"JWT"}, nothing more, as kube-apiserver
// decodes it with unknown fields disallowed.
func (s *Server) Sign(_ context.Context, req *externaljwtv1.SignJWTRequest) (*externaljwtv1.SignJWTResponse, error) {
	snap := s.current()
	if snap == nil {
		return nil, status.Error(codes.Unavailable, "trustplane jwt-signer has read no signing key yet")
	}
	if snap.SignErr != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "trustplane jwt-signer (%s) does not sign: %v", snap.From, snap.SignErr)
	}
	payload, err := base64.RawURLEncoding.DecodeString(req.GetClaims())
	if err != nil || len(payload) == 0 || base64.RawURLEncoding.EncodeToString(payload) != req.GetClaims() {
		return nil, status.Error(codes.InvalidArgument, "claims must be a non-empty JSON object in unpadded base64url")
	}
	jws, err := snap.signer.Sign(payload)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "signing with key %s: %v", snap.KeyID, err)
	}
	compact, err := jws.CompactSerialize()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "signing with key %s: %v", snap.KeyID, err)
	}
	parts := strings.Split(compact, ".")
	if len(parts) != 3 || parts[1] != req.GetClaims() {
		return nil, status.Error(codes.Internal, "the signed token does not carry the claims as sent")
	}
	return &externaljwtv1.SignJWTResponse{Header: parts[0], Signature: parts[2]}, nil
}

// FetchKeys answers every key of the published set, retired keys included (the set keeps
// them for their TTL), with the set's last update time and spec.cacheMaxAge as the hint.
func (s *Server) FetchKeys(_ context.Context, _ *externaljwtv1.FetchKeysRequest) (*externaljwtv1.FetchKeysResponse, error) {
	snap := s.current()
	if snap == nil {
		return nil, status.Error(codes.Unavailable, "trustplane jwt-signer has read no published set yet")
	}
	if snap.KeysErr != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "trustplane jwt-signer (%s) has no usable published set: %v", snap.From, snap.KeysErr)
	}
	hint := int64(snap.RefreshHint / time.Second)
	if hint < 1 {
		hint = 1 // kube-apiserver refuses a hint that is not positive
	}
	return &externaljwtv1.FetchKeysResponse{Keys: snap.Keys, DataTimestamp: timestamppb.New(snap.DataTimestamp), RefreshHintSeconds: hint}, nil
}

// Metadata answers --max-token-expiration.
func (s *Server) Metadata(context.Context, *externaljwtv1.MetadataRequest) (*externaljwtv1.MetadataResponse, error) {
	return &externaljwtv1.MetadataResponse{MaxTokenExpirationSeconds: int64(s.maxTokenExpiration / time.Second)}, nil
}

// Listen opens the unix socket at path. A socket already there is replaced when nothing
// answers on it (an earlier run's); a live one, or any other kind of file, is refused.
func Listen(path string) (net.Listener, error) {
	if !strings.HasPrefix(path, "@") { // an abstract socket has no file
		info, err := os.Lstat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("--socket %s: %w", path, err)
		case info.Mode().Type() != os.ModeSocket:
			return nil, fmt.Errorf("--socket %s exists and is not a socket (%s): refusing to replace it", path, fileKind(info.Mode()))
		default:
			if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
				_ = conn.Close()
				return nil, fmt.Errorf("--socket %s is served by another process: stop it first", path)
			}
			if err := os.Remove(path); err != nil {
				return nil, fmt.Errorf("--socket %s: removing the socket of an earlier run: %w", path, err)
			}
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("--socket %s: %w", path, err)
	}
	if !strings.HasPrefix(path, "@") {
		// Only the signer's user (kube-apiserver runs as the same, or as root) may ask
		// for a signature.
		if err := os.Chmod(path, 0o600); err != nil {
			_ = l.Close()
			return nil, fmt.Errorf("--socket %s: %w", path, err)
		}
	}
	return l, nil
}

// NewGRPCServer is a gRPC server with s registered.
func NewGRPCServer(s *Server) *grpc.Server {
	g := grpc.NewServer()
	externaljwtv1.RegisterExternalJWTSignerServer(g, s)
	return g
}

// fileKind names what a path holds, for the refusal.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a " + m.Type().String() + " file"
}
