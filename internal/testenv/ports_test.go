package testenv

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestFreeAddrIsBelowTheEphemeralRangeAndReserved(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		addr := FreeAddr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, portText, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(portText)
		if port < lowestPort || port >= ephemeralLow() {
			t.Errorf("port %d is not in [%d, %d)", port, lowestPort, ephemeralLow())
		}
		// Another test process opening the same lock file cannot take it.
		if f, ok := lockPort(filepath.Join(os.TempDir(), portLockDir), port); ok {
			_ = f.Close()
			t.Errorf("port %d's lock was taken a second time", port)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("the child cannot bind %s: %v", addr, err)
			continue
		}
		_ = l.Close()
	}
}
