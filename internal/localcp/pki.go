package localcp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// keyPair is a certificate with its key.
type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func (kp keyPair) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw})
}

func (kp keyPair) keyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(kp.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// write stores the pair as <base>.crt and <base>.key.
func (kp keyPair) write(base string) error {
	keyPEM, err := kp.keyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".crt", kp.certPEM(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(base+".key", keyPEM, 0o600)
}

// loadOrCreateCA reads the CA stored as <base>.crt/.key, or creates and stores one: kept
// across restarts, so what trusts it (a saved kubeconfig, a kubelet) keeps trusting.
func loadOrCreateCA(base, commonName string) (keyPair, error) {
	if kp, err := readKeyPair(base); err == nil {
		return kp, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return keyPair{}, fmt.Errorf("reading %s: %w", base, err)
	}
	if err := os.MkdirAll(filepath.Dir(base), 0o700); err != nil {
		return keyPair{}, err
	}
	template := &x509.Certificate{
		Subject: pkix.Name{CommonName: commonName}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	ca, err := issue(template, keyPair{}, 10*365*24*time.Hour)
	if err != nil {
		return keyPair{}, err
	}
	return ca, ca.write(base)
}

func readKeyPair(base string) (keyPair, error) {
	certPEM, err := os.ReadFile(base + ".crt")
	if err != nil {
		return keyPair{}, err
	}
	keyPEM, err := os.ReadFile(base + ".key")
	if err != nil {
		return keyPair{}, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, err
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return keyPair{}, err
	}
	ecKey, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return keyPair{}, errors.New("not an ECDSA key")
	}
	return keyPair{cert: cert, key: ecKey}, nil
}

// issue signs template with a new P-256 key, by ca or, when ca is empty, by itself.
func issue(template *x509.Certificate, ca keyPair, lifetime time.Duration) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return keyPair{}, err
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(lifetime)
	parent, signer := template, key
	if ca.cert != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, signer)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: cert, key: key}, nil
}

// serviceIP is the first address of the local control plane's Service range: the
// kubernetes Service, through which pods reach the API server.
const serviceIP = "10.96.0.1"

// prepareServing writes the API server's serving certificate into certDir before envtest
// starts it (envtest then keeps it), from a CA kept in dir, for every name a client
// may use: loopback, the bind address, the kubernetes Service's address and names. The
// service-account signing key is kept in dir too, so tokens survive a restart.
func prepareServing(apiServer *envtest.APIServer, dir, certDir, bindAddress string) error {
	pki := filepath.Join(dir, "pki")
	ca, err := loadOrCreateCA(filepath.Join(pki, "serving-ca"), "trustplane make run API server CA")
	if err != nil {
		return err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	if ip := net.ParseIP(bindAddress); ip != nil && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	serving, err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, 365*24*time.Hour)
	if err != nil {
		return err
	}
	if err := serving.write(filepath.Join(certDir, "apiserver")); err != nil {
		return err
	}
	// envtest writes the signing key only with a serving certificate of its own.
	sa, err := loadOrCreateCA(filepath.Join(pki, "sa-signer"), "trustplane make run service-account signer")
	if err != nil {
		return err
	}
	if err := sa.write(filepath.Join(certDir, "sa-signer")); err != nil {
		return err
	}
	apiServer.CA = ca.certPEM()
	return nil
}
