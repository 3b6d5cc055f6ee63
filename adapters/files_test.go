package adapters

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// covers I3: a download follows a redirect on its own host, refuses one to
// another host (which is never reached, so no header goes there), and stops at
// its cap whatever the server announces.
func TestDownload_I3_BoundedAndSameHostOnly(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write([]byte("<html>sign in</html>"))
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/file?sig=secret", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/login", http.StatusFound)
		case "/file":
			if r.Header.Get("Authorization") != "Bearer tok" {
				http.Error(w, "no", http.StatusForbidden)
				return
			}
			_, _ = w.Write([]byte("hello"))
		case "/endless":
			// No Content-Length: the cap must stop the read.
			fl := w.(http.Flusher)
			chunk := []byte(strings.Repeat("x", 32<<10))
			for range 1024 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				fl.Flush()
			}
		case "/big":
			w.Header().Set("Content-Length", "100000000")
			_, _ = w.Write([]byte("x"))
		}
	}))
	defer srv.Close()
	c := NewDownloadClient(5*time.Second, nil)
	h := http.Header{"Authorization": {"Bearer tok"}}
	ctx := context.Background()

	b, _, err := Download(ctx, c, srv.URL+"/moved", h, 100)
	if err != nil || string(b) != "hello" {
		t.Fatalf("same-host redirect: %q %v", b, err)
	}
	_, _, err = Download(ctx, c, srv.URL+"/away", h, 100)
	if !errors.Is(err, ErrRedirectRefused) || elsewhere.Load() != 0 {
		t.Fatalf("redirect to another host: err %v, that host reached %d times", err, elsewhere.Load())
	}
	_, _, err = Download(ctx, c, srv.URL+"/endless", nil, 1<<20)
	if !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("endless body: %v", err)
	}
	_, _, err = Download(ctx, c, srv.URL+"/big", nil, 1<<20)
	if !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("announced size: %v", err)
	}
	_, _, err = Download(ctx, c, srv.URL+"/file?sig=secret", nil, 100)
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("refused download: %v (must name the status, never the query)", err)
	}
	if _, _, err := Download(ctx, c, "file:///etc/passwd", nil, 100); err == nil {
		t.Fatal("a file: URL was read")
	}
}

// covers I3: a platform's credential goes only to its file hosts: https on a
// host the platform names, or the scheme and host of a configured API URL (a
// local fake); a look-alike host, plain http or another port gets nothing.
func TestOnFileHost_I3_OnlyThePlatformsHosts(t *testing.T) {
	slackHost := func(h string) bool { return h == "slack.com" || strings.HasSuffix(h, ".slack.com") }
	tests := []struct {
		ref, api string
		want     bool
	}{
		{"https://files.slack.com/files-pri/T1-F1/x.png", "", true},
		{"https://FILES.Slack.com/x", "", true},
		{"http://files.slack.com/x", "", false},
		{"https://files.slack.com.evil.example/x", "", false},
		{"https://evilslack.com/x", "", false},
		{"http://127.0.0.1:8089/files/x", "http://127.0.0.1:8089/api/", true},
		{"http://127.0.0.1:9999/files/x", "http://127.0.0.1:8089/api/", false},
		{"https://127.0.0.1:8089/files/x", "http://127.0.0.1:8089/api/", false},
		{"http://127.0.0.1:8089/files/x", "", false},
		{"::not a url", "", false},
	}
	for _, tc := range tests {
		if got := OnFileHost(tc.ref, tc.api, slackHost); got != tc.want {
			t.Errorf("OnFileHost(%q, %q) = %v, want %v", tc.ref, tc.api, got, tc.want)
		}
	}
}
