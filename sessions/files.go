package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/detourbot/detour/adapters"
	"github.com/detourbot/detour/llm"
)

// message is a turn's new message as the models see it (I1-I4): what the
// person wrote, then the text files put into it and a line for each file not
// read; the images beside it; and, for the person, what was not read and why.
type message struct {
	text   string
	images []llm.Image
	names  []string // the images' names, for the history
	notes  []string // "movie.mov (30.0 MB; files over 5.0 MB are not read)"; the writer tells them once
}

// llm is the message as one prompt message: its text, then a line for each
// file not read, so the model does not answer as if it had seen them.
func (m *message) llm() llm.Message {
	return llm.Message{Role: "user", Content: m.text + m.notLines(), Images: m.images}
}

func (m *message) notLines() string {
	var b strings.Builder
	for _, n := range m.notes {
		b.WriteString("\n[not read: " + n + "]")
	}
	return b.String()
}

// stored is the message as the history keeps it: images are not stored, a
// line names each (later turns do not send them again).
func (m *message) stored() string {
	s := m.text
	for _, n := range m.names {
		s += "\n[image: " + n + "]"
	}
	return s + m.notLines()
}

// empty reports whether there is nothing for a model to answer.
func (m *message) empty() bool { return strings.TrimSpace(m.text) == "" && len(m.images) == 0 }

// fileKind is what detour does with a file.
type fileKind int

const (
	kindOther fileKind = iota
	kindImage
	kindText
)

// imageMIMEs are the image types every protocol detour speaks takes (PNG,
// JPEG, GIF, WEBP: OpenAI's and Anthropic's lists are the same).
var imageMIMEs = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// textMIMEs and textExts name the files read as text besides text/*.
var (
	textMIMEs = map[string]bool{"application/json": true, "application/xml": true, "application/x-yaml": true,
		"application/yaml": true, "application/toml": true, "application/javascript": true, "application/x-sh": true,
		"application/sql": true, "application/x-ndjson": true}
	textExts = map[string]bool{".txt": true, ".md": true, ".markdown": true, ".csv": true, ".tsv": true, ".json": true,
		".yaml": true, ".yml": true, ".toml": true, ".xml": true, ".log": true, ".go": true, ".py": true, ".js": true,
		".ts": true, ".sh": true, ".sql": true, ".html": true, ".css": true, ".ini": true, ".conf": true, ".diff": true,
		".patch": true, ".rs": true, ".java": true, ".c": true, ".h": true, ".rb": true, ".kt": true, ".swift": true}
)

// kindOf decides from the stated type and the name.
func kindOf(f adapters.File) fileKind {
	mime, _, _ := strings.Cut(strings.ToLower(f.MIME), ";")
	mime = strings.TrimSpace(mime)
	ext := strings.ToLower(path.Ext(f.Name))
	switch {
	case imageMIMEs[mime]:
		return kindImage
	case strings.HasPrefix(mime, "text/") || textMIMEs[mime] || textExts[ext]:
		return kindText
	case mime == "" || mime == "application/octet-stream":
		switch ext {
		case ".png", ".jpg", ".jpeg", ".gif", ".webp":
			return kindImage
		}
	}
	return kindOther
}

// what names a kind of file for a person ("PDF files", "videos").
func what(f adapters.File) string {
	mime := strings.ToLower(f.MIME)
	switch {
	case strings.Contains(mime, "pdf"):
		return "PDF files"
	case strings.HasPrefix(mime, "video/"):
		return "videos"
	case strings.HasPrefix(mime, "audio/"):
		return "audio files"
	case strings.HasPrefix(mime, "image/"):
		return mime[len("image/"):] + " images"
	}
	if ext := strings.ToLower(path.Ext(f.Name)); ext != "" {
		return ext + " files"
	}
	return "files of this type"
}

// size renders bytes for a person: "30.0 MB", "12 KB", "800 bytes".
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", (n+512)>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// fileReadTimeout bounds reading the files of one message.
const fileReadTimeout = 60 * time.Second

// readMessage makes the turn's message from in: its text, its text files put
// in, its images read, and a note for each file left out (I1-I4). Every file is
// checked against the caps by the size the platform states before anything is
// downloaded, and the download itself stops at the cap.
func (r *Router) readMessage(ctx context.Context, in adapters.Inbound) *message {
	m := &message{text: in.Text}
	r.readRepliedTo(ctx, in, m) // H1: a reply chain, for this message only
	if len(in.Files) == 0 {
		return m
	}
	lim := r.cfg.Files
	fr, _ := r.adapter(in.Channel).(adapters.FileReader)
	ctx, cancel := context.WithTimeout(ctx, fileReadTimeout)
	defer cancel()
	var inlined strings.Builder
	skip := func(f adapters.File, why string) {
		m.notes = append(m.notes, fmt.Sprintf("%s (%s)", displayName(f), why))
	}
	for i, f := range in.Files {
		if i >= lim.MaxFiles {
			skip(f, fmt.Sprintf("only the first %d files of a message are read", lim.MaxFiles))
			continue
		}
		kind := kindOf(f)
		max := lim.MaxBytes
		switch kind {
		case kindOther:
			skip(f, what(f)+" are not read; images and text files are")
			continue
		case kindText:
			max = lim.MaxTextBytes
		}
		if f.Size > max {
			skip(f, tooLarge(kind, f.Size, max))
			continue
		}
		if fr == nil {
			skip(f, "this channel cannot fetch files")
			continue
		}
		data, err := fr.ReadFile(ctx, f, max)
		switch {
		case errors.Is(err, adapters.ErrFileTooLarge):
			skip(f, tooLarge(kind, 0, max))
			continue
		case err != nil:
			r.log.Warn("file not read", "session", in.SessionKey, "file", displayName(f), "err", err)
			skip(f, "it could not be downloaded: "+err.Error())
			continue
		}
		if kind == kindImage {
			mime := sniffImage(data)
			if !imageMIMEs[mime] {
				skip(f, "it is not a PNG, JPEG, GIF or WEBP image")
				continue
			}
			m.images = append(m.images, llm.Image{MIME: mime, Data: data})
			m.names = append(m.names, displayName(f))
			continue
		}
		text, ok := textOf(data)
		if !ok {
			skip(f, "it is not text")
			continue
		}
		fmt.Fprintf(&inlined, "\n\n[file %s]\n%s\n[end of %s]", displayName(f), text, displayName(f))
	}
	m.text += inlined.String()
	return m
}

// tooLarge is why a file over its cap was left out.
func tooLarge(kind fileKind, n, max int64) string {
	if kind == kindText {
		if n > 0 {
			return fmt.Sprintf("%s; text files of up to %s are put into the message", size(n), size(max))
		}
		return fmt.Sprintf("text files of up to %s are put into the message", size(max))
	}
	if n > 0 {
		return fmt.Sprintf("%s; files over %s are not read", size(n), size(max))
	}
	return fmt.Sprintf("larger than %s, the most a file may have", size(max))
}

// displayName is a file's name as notes show it: bounded, one line.
func displayName(f adapters.File) string {
	n := strings.Join(strings.Fields(f.Name), " ")
	if n == "" {
		n = "a file"
	}
	if r := []rune(n); len(r) > 80 {
		n = string(r[:79]) + "…"
	}
	return n
}

// sniffImage names an image's type from its first bytes.
func sniffImage(data []byte) string {
	if len(data) >= 12 && bytes.HasPrefix(data, []byte("RIFF")) && string(data[8:12]) == "WEBP" {
		return "image/webp"
	}
	return http.DetectContentType(data)
}

// textOf returns data as text when it is UTF-8 without NUL bytes (a BOM is
// dropped).
func textOf(data []byte) (string, bool) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", false
	}
	return string(data), true
}

// dropImages leaves a message's images out when no model of the turn takes
// them (I5), with a note saying so and which models would.
func (m *message) dropImages(why string) {
	for _, n := range m.names {
		m.notes = append(m.notes, n+" ("+why+")")
	}
	m.images, m.names = nil, nil
}

// notice is the notice of what was not read of the message ("" = none).
func (m *message) notice() string {
	if len(m.notes) == 0 {
		return ""
	}
	return "📎 not read: " + strings.Join(m.notes, "; ")
}
