package adapters

import (
	"context"
	"io"
	"net/http"
	"time"
)

// Timed returns a RoundTripper that gives each request d once it is sent, to
// the end of its body: a wait before it (a rate limit, a reconnect backoff)
// never eats into its time, as an http.Client Timeout would.
func Timed(base http.RoundTripper, d time.Duration) http.RoundTripper {
	return timed{base: base, d: d}
}

type timed struct {
	base http.RoundTripper
	d    time.Duration
}

func (t timed) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.d)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's timeout once its body has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
