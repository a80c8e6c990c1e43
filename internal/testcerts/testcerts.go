// Package testcerts makes keys and certificate chains for tests.
package testcerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// KeyType names a key kind.
type KeyType string

// The key types trustplane publishes.
const (
	RSA2048 KeyType = "RSA2048"
	RSA3072 KeyType = "RSA3072"
	RSA4096 KeyType = "RSA4096"
	P256    KeyType = "P256"
	P384    KeyType = "P384"
	P521    KeyType = "P521"
	Ed25519 KeyType = "Ed25519"
	RSA1024 KeyType = "RSA1024" // too weak: must be refused
)

// NewKey generates a private key.
func NewKey(t KeyType) (crypto.Signer, error) {
	switch t {
	case RSA1024:
		return rsa.GenerateKey(rand.Reader, 1024)
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case RSA3072:
		return rsa.GenerateKey(rand.Reader, 3072)
	case RSA4096:
		return rsa.GenerateKey(rand.Reader, 4096)
	case P256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case P384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case P521:
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unknown key type %q", t)
}

// Chain is a leaf certificate with its issuing CA.
type Chain struct {
	Leaf, CA       *x509.Certificate
	LeafKey, CAKey crypto.Signer
}

// PEM is tls.crt: leaf first, then the CA.
func (c Chain) PEM() []byte { return append(CertPEM(c.Leaf), CertPEM(c.CA)...) }

// KeyPEM is tls.key.
func (c Chain) KeyPEM() []byte { return KeyPEM(c.LeafKey) }

// NewChain issues a leaf for leafKey from a fresh P-256 CA, valid from notBefore to notAfter.
func NewChain(leafKey crypto.Signer, cn string, notBefore, notAfter time.Time) (Chain, error) {
	caKey, err := NewKey(P256)
	if err != nil {
		return Chain{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn + " CA"},
		NotBefore: notBefore, NotAfter: notAfter.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	ca, err := sign(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return Chain{}, err
	}
	leaf, err := Issue(ca, caKey, leafKey.Public(), cn, notBefore, notAfter)
	if err != nil {
		return Chain{}, err
	}
	return Chain{Leaf: leaf, CA: ca, LeafKey: leafKey, CAKey: caKey}, nil
}

// Issue signs a leaf certificate for pub.
func Issue(ca *x509.Certificate, caKey crypto.Signer, pub crypto.PublicKey, cn string, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return sign(tmpl, ca, pub, caKey)
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, key crypto.Signer) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// CertPEM encodes one certificate.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// KeyPEM encodes a private key as PKCS#8.
func KeyPEM(k crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// CheckBundle checks a pod certificate credential bundle: a PKCS#8 PRIVATE KEY, then the
// chain, leaf first; the key is the leaf's, and the leaf chains to roots (checked within
// its validity). It returns the leaf.
func CheckBundle(raw []byte, roots *x509.CertPool) (*x509.Certificate, error) {
	keyBlock, rest := pem.Decode(raw)
	leafBlock, _ := pem.Decode(rest)
	if keyBlock == nil || keyBlock.Type != "PRIVATE KEY" || leafBlock == nil || leafBlock.Type != "CERTIFICATE" {
		return nil, errors.New("the bundle is not a PRIVATE KEY followed by its CERTIFICATE")
	}
	key, err := x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the bundle's key: %w", err)
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the bundle's certificate: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok || !signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		return nil, errors.New("the bundle's key is not its certificate's")
	}
	opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: leaf.NotBefore.Add(time.Minute)}
	if _, err := leaf.Verify(opts); err != nil {
		return nil, fmt.Errorf("the bundle's certificate does not chain to the CA: %w", err)
	}
	return leaf, nil
}
