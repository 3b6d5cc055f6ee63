package termsafe

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile is a provider error body that tries everything at once: an OSC 52
// clipboard write, a window title, colour, a C1 CSI, a bidi override and a fake
// second line.
const hostile = "quota\x1b]52;c;ZXZpbA==\x07 \x1b]0;pwned\x1b\\\x1b[31mred\u009b2J \u202eevil\u202c\nFAKE ROW\tcol\r\x7f"

// covers T10
func TestShow_T10_Visible(t *testing.T) {
	for _, tc := range []struct{ name, in, show, line string }{
		{"plain", "hello world", "hello world", "hello world"},
		{"newline and tab", "a\n\tb", "a\n\tb", `a\n\tb`},
		{"OSC 52 clipboard", "x\x1b]52;c;ZXZpbA==\x07y", `x\x1b]52;c;ZXZpbA==\x07y`, `x\x1b]52;c;ZXZpbA==\x07y`},
		{"CSI", "\x1b[2J", `\x1b[2J`, `\x1b[2J`},
		{"C1 CSI and OSC", "a\u009b31mb\u009d0;t\u009c", `a\u009b31mb\u009d0;t\u009c`, `a\u009b31mb\u009d0;t\u009c`},
		{"bidi override", "abc\u202edcba\u202c", `abc\u202edcba\u202c`, `abc\u202edcba\u202c`},
		{"bidi isolates and marks", "\u2066x\u2069\u200f\u061c", `\u2066x\u2069\u200f\u061c`, `\u2066x\u2069\u200f\u061c`},
		{"carriage return, backspace, DEL", "a\rb\x08c\x7f", `a\x0db\x08c\x7f`, `a\rb\x08c\x7f`},
		{"invalid utf-8", "a\xffb", `a\xffb`, `a\xffb`},
		{"unicode kept", "café ↪️ 日本", "café ↪️ 日本", "café ↪️ 日本"},
	} {
		if got := Show(tc.in); got != tc.show {
			t.Errorf("%s: Show(%q) = %q, want %q", tc.name, tc.in, got, tc.show)
		}
		if got := Line(tc.in); got != tc.line {
			t.Errorf("%s: Line(%q) = %q, want %q", tc.name, tc.in, got, tc.line)
		}
	}
}

// covers T10: Fprintf neutralises its text arguments, whatever their type, and
// leaves its own format alone.
func TestFprintf_T10(t *testing.T) {
	var b bytes.Buffer
	_, _ = Fprintf(&b, "%s\t%v\t%s\t%d\n", hostile, errors.New("e\x1b[1m"), stringer("s\u202e"), 42)
	out := b.String()
	if strings.Count(out, "\n") != 1 || strings.Count(out, "\t") != 3 {
		t.Errorf("arguments added lines or columns: %q", out)
	}
	checkNoControl(t, strings.ReplaceAll(strings.ReplaceAll(out, "\t", ""), "\n", ""), false)
	for _, want := range []string{`\x1b]52;c;ZXZpbA==\x07`, `e\x1b[1m`, `s\u202e`, "42"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// covers T10: JSON through the writer decodes to the same values, and the raw
// bytes hold no C1 or bidi control; a character split across writes survives.
func TestJSONWriter_T10(t *testing.T) {
	var b bytes.Buffer
	w := NewJSONWriter(&b)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	in := map[string]string{"text": hostile, "plain": "café"}
	if err := enc.Encode(in); err != nil {
		t.Fatal(err)
	}
	raw := b.String()
	checkNoControl(t, strings.TrimSuffix(raw, "\n"), false)
	var back map[string]string
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if back["text"] != hostile || back["plain"] != "café" {
		t.Errorf("decoded %q, want %q", back, in)
	}

	b.Reset()
	line := []byte(`{"t":"a` + "\u202e" + `b"}` + "\n")
	cut := bytes.Index(line, []byte("\u202e")) + 1 // inside the three bytes
	_, _ = w.Write(line[:cut])
	_, _ = w.Write(line[cut:])
	if got := b.String(); got != `{"t":"a\u202eb"}`+"\n" {
		t.Errorf("split write gave %q", got)
	}
}

// covers T10: a JSON log line about a hostile provider body carries no raw C1 or
// bidi control, and still decodes to the body.
func TestJSONWriter_T10_SlogJSON(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(slog.NewJSONHandler(NewJSONWriter(&b), nil))
	log.Warn("attempt failed", "body", hostile)
	checkNoControl(t, strings.TrimSuffix(b.String(), "\n"), false)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["body"] != hostile {
		t.Errorf("log line %q: %v, body %q", b.String(), err, rec["body"])
	}
}

// checkNoControl fails when s holds a control a terminal acts on (newline and tab
// allowed when keepLines).
func checkNoControl(t *testing.T, s string, keepLines bool) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("invalid UTF-8 in %q", s)
	}
	for _, r := range s {
		if keepLines && (r == '\n' || r == '\t') {
			continue
		}
		if isControl(r) || isBidiControl(r) {
			t.Fatalf("control %U left in %q", r, s)
		}
	}
}

// covers T10: whatever the input, Show leaves no control but newline and tab,
// Line none at all, both valid UTF-8; the JSON writer keeps the decoded value.
func FuzzShow(f *testing.F) {
	for _, s := range []string{hostile, "\x1b[31mx", "\u009b2J", "a\u202eb", "\xff\xfe", "plain"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkNoControl(t, Show(s), true)
		checkNoControl(t, Line(s), false)
		var b bytes.Buffer
		if err := json.NewEncoder(NewJSONWriter(&b)).Encode(s); err != nil {
			t.Fatal(err)
		}
		var back string
		if err := json.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatalf("%v: %q", err, b.String())
		}
		if want := perByteValid(s); back != want {
			t.Fatalf("JSON writer changed %q into %q", want, back)
		}
		checkNoControl(t, strings.TrimSuffix(b.String(), "\n"), false)
	})
}

// perByteValid is s with each invalid byte replaced by U+FFFD, as encoding/json
// writes it.
func perByteValid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
