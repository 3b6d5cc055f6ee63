package fakeslack

// Files behind auth (https://docs.slack.dev/messaging/working-with-files/,
// "Authentication"): a file object's url_private and url_private_download
// need an Authorization: Bearer header with a token holding files:read. The
// fake serves each file it hosts at its url_private_download and, like Slack,
// answers a request with no token, a wrong one or one without files:read
// (in Scopes) with a redirect to the workspace's sign-in page, on another
// host, which shows HTML. That host records every request that reaches it
// (SignInHits), so a test sees whether a client followed the redirect and
// whether a token went along.
//
// A message shared with files is a message event of subtype file_share with
// a files list (https://docs.slack.dev/reference/events/message/file_share);
// an app_mention that carries files lists them too.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// hosted is one file the fake serves.
type hosted struct {
	id, name, mime string
	data           []byte
	size           int64 // bytes sent: len(data), or made as they are sent
	stated         int64 // the size its object states (0 = unknown: sent without Content-Length)
}

// Download is one request for a hosted file.
type Download struct {
	FileID string
	Token  bool // it carried the bot token
	Served bool // the file was sent
}

// SignInHit is one request that reached the sign-in host.
type SignInHit struct {
	Path          string
	Authorization string // the header as it arrived ("" = none)
}

type signIn struct {
	once sync.Once
	srv  *httptest.Server
	mu   sync.Mutex
	hits []SignInHit
}

func (s *Server) signInURL() string {
	s.signin.once.Do(func() {
		s.signin.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.signin.mu.Lock()
			s.signin.hits = append(s.signin.hits, SignInHit{Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
			s.signin.mu.Unlock()
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte("<!DOCTYPE html><html><head><title>Sign in | Slack</title></head><body>Sign in to your workspace</body></html>"))
		}))
	})
	return s.signin.srv.URL
}

func (s *Server) closeSignIn() {
	if s.signin.srv != nil {
		s.signin.srv.Close()
	}
}

// SignInHits lists the requests that reached the sign-in host.
func (s *Server) SignInHits() []SignInHit {
	s.signin.mu.Lock()
	defer s.signin.mu.Unlock()
	return append([]SignInHit(nil), s.signin.hits...)
}

// Downloads lists the requests for hosted files.
func (s *Server) Downloads() []Download {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Download(nil), s.downloads...)
}

// AddFile hosts data as a file and returns its file object, as message events
// carry it.
func (s *Server) AddFile(name, mime string, data []byte) map[string]any {
	return s.host(&hosted{name: name, mime: mime, data: data, size: int64(len(data)), stated: int64(len(data))})
}

// AddLargeFile hosts a file of size bytes, made as they are sent (the fake
// never holds them), whose object states stated bytes; stated 0 is a size
// nobody knows, and the file is then sent without a Content-Length.
func (s *Server) AddLargeFile(name, mime string, size, stated int64) map[string]any {
	return s.host(&hosted{name: name, mime: mime, size: size, stated: stated})
}

func (s *Server) host(h *hosted) map[string]any {
	s.mu.Lock()
	h.id = fmt.Sprintf("F%06d", s.nextLocked())
	if s.hostedFiles == nil {
		s.hostedFiles = map[string]*hosted{}
	}
	s.hostedFiles[h.id] = h
	s.mu.Unlock()
	base := s.srv.URL + "/files-pri/" + s.TeamID + "-" + h.id + "/"
	return map[string]any{
		"id": h.id, "name": h.name, "title": h.name, "mimetype": h.mime, "filetype": strings.TrimPrefix(h.mime, "image/"),
		"size": h.stated, "mode": "hosted", "is_external": false,
		"url_private": base + h.name, "url_private_download": base + "download/" + h.name,
	}
}

// handleFile serves /files-pri/<team>-<id>/[download/]<name>.
func (s *Server) handleFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/files-pri/")
	first, _, _ := strings.Cut(rest, "/")
	_, id, _ := strings.Cut(first, "-")
	s.mu.Lock()
	h := s.hostedFiles[id]
	token := r.Header.Get("Authorization") == "Bearer "+s.BotToken && s.BotToken != "" &&
		(s.Scopes == nil || slices.Contains(s.Scopes, "files:read"))
	s.downloads = append(s.downloads, Download{FileID: id, Token: token, Served: h != nil && token})
	s.notifyLocked()
	s.mu.Unlock()
	if !token {
		// Slack sends a client without a usable token to sign in.
		http.Redirect(w, r, s.signInURL()+"/?redir="+r.URL.EscapedPath(), http.StatusFound)
		return
	}
	if h == nil {
		http.Error(w, "file not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", h.mime)
	if h.stated > 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(h.size, 10))
	}
	if h.data != nil {
		_, _ = w.Write(h.data)
		return
	}
	chunk := make([]byte, 64<<10)
	for left := h.size; left > 0; {
		n := min(left, int64(len(chunk)))
		if _, err := w.Write(chunk[:n]); err != nil {
			return // the client stopped reading
		}
		left -= n
	}
}

// MentionFiles is Mention with files: the app_mention and its message twin
// (subtype file_share) carry the file objects.
func (s *Server) MentionFiles(channel, user, text, threadTS string, files ...map[string]any) Sent {
	ev := map[string]any{
		"type": "app_mention", "user": user, "channel": channel, "ts": s.NewTS(),
		"text": strings.TrimSpace("<@" + s.BotUserID + "> " + text), "files": files, "upload": true,
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	ev["event_ts"] = ev["ts"]
	sent := s.PushEvent(ev)
	if !s.OnlyMentions && !strings.HasPrefix(channel, "D") {
		twin := map[string]any{"type": "message", "subtype": "file_share", "channel_type": channelType(channel)}
		for _, k := range []string{"user", "channel", "ts", "text", "thread_ts", "event_ts", "files", "upload"} {
			if v, ok := ev[k]; ok {
				twin[k] = v
			}
		}
		t := s.PushEvent(twin)
		sent.Twin = &t
	}
	return sent
}

// ShareFiles sends a file_share message (no mention): in a DM, or a thread the
// bot takes part in. text may be empty, as when someone drops a file alone.
func (s *Server) ShareFiles(channel, user, text, threadTS string, files ...map[string]any) Sent {
	ts := s.NewTS()
	ev := map[string]any{"type": "message", "subtype": "file_share", "channel_type": channelType(channel), "user": user,
		"channel": channel, "ts": ts, "event_ts": ts, "text": text, "files": files, "upload": true}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return s.PushEvent(ev)
}
