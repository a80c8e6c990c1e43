package localcp

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// configureForNode sets the API server up for a real node on addr (see Options.Node).
func configureForNode(apiServer *envtest.APIServer, dir, addr string) error {
	certFile, keyFile, err := writeKubeletClientCertificate(dir)
	if err != nil {
		return fmt.Errorf("the API server's kubelet client certificate: %w", err)
	}
	args := apiServer.Configure()
	args.Set("advertise-address", addr)
	args.Set("authorization-mode", "Node,RBAC")
	// envtest turns ServiceAccount admission off; a node's pods need their tokens.
	args.Disable("disable-admission-plugins")
	args.Set("enable-admission-plugins", "NodeRestriction")
	args.Set("kubelet-client-certificate", certFile)
	args.Set("kubelet-client-key", keyFile)
	args.Set("kubelet-preferred-address-types", "InternalIP")
	return nil
}

// KubeletClientCA is the CA (PEM) of the certificate the API server of the control plane
// in dir presents to kubelets: the kubelet's x509 client CA.
func KubeletClientCA(dir string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, "pki", "kubelet-client-ca.crt"))
}

// writeKubeletClientCertificate issues, from a CA kept in dir, the client certificate the
// API server presents to kubelets (group system:masters, as kubeadm's
// apiserver-kubelet-client): a kubelet's webhook authorization then allows logs and exec.
func writeKubeletClientCertificate(dir string) (certFile, keyFile string, err error) {
	pki := filepath.Join(dir, "pki")
	ca, err := loadOrCreateCA(filepath.Join(pki, "kubelet-client-ca"), "trustplane make run kubelet-client CA")
	if err != nil {
		return "", "", err
	}
	client, err := issue(&x509.Certificate{
		Subject:  pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, 365*24*time.Hour)
	if err != nil {
		return "", "", err
	}
	base := filepath.Join(pki, "apiserver-kubelet-client")
	return base + ".crt", base + ".key", client.write(base)
}

// keptPort is the API server's port: the one recorded in dir by the last start when it is
// still free on addr, else a free one, recorded for the next.
func keptPort(dir, addr string) (int, error) {
	record := filepath.Join(dir, "apiserver-port")
	if raw, err := os.ReadFile(record); err == nil {
		if port, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && portFree(addr, port) {
			return port, nil
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s for the API server: %w", addr, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	if err := os.WriteFile(record, []byte(strconv.Itoa(port)+"\n"), 0o600); err != nil {
		return 0, fmt.Errorf("recording the API server's port: %w", err)
	}
	return port, nil
}

func portFree(addr string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// NodeKubeconfigs are the kubeconfigs of a node's kubelet (system:node:<name> in
// system:nodes, which the Node authorizer knows), kube-proxy (system:kube-proxy) and
// kube-scheduler (system:kube-scheduler), the users the bootstrap roles are bound to.
func (cp *ControlPlane) NodeKubeconfigs(node string) (kubelet, proxy, scheduler []byte, err error) {
	users := []envtest.User{
		{Name: "system:node:" + node, Groups: []string{"system:nodes"}},
		{Name: "system:kube-proxy"},
		{Name: "system:kube-scheduler"},
	}
	configs := make([][]byte, len(users))
	for i, u := range users {
		added, err := cp.env.AddUser(u, nil)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("user %s: %w", u.Name, err)
		}
		if configs[i], err = added.KubeConfig(); err != nil {
			return nil, nil, nil, err
		}
	}
	return configs[0], configs[1], configs[2], nil
}
