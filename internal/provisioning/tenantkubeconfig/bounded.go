package tenantkubeconfig

import (
	"fmt"
	"io"
	"net/http"
	"sync"
)

// A tenant's server answers whatever it likes: a gzip body of 783 KB that inflates to
// 768 MiB, a discovery document of gigabytes. So the manager asks it for no compression,
// refuses a content encoding it did not ask for, reads at most MaxResponseBytes of each
// answer, and sends it at most MaxInFlight requests at once: what one tenant's server can
// make the manager hold is bounded, whatever it sends.

// ResponseTooLargeError is an answer of a tenant's server cut off at the policy's limit.
type ResponseTooLargeError struct{ Limit int64 }

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %d bytes (--cluster-target-max-response-bytes)", e.Limit)
}

// UnrequestedEncodingError is an answer in a content encoding the manager did not ask for.
type UnrequestedEncodingError struct{ Encoding string }

func (e *UnrequestedEncodingError) Error() string {
	return fmt.Sprintf("the answer has Content-Encoding %q, which was not asked for", e.Encoding)
}

// boundedTransport is the transport of every connection to a tenant's server.
type boundedTransport struct {
	next     http.RoundTripper
	slots    chan struct{} // one per request in flight, shared by every client of the target
	maxBytes int64
}

// bounded returns the rest.Config WrapTransport of one tenant server: its budget of
// requests in flight is shared by every client made from that config. Limits a policy
// leaves at zero (one not made by DefaultPolicy) take the defaults: never unbounded.
func bounded(maxBytes int64, maxInFlight int) func(http.RoundTripper) http.RoundTripper {
	if maxBytes <= 0 {
		maxBytes = DefaultPolicy().MaxResponseBytes
	}
	if maxInFlight <= 0 {
		maxInFlight = DefaultPolicy().MaxInFlight
	}
	slots := make(chan struct{}, maxInFlight)
	return func(next http.RoundTripper) http.RoundTripper {
		return &boundedTransport{next: next, slots: slots, maxBytes: maxBytes}
	}
}

func (b *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	select {
	case b.slots <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	var once sync.Once
	release := func() { once.Do(func() { <-b.slots }) }
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		_ = resp.Body.Close()
		release()
		return nil, &UnrequestedEncodingError{Encoding: enc}
	}
	if resp.ContentLength > b.maxBytes {
		_ = resp.Body.Close()
		release()
		return nil, &ResponseTooLargeError{Limit: b.maxBytes}
	}
	resp.Body = &cappedBody{body: resp.Body, left: b.maxBytes, limit: b.maxBytes, release: release}
	return resp, nil
}

// cappedBody reads at most limit bytes of an answer, then fails; it gives the request's
// slot back when closed.
type cappedBody struct {
	body        io.ReadCloser
	left, limit int64
	release     func()
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells an answer of exactly limit bytes from a longer one.
		var probe [1]byte
		n, err := c.body.Read(probe[:])
		if n > 0 {
			return 0, &ResponseTooLargeError{Limit: c.limit}
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.body.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cappedBody) Close() error {
	defer c.release()
	return c.body.Close()
}
