package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Ports handed to child processes are chosen below the kernel's ephemeral range and
// reserved across every test process on the machine.
//
// A port found by listening on :0 and closing comes from the ephemeral range, so until
// the child binds it, any outgoing connection (a client dialling the API server) or any
// other test's :0 may take it: CI saw "bind: address already in use" that way. Below the
// range the kernel hands out nothing by itself, and a lock file held for the life of the
// test process keeps two test binaries running at once from picking the same port.
const (
	lowestPort   = 10000
	portLockDir  = "trustplane-test-ports"
	portAttempts = 1000
)

var (
	portsMu  sync.Mutex
	reserved = map[int]*os.File{} // held open (and locked) until the process exits
)

// FreeAddr is a loopback address with a port nothing listens on now and that no other
// test on this machine will be given while this test process lives.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := reservePort()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

func reservePort() (string, error) {
	highest := ephemeralLow() - 1
	if highest <= lowestPort {
		return "", fmt.Errorf("no ports below the ephemeral range (it starts at %d)", highest+1)
	}
	dir := filepath.Join(os.TempDir(), portLockDir)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("port lock directory: %w", err)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range portAttempts {
		port := lowestPort + rand.IntN(highest-lowestPort+1)
		if _, mine := reserved[port]; mine {
			continue
		}
		lock, ok := lockPort(dir, port)
		if !ok {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if l, err := net.Listen("tcp", addr); err == nil {
			_ = l.Close()
			reserved[port] = lock
			return addr, nil
		}
		_ = lock.Close() // someone outside the tests listens there
	}
	return "", fmt.Errorf("no free port in %d-%d after %d attempts", lowestPort, highest, portAttempts)
}

// lockPort takes an exclusive lock on the port's file; the kernel drops it when the
// process exits, however it exits.
func lockPort(dir string, port int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}

// ephemeralLow is where the kernel's ephemeral ports start (32768 if unknown, Linux's
// default).
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(raw))
	if len(fields) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return low
}
