package adapters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// File is one file a person sent with a message, as the platform describes it
// (I1-I4). Nothing is downloaded until a turn reads it.
type File struct {
	Name string // the file's name as shown ("screenshot.png")
	MIME string // the type the platform states ("image/png"; "" = unknown)
	Size int64  // bytes, as the platform states them (0 = unknown)
	// Ref is opaque to everyone but the adapter: where the file is read from.
	Ref string
}

// FileReader is an optional capability: read a file of an Inbound (I3). It
// returns at most max bytes, or an error matching ErrFileTooLarge; it never
// follows a redirect to another host and sends its platform's credentials to
// that platform only.
type FileReader interface {
	ReadFile(ctx context.Context, f File, max int64) ([]byte, error)
}

// Earlier is one message written before the bot was addressed (H1-H2).
type Earlier struct {
	User string // channel-qualified id: "slack:U123", "discord:456"
	Name string // the name the platform shows, when it gave one
	Bot  bool   // written by another bot or an integration
	Text string
	// Files names the files it carried (they are not read).
	Files []string
	At    time.Time
}

// HistoryReader is an optional capability: read the messages ref points at
// (an Inbound's Earlier or RepliesTo), oldest first, at most max of them,
// without the bot's own messages (H1-H2).
type HistoryReader interface {
	ReadEarlier(ctx context.Context, ref string, max int) ([]Earlier, error)
}

// ErrFileTooLarge is matched (errors.Is) by a download stopped at its cap.
var ErrFileTooLarge = errors.New("adapters: file larger than the cap")

// ErrRedirectRefused is matched by a download whose server redirected it to
// another host: the redirect is not followed, so no credential goes there.
var ErrRedirectRefused = errors.New("adapters: redirect to another host refused")

// NewDownloadClient returns an http.Client for Download: its redirects are
// followed only to the same scheme and host, at most 3 of them, and timeout
// bounds a whole download. Go forwards the request's headers on such a
// redirect, which is why no other host may be reached: a credential in them
// would go along.
func NewDownloadClient(timeout time.Duration, transport http.RoundTripper) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			first := via[0].URL
			if req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
				return fmt.Errorf("%w: %s sent it to %s", ErrRedirectRefused, first.Host, req.URL.Host)
			}
			if len(via) > 3 {
				return errors.New("adapters: more than 3 redirects")
			}
			return nil
		},
	}
}

// OnFileHost reports whether ref is an https URL whose (lower-case) host
// passes isFileHost, or a URL on the scheme and host of apiURL (a local fake of
// the platform; "" = none): the only places a platform's files are read from.
func OnFileHost(ref, apiURL string, isFileHost func(host string) bool) bool {
	u, err := url.Parse(ref)
	if err != nil {
		return false
	}
	if u.Scheme == "https" && isFileHost(strings.ToLower(u.Hostname())) {
		return true
	}
	api, err := url.Parse(apiURL)
	return apiURL != "" && err == nil && u.Scheme == api.Scheme && strings.EqualFold(u.Host, api.Host)
}

// Download GETs u with header through c and returns its body, at most max
// bytes: a larger body (announced or read) fails with ErrFileTooLarge after
// reading no more than max+1 bytes, so memory stays bounded whatever the server
// sends. Errors name the host, never the URL's path or query (a signed link is
// a credential).
func Download(ctx context.Context, c *http.Client, u string, header http.Header, max int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil || (req.URL.Scheme != "https" && req.URL.Scheme != "http") || req.URL.Host == "" {
		return nil, "", errors.New("adapters: the file's address is not an http(s) URL")
	}
	host := req.URL.Host
	maps.Copy(req.Header, header)
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return nil, "", fmt.Errorf("download from %s: %w", host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, "", fmt.Errorf("download from %s: HTTP %d", host, resp.StatusCode)
	}
	if resp.ContentLength > max {
		return nil, "", fmt.Errorf("%w (%d bytes announced, the cap is %d)", ErrFileTooLarge, resp.ContentLength, max)
	}
	b, err := readCapped(resp.Body, resp.ContentLength, max)
	if errors.Is(err, ErrFileTooLarge) {
		return nil, "", err
	}
	if err != nil {
		return nil, "", fmt.Errorf("download from %s: %w", host, err)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// readCapped reads r whole, at most max bytes: its buffer grows by doubling but
// never past max+1 bytes, so a body of unknown length costs at most about
// twice the cap while it is read (the last copy), whatever it holds.
func readCapped(r io.Reader, length, max int64) ([]byte, error) {
	size := int64(64 << 10)
	if length > 0 {
		size = length + 1
	}
	buf := make([]byte, 0, min(size, max+1))
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) > max {
				return nil, fmt.Errorf("%w (more than %d bytes)", ErrFileTooLarge, max)
			}
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), max+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			if int64(len(buf)) > max {
				return nil, fmt.Errorf("%w (more than %d bytes)", ErrFileTooLarge, max)
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

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
