package chaos

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy on a loopback port that can play an unreachable cluster: Down
// cuts every connection and refuses new ones for a while. It dials the target from the
// loopback address the harness gives the caller's (sourceFor): so the API server's audit
// log tells which manager replica wrote through it (audit.go).
type Proxy struct {
	// Addr is the proxy's host:port.
	Addr string

	target    string
	sourceFor func(remote net.Addr) *net.TCPAddr
	listener  net.Listener
	mu        sync.Mutex
	down      bool
	conns     map[net.Conn]struct{}
}

// NewProxy starts a proxy to target (host:port); it stops when the run ends.
func (h *Harness) NewProxy(target string) *Proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.T.Fatalf("proxy listener: %v", err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, sourceFor: h.proxySource, listener: l, conns: map[net.Conn]struct{}{}}
	go p.serve()
	h.T.Cleanup(func() { _ = l.Close(); p.cutAll() })
	return p
}

func (p *Proxy) serve() {
	for {
		in, err := p.listener.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = in.Close()
			continue
		}
		p.conns[in] = struct{}{}
		p.mu.Unlock()
		go p.pipe(in)
	}
}

func (p *Proxy) pipe(in net.Conn) {
	defer p.forget(in)
	dialer := net.Dialer{Timeout: 5 * time.Second}
	if local := p.sourceFor(in.RemoteAddr()); local != nil {
		dialer.LocalAddr = local
	}
	out, err := dialer.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = out.Close()
		return
	}
	p.conns[out] = struct{}{}
	p.mu.Unlock()
	defer p.forget(out)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

func (p *Proxy) forget(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// Down cuts every open connection and refuses new ones for d, then serves again.
func (p *Proxy) Down(d time.Duration) {
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	p.cutAll()
	time.Sleep(d)
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
