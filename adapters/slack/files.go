package slack

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/detourbot/detour/adapters"
)

// Files people share (I1-I4). A message event carries its files' metadata
// (name, mimetype, size, url_private_download); the bytes are read only when a
// turn needs them, from url_private_download with the bot token as
// Authorization: Bearer (https://docs.slack.dev/messaging/working-with-files/,
// "Authentication"), which needs the files:read scope. Without it, or with a
// wrong token, Slack answers with its sign-in page (a redirect to the
// workspace's sign-in, then HTML) instead of the file: that is refused, never
// taken for the file. The token goes only to Slack's file hosts (files.slack.com,
// or the host of a configured api_url in tests) and a redirect to any other
// host is not followed.

// slackFile is the part of a file object the adapter reads.
type slackFile struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	Title              string `json:"title"`
	Mimetype           string `json:"mimetype"`
	Size               int64  `json:"size"`
	Mode               string `json:"mode"` // hosted, external, snippet, post, tombstone, hidden_by_limit
	URLPrivateDownload string `json:"url_private_download"`
	URLPrivate         string `json:"url_private"`
}

// filesOf maps the files of a message event.
func filesOf(fs []slackFile) []adapters.File {
	if len(fs) == 0 {
		return nil
	}
	out := make([]adapters.File, 0, len(fs))
	for _, f := range fs {
		name, ref := cmp.Or(f.Name, f.Title), cmp.Or(f.URLPrivateDownload, f.URLPrivate)
		switch f.Mode {
		case "tombstone", "hidden_by_limit", "external":
			ref = "" // deleted, beyond the workspace's history limit, or hosted elsewhere
		}
		out = append(out, adapters.File{Name: name, MIME: f.Mimetype, Size: f.Size, Ref: ref})
	}
	return out
}

// fileClient downloads files: same-host redirects only (I3).
var fileClient = adapters.NewDownloadClient(2*time.Minute, nil)

// errNotSlackFile: a file address outside Slack's file hosts gets no token.
var errNotSlackFile = errors.New("slack: the file is not on a Slack file host; it is not downloaded with the bot token")

// errSignIn: Slack answered with its sign-in page instead of the file.
var errSignIn = errors.New("slack answered with its sign-in page instead of the file: the bot token needs the files:read scope (add it and reinstall the app)")

// ReadFile implements adapters.FileReader.
func (a *Adapter) ReadFile(ctx context.Context, f adapters.File, max int64) ([]byte, error) {
	if f.Ref == "" {
		return nil, errors.New("slack: the file cannot be downloaded (deleted, hidden by the workspace's plan, or hosted elsewhere)")
	}
	if !adapters.OnFileHost(f.Ref, a.cfg.APIURL, slackFileHost) {
		return nil, errNotSlackFile
	}
	h := http.Header{"Authorization": {"Bearer " + a.cfg.BotToken}}
	b, ctype, err := adapters.Download(ctx, fileClient, f.Ref, h, max)
	switch {
	case errors.Is(err, adapters.ErrRedirectRefused):
		return nil, errSignIn
	case err != nil:
		return nil, err
	}
	if isHTML(ctype) && !strings.Contains(strings.ToLower(f.MIME), "html") {
		return nil, errSignIn
	}
	return b, nil
}

// slackFileHost: Slack's files are on slack.com and its subdomains
// (files.slack.com).
func slackFileHost(h string) bool { return h == "slack.com" || strings.HasSuffix(h, ".slack.com") }

func isHTML(ctype string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(ctype)), "text/html")
}
