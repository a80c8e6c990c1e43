package localcp

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clientCertAuthn authenticates users by client certificates from a CA kept in dir/pki,
// where envtest's own authenticator makes a new CA at every start: a kubeconfig saved
// from one make run (the admin's, a kubelet's) then keeps authenticating after the next.
type clientCertAuthn struct {
	ca     keyPair
	caFile string
}

var _ envtest.Authn = (*clientCertAuthn)(nil)

// clientCertLifetime is how long an issued client certificate authenticates.
const clientCertLifetime = 365 * 24 * time.Hour

func newClientCertAuthn(dir string) (*clientCertAuthn, error) {
	ca, err := loadOrCreateCA(filepath.Join(dir, "pki", "client-ca"), "trustplane make run client CA")
	if err != nil {
		return nil, fmt.Errorf("the client CA: %w", err)
	}
	return &clientCertAuthn{ca: ca}, nil
}

// Configure points the API server at the client CA, written to workDir by Start.
func (a *clientCertAuthn) Configure(workDir string, args *envtest.Arguments) error {
	a.caFile = filepath.Join(workDir, "client-ca.crt")
	args.Set("client-ca-file", a.caFile)
	return nil
}

func (a *clientCertAuthn) Start() error {
	if a.caFile == "" {
		return errors.New("start called before configure")
	}
	return os.WriteFile(a.caFile, a.ca.certPEM(), 0o600)
}

// AddUser issues user a client certificate and returns base with it.
func (a *clientCertAuthn) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	cert, err := issue(&x509.Certificate{
		Subject:  pkix.Name{CommonName: user.Name, Organization: user.Groups},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, a.ca, clientCertLifetime)
	if err != nil {
		return nil, fmt.Errorf("client certificate of %s: %w", user.Name, err)
	}
	keyPEM, err := cert.keyPEM()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = cert.certPEM(), keyPEM
	return cfg, nil
}

func (a *clientCertAuthn) Stop() error { return nil }
