package localnode

import (
	"os"
	"path/filepath"
)

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// paths are the node's files under its directory.
type paths struct {
	dir string

	containerdConfig, containerdRoot, containerdState, containerdSocket, containerdLog string

	cniConfDir, cniIPAMDir string

	kubeletRoot, kubeletConfig, kubeletKubeconfig, kubeletClientCA, kubeletLog string

	proxyConfig, proxyKubeconfig, proxyLog string

	schedulerKubeconfig, schedulerLog string
}

func pathsIn(dir string) paths {
	j := func(p ...string) string { return filepath.Join(append([]string{dir}, p...)...) }
	return paths{
		dir:                 dir,
		containerdConfig:    j("containerd", "config.toml"),
		containerdRoot:      j("containerd", "root"),
		containerdState:     j("containerd", "state"),
		containerdSocket:    j("containerd", "containerd.sock"),
		containerdLog:       j("containerd.log"),
		cniConfDir:          j("cni", "net.d"),
		cniIPAMDir:          j("cni", "ipam"),
		kubeletRoot:         j("kubelet", "root"),
		kubeletConfig:       j("kubelet", "config.yaml"),
		kubeletKubeconfig:   j("kubelet", "kubeconfig"),
		kubeletClientCA:     j("kubelet", "client-ca.crt"),
		kubeletLog:          j("kubelet.log"),
		proxyConfig:         j("kube-proxy", "config.yaml"),
		proxyKubeconfig:     j("kube-proxy", "kubeconfig"),
		proxyLog:            j("kube-proxy.log"),
		schedulerKubeconfig: j("kube-scheduler", "kubeconfig"),
		schedulerLog:        j("kube-scheduler.log"),
	}
}

func (p paths) create() error {
	for _, d := range []string{p.containerdRoot, p.containerdState, p.cniConfDir, p.cniIPAMDir, p.kubeletRoot, filepath.Dir(p.proxyConfig), filepath.Dir(p.schedulerKubeconfig)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// KubeletLog is where the node in dir has the kubelet write its log.
func KubeletLog(dir string) string { return pathsIn(dir).kubeletLog }

// KubeletRootDir is the kubelet's --root-dir of the node in dir: pods' volumes are under
// pods/<uid>/volumes.
func KubeletRootDir(dir string) string { return pathsIn(dir).kubeletRoot }
