// Package commands parses the chat commands detour understands on every channel
// (/model, /models, /new, /reset, /compact, /status, /usage, /recover, /help) and renders their
// texts (help, usage, the model list, /status) in plain words. Running a command against a session is the sessions
// router's job; this package is pure and never panics on any input (fuzzed).
package commands

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name is a command name without its prefix.
type Name string

// Known commands.
const (
	CmdModel   Name = "model"
	CmdModels  Name = "models" // the models people can choose (also "/model list")
	CmdNew     Name = "new"
	CmdReset   Name = "reset"
	CmdCompact Name = "compact" // R17: summarise the conversation now
	CmdStatus  Name = "status"
	CmdUsage   Name = "usage" // U3, U4: paid calls, tokens and cost
	CmdRecover Name = "recover"
	CmdHelp    Name = "help"
)

// Names lists the known commands in help order.
var Names = []Name{CmdModel, CmdModels, CmdNew, CmdReset, CmdCompact, CmdStatus, CmdUsage, CmdRecover, CmdHelp}

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
	Alias   string // /model, /new: a name without "/" (a model alias such as "fast"), for the router to resolve
	Profile string // /model provider/model@profile: the profile id ("provider:name"); /recover: a profile id
	Default bool   // /model default: clear the user's choice
	List    bool   // /models, /model list: list the models people can choose
	All     bool   // /usage all: everyone's usage (admins)
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
		c.Ref, c.Alias, c.Profile, c.Default, c.List, c.All = "", "", "", false, false, false
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
	CmdModel:   "/model [provider/model[@profile] | alias | default | list]",
	CmdModels:  "/models",
	CmdNew:     "/new [provider/model | alias]",
	CmdReset:   "/reset",
	CmdCompact: "/compact",
	CmdStatus:  "/status",
	CmdUsage:   "/usage [all]",
	CmdRecover: "/recover <provider/model | profile-id>",
	CmdHelp:    "/help",
}

// ValidRef reports whether ref looks like "provider/model" (split on the first '/').
func ValidRef(ref string) bool {
	i := strings.IndexByte(ref, '/')
	return i > 0 && i < len(ref)-1 && plainName(ref)
}

// maxAliasLen bounds a model alias.
const maxAliasLen = 64

// ValidAlias reports whether a looks like a model alias: letters, digits, '-',
// '_' or '.', starting with a letter or digit, without '/' (so it never reads as
// a model) and not one of the words /model itself uses (default, list).
func ValidAlias(a string) bool {
	if a == "" || len(a) > maxAliasLen || strings.EqualFold(a, "default") || strings.EqualFold(a, "list") {
		return false
	}
	for i, r := range a {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case (r == '-' || r == '_' || r == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}

// modelArg reads a /model or /new argument without its @profile: a model ref or
// an alias; it returns an answer saying what would work when it is neither.
func (c *Command) modelArg(a, usage string) string {
	switch {
	case ValidRef(a):
		c.Ref = a
	case ValidAlias(a):
		c.Alias = a
	default:
		return fmt.Sprintf("%q is not a model (provider/model) or a model alias; /models lists them; %s", shorten(a), usage)
	}
	return ""
}

// shorten keeps what a command echoes back short: a pasted page is not repeated.
func shorten(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
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
		switch {
		case strings.EqualFold(a, "default"):
			c.Default = true
			return ""
		case strings.EqualFold(a, "list"):
			c.List = true
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
				p, _, ok := strings.Cut(ref, "/")
				if !ok {
					return fmt.Sprintf("after a model alias, write the whole profile id: %s@<provider>:%s; %s", ref, c.Profile, usage)
				}
				c.Profile = p + ":" + c.Profile
			}
			if !ValidProfileID(c.Profile) {
				return fmt.Sprintf("%q is not a profile id (provider:name); %s", c.Profile, usage)
			}
		}
		if msg := c.modelArg(ref, usage); msg != "" {
			return msg
		}
		if c.Ref != "" && c.Profile != "" && !strings.HasPrefix(c.Profile, ref[:strings.IndexByte(ref, '/')]+":") {
			return fmt.Sprintf("profile %s does not belong to provider %s", c.Profile, ref[:strings.IndexByte(ref, '/')])
		}
	case CmdModels:
		if len(c.Args) != 0 {
			return usage
		}
		c.List = true
	case CmdNew:
		switch len(c.Args) {
		case 0:
		case 1:
			return c.modelArg(c.Args[0], usage)
		default:
			return usage
		}
	case CmdReset, CmdStatus, CmdCompact:
		if len(c.Args) != 0 {
			return usage
		}
	case CmdUsage:
		switch {
		case len(c.Args) == 0:
		case len(c.Args) == 1 && strings.EqualFold(c.Args[0], "all"):
			c.All = true
		default:
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
		Usage[CmdModel] + " — show or choose this conversation's model (a model or its alias); default goes back to the configured one",
		Usage[CmdModels] + " — the models you can choose, with their aliases (also /model list)",
		Usage[CmdNew] + " — start a new conversation, optionally on a model",
		Usage[CmdReset] + " — start over: clear the conversation and every model choice",
		Usage[CmdCompact] + " — replace the conversation so far by a summary, to keep it short",
		Usage[CmdStatus] + " — which model answers and why, what is tried next, cooldowns, usage and cost",
		Usage[CmdUsage] + " — your paid calls, tokens and estimated cost today and this month; all: everyone's (admins)",
		Usage[CmdRecover] + " — admins: probe now and mark it available again on success",
		Usage[CmdHelp] + " — this text",
	}, "\n")
}

// MatchPattern reports whether the model ref s matches an
// agents.defaults.model.allow pattern p, where '*' is any run of characters
// ('/' included, so openrouter/* covers openrouter/meta-llama/llama-3-70b) and
// '?' one character; the whole ref must match.
func MatchPattern(p, s string) bool {
	// Iterative matching with one backtrack point: linear enough for model names.
	pi, si, star, mark := 0, 0, -1, 0
	pr, sr := []rune(p), []rune(s)
	for si < len(sr) {
		switch {
		case pi < len(pr) && (pr[pi] == '?' || pr[pi] == sr[si]):
			pi++
			si++
		case pi < len(pr) && pr[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi, mark = star+1, mark+1
			si = mark
		default:
			return false
		}
	}
	for pi < len(pr) && pr[pi] == '*' {
		pi++
	}
	return pi == len(pr)
}
