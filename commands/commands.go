// Package commands parses the chat commands detour understands on every channel
// (/model, /new, /reset, /status, /recover, /help) and renders their fixed texts
// (help, usage, /status). Running a command against a session is the sessions
// router's job; this package is pure and never panics on any input (fuzzed).
package commands

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Name is a command name without its prefix.
type Name string

// Known commands.
const (
	CmdModel   Name = "model"
	CmdNew     Name = "new"
	CmdReset   Name = "reset"
	CmdStatus  Name = "status"
	CmdRecover Name = "recover"
	CmdHelp    Name = "help"
)

// Names lists the known commands in help order.
var Names = []Name{CmdModel, CmdNew, CmdReset, CmdStatus, CmdRecover, CmdHelp}

// Known reports whether n is a known command name.
func Known(n Name) bool {
	for _, k := range Names {
		if k == n {
			return true
		}
	}
	return false
}

// Command is one parsed command.
type Command struct {
	Name    Name   // a known name, or "" when Unknown is set
	Unknown string // the name typed when it is not a known command ("/foo")
	Args    []string
	// Parsed arguments (valid only when Err is empty):
	Ref     string // /model, /new: "provider/model"; /recover: a model ref
	Profile string // /model provider/model@profile: the profile id ("provider:name"); /recover: a profile id
	Default bool   // /model default: clear the user's choice
	// Err is a short answer saying what would work, when the arguments are bad.
	Err string
}

// maxNameLen bounds what still looks like a command word.
const maxNameLen = 32

// Parse reads text as a command. It strips one optional leading bot mention
// (`<@U123>`, `<@!123>` or `@name`), then needs `/` or `!` followed by a word.
//
// A known command name (case-insensitive) is always a command. An unknown word
// after `/` is a command too (answered with what would work) when it looks like a
// command: letters, digits, '_' or '-', ended by whitespace or the end of the text.
// Anything else is ordinary chat: "/usr/bin is a path", "!wow", "/ hello", "//x",
// and "!" followed by an unknown word (exclamations are common in chat).
func Parse(text string) (Command, bool) {
	s := strings.TrimLeftFunc(text, unicode.IsSpace)
	s = stripMention(s)
	if len(s) < 2 || (s[0] != '/' && s[0] != '!') {
		return Command{}, false
	}
	prefix := s[0]
	s = s[1:]
	end := strings.IndexFunc(s, unicode.IsSpace)
	word, rest := s, ""
	if end >= 0 {
		word, rest = s[:end], s[end:]
	}
	// "/model@detour" (Telegram-style addressing) names the command too.
	if at := strings.IndexByte(word, '@'); at > 0 {
		word = word[:at]
	}
	if word == "" || len(word) > maxNameLen || !isWord(word) {
		return Command{}, false
	}
	name := Name(strings.ToLower(word))
	args := strings.Fields(rest)
	if !Known(name) {
		if prefix == '!' {
			return Command{}, false
		}
		return Command{Unknown: word, Args: args, Err: fmt.Sprintf("unknown command /%s; try %s", word, list())}, true
	}
	c := Command{Name: name, Args: args}
	if c.Err = c.validate(); c.Err != "" {
		c.Ref, c.Profile, c.Default = "", "", false
	}
	return c, true
}

func list() string {
	parts := make([]string, len(Names))
	for i, n := range Names {
		parts[i] = "/" + string(n)
	}
	return strings.Join(parts, ", ")
}

func isWord(w string) bool {
	if !utf8.ValidString(w) {
		return false
	}
	for i, r := range w {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case (r >= '0' && r <= '9') || r == '_' || r == '-':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// stripMention removes one leading mention and the spaces after it.
func stripMention(s string) string {
	switch {
	case strings.HasPrefix(s, "<@"):
		end := strings.IndexByte(s, '>')
		if end < 0 {
			return s
		}
		return strings.TrimLeftFunc(s[end+1:], unicode.IsSpace)
	case strings.HasPrefix(s, "@"):
		end := strings.IndexFunc(s, unicode.IsSpace)
		if end < 0 {
			return s
		}
		return strings.TrimLeftFunc(s[end:], unicode.IsSpace)
	}
	return s
}

// Usage is the one-line usage of each command.
var Usage = map[Name]string{
	CmdModel:   "/model [provider/model[@profile] | default]",
	CmdNew:     "/new [provider/model]",
	CmdReset:   "/reset",
	CmdStatus:  "/status",
	CmdRecover: "/recover <provider/model | profile-id>",
	CmdHelp:    "/help",
}

// ValidRef reports whether ref looks like "provider/model" (split on the first '/').
func ValidRef(ref string) bool {
	i := strings.IndexByte(ref, '/')
	return i > 0 && i < len(ref)-1 && plainName(ref)
}

// ValidProfileID reports whether id looks like "provider:name".
func ValidProfileID(id string) bool {
	i := strings.IndexByte(id, ':')
	return i > 0 && i < len(id)-1 && !strings.Contains(id, "/") && plainName(id)
}

// maxNameBytes bounds a model ref or profile id typed in a command.
const maxNameBytes = 200

// plainName reports whether s can name a model or profile: bounded, valid UTF-8,
// no space, no control, format (bidi) or other invisible characters, so what
// /status shows later is what was typed (T5's companion: no 5 KB names, no
// text that reads differently from what it is).
func plainName(s string) bool {
	if len(s) > maxNameBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func (c *Command) validate() string {
	usage := "usage: " + Usage[c.Name]
	switch c.Name {
	case CmdModel:
		switch len(c.Args) {
		case 0:
			return ""
		case 1:
		default:
			return usage
		}
		a := c.Args[0]
		if strings.EqualFold(a, "default") {
			c.Default = true
			return ""
		}
		ref := a
		if at := strings.LastIndexByte(a, '@'); at >= 0 {
			ref, c.Profile = a[:at], a[at+1:]
			if c.Profile == "" {
				return "missing profile after @; " + usage
			}
			if !strings.Contains(c.Profile, ":") {
				// "@main" is short for "<provider>:main".
				if p, _, ok := strings.Cut(ref, "/"); ok {
					c.Profile = p + ":" + c.Profile
				}
			}
			if !ValidProfileID(c.Profile) {
				return fmt.Sprintf("%q is not a profile id (provider:name); %s", c.Profile, usage)
			}
		}
		if !ValidRef(ref) {
			return fmt.Sprintf("%q is not a model (provider/model); %s", ref, usage)
		}
		if c.Profile != "" && !strings.HasPrefix(c.Profile, ref[:strings.IndexByte(ref, '/')]+":") {
			return fmt.Sprintf("profile %s does not belong to provider %s", c.Profile, ref[:strings.IndexByte(ref, '/')])
		}
		c.Ref = ref
	case CmdNew:
		switch len(c.Args) {
		case 0:
		case 1:
			if !ValidRef(c.Args[0]) {
				return fmt.Sprintf("%q is not a model (provider/model); %s", c.Args[0], usage)
			}
			c.Ref = c.Args[0]
		default:
			return usage
		}
	case CmdReset, CmdStatus:
		if len(c.Args) != 0 {
			return usage
		}
	case CmdRecover:
		if len(c.Args) != 1 {
			return usage
		}
		switch a := c.Args[0]; {
		case ValidRef(a):
			c.Ref = a
		case ValidProfileID(a):
			c.Profile = a
		default:
			return fmt.Sprintf("%q is neither a model (provider/model) nor a profile id (provider:name); %s", a, usage)
		}
	}
	return ""
}

// HelpText is the /help answer.
func HelpText() string {
	return strings.Join([]string{
		"commands (start with / or !; in Slack threads use !):",
		Usage[CmdModel] + " — show or choose this conversation's model; default goes back to the configured one",
		Usage[CmdNew] + " — start a new conversation, optionally on a model",
		Usage[CmdReset] + " — start over: clear the conversation and every model choice",
		Usage[CmdStatus] + " — selected and active model, fallback reason, model states, usage",
		Usage[CmdRecover] + " — admins: probe now and mark it available again on success",
		Usage[CmdHelp] + " — this text",
	}, "\n")
}

// ModelChoice is what /model without argument shows.
type ModelChoice struct {
	Selected   string // model the session selected
	Source     string // default | agent | auto | user | legacy
	Active     string // model answering when it differs (auto fallback)
	Profile    string // pinned / chosen profile id, if any
	Configured []string
}

// ModelText renders /model without argument.
func ModelText(m ModelChoice) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model: %s (source %s)", m.Selected, m.Source)
	if m.Profile != "" {
		fmt.Fprintf(&b, ", profile %s", m.Profile)
	}
	if m.Active != "" && m.Active != m.Selected {
		fmt.Fprintf(&b, "\nactive fallback: %s (source auto)", m.Active)
	}
	if len(m.Configured) > 0 {
		fmt.Fprintf(&b, "\nchoose with /model provider/model: %s", strings.Join(m.Configured, ", "))
	}
	b.WriteString("\n/model default goes back to the configured model")
	return b.String()
}

// StatusLine is one model's line in /status.
type StatusLine struct {
	Model   string
	Profile string // profile id ("" for providers without credentials)
	// State is "ok", "cooldown" or "disabled".
	State    string
	Until    time.Time
	Reason   string // short human reason
	Recovery time.Time
}

// StatusInfo is everything /status shows (N5).
type StatusInfo struct {
	Session        string
	Selected       string // selected model
	Source         string
	Active         string // active fallback, when it differs from Selected
	FallbackReason string
	Profile        string // profile in use
	ProfileSource  string
	Candidates     []StatusLine
	LastProbe      time.Time // last probe of the selected model (S3)
	NextProbe      time.Time // next probe, when on an auto fallback
	PaidCalls      int
	InputTokens    int64
	OutputTokens   int64
	HistoryTurns   int
	Compactions    int
	Now            time.Time
}

func ts(t, now time.Time) string {
	t = t.UTC()
	if t.Year() == now.UTC().Year() && t.YearDay() == now.UTC().YearDay() {
		return t.Format("15:04:05 UTC")
	}
	return t.Format("2006-01-02 15:04 UTC")
}

// StatusText renders /status.
func StatusText(s StatusInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "selected model: %s (source %s)\n", s.Selected, s.Source)
	if s.Active != "" && s.Active != s.Selected {
		fmt.Fprintf(&b, "active fallback: %s (source auto; reason: %s)\n", s.Active, s.FallbackReason)
	}
	prof := s.Profile
	if prof == "" {
		prof = "none pinned"
	} else if s.ProfileSource != "" {
		prof += " (" + s.ProfileSource + ")"
	}
	fmt.Fprintf(&b, "profile: %s\n", prof)
	b.WriteString("candidates:\n")
	for _, c := range s.Candidates {
		p := c.Profile
		if p == "" {
			p = "no profile"
		}
		fmt.Fprintf(&b, "  %s [%s]: %s", c.Model, p, c.State)
		if c.State != "ok" {
			if !c.Until.IsZero() {
				fmt.Fprintf(&b, " until %s", ts(c.Until, s.Now))
			}
			if c.Reason != "" {
				fmt.Fprintf(&b, " (%s)", c.Reason)
			}
			if !c.Recovery.IsZero() {
				fmt.Fprintf(&b, ", provider says recovery at %s", ts(c.Recovery, s.Now))
			}
		}
		b.WriteByte('\n')
	}
	last := "never"
	if !s.LastProbe.IsZero() {
		last = ts(s.LastProbe, s.Now)
	}
	next := "-"
	if !s.NextProbe.IsZero() {
		next = ts(s.NextProbe, s.Now)
	}
	fmt.Fprintf(&b, "primary probe: last %s, next %s\n", last, next)
	fmt.Fprintf(&b, "session: %d paid calls, %d input + %d output tokens, %d turn(s) in history, %d compaction(s)",
		s.PaidCalls, s.InputTokens, s.OutputTokens, s.HistoryTurns, s.Compactions)
	return b.String()
}
