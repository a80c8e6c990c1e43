package localnode

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockPath is the machine-wide lock of the one node a machine can run: the bridge, the
// kubelet's and kube-proxy's ports and the iptables rules are the machine's.
const lockPath = "/run/trustplane-node.lock"

// lockWait bounds the wait for another node (make run, test/node, test/samples) to stop.
const lockWait = 20 * time.Minute

// lockMachine takes the lock, waiting for another node of this machine to stop; the
// returned file holds it until closed (or the process ends).
func lockMachine(log func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("another node runs on this machine (%s held for %s): stop it first", lockPath, lockWait)
		}
		if !told {
			log("waiting for another node on this machine to stop (%s)", lockPath)
			told = true
		}
		time.Sleep(time.Second)
	}
}
