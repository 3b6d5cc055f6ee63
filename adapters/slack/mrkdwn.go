package slack

import (
	"regexp"
	"strconv"
	"strings"
)

// Slack message limits: chat.postMessage truncates text beyond 40,000 characters and
// Slack advises staying under 4,000 per message; a section block holds 3,000 and a
// context element 2,000. Replies are split at maxChunk characters.
const (
	maxChunk       = 3900
	maxContextText = 2000
)

var (
	reHeading  = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	reBullet   = regexp.MustCompile(`^(\s*)[*+-]\s+(.*)$`)
	reRule     = regexp.MustCompile(`^\s{0,3}(?:(?:-\s*){3,}|(?:\*\s*){3,}|(?:_\s*){3,})$`)
	reQuote    = regexp.MustCompile(`^(\s*(?:>\s?)+)(.*)$`)
	reLink     = regexp.MustCompile(`!?\[([^\]\n]+)\]\(\s*(\S+?)(?:\s+"[^"]*")?\s*\)`)
	reAutoLink = regexp.MustCompile(`(?i)&lt;((?:https?://|mailto:)[^\s&\x01]+)&gt;`)
	reBoldStar = regexp.MustCompile(`\*\*(\S(?:.*?\S)?)\*\*`)
	reBoldUnd  = regexp.MustCompile(`(^|[^\w])__(\S(?:.*?\S)?)__([^\w]|$)`)
	reItalic   = regexp.MustCompile(`(^|[^\w*])\*(\S(?:[^*]*?\S)?)\*([^\w*]|$)`)
	reStrike   = regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`)
	reToken    = regexp.MustCompile("\x01(\\d+)\x01")
)

// Private markers: "\x01N\x01" is link N, boldOpen and boldClose enclose bold.
const (
	boldOpen  = "\x02"
	boldClose = "\x03"
)

var (
	sentinels        = strings.NewReplacer("\x01", "", boldOpen, "", boldClose, "") // input cannot forge a marker
	boldReplacer     = strings.NewReplacer(boldOpen, "*", boldClose, "*")
	boldStripper     = strings.NewReplacer("**", "", "__", "")
	linkTextReplacer = strings.NewReplacer("**", "", "__", "", "|", "¦")
)

// tokenize replaces every match of re in s with a link token and appends
// render(s, match) to links, out of later rules' reach.
func tokenize(s string, re *regexp.Regexp, links []string, render func(string, []int) string) (string, []string) {
	ms := re.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s, links
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		b.WriteString(s[last:m[0]])
		links = append(links, render(s, m))
		b.WriteString("\x01" + strconv.Itoa(len(links)-1) + "\x01")
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String(), links
}

var (
	// escapeMrkdwn escapes the characters Slack reserves for control sequences;
	// unescapeSlack reads them back.
	escapeMrkdwn  = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	unescapeSlack = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace
)

func isFence(line string) bool {
	t := strings.TrimLeft(line, " \t")
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

// ToMrkdwn converts the Markdown an LLM writes into Slack mrkdwn: **bold** and
// __bold__ become *bold*, *italic* _italic_, ~~strike~~ ~strike~, [text](url)
// <url|text>, headings bold lines, "* item" "• item", and &, <, > are escaped.
// Code keeps its content (escaped only); a fence's language tag is dropped, as
// Slack would print it.
//
// Nothing it returns can ping (T3): the only "<" it writes opens a link to an
// http(s) or mailto URL, so <!here>, <@U…> and the like never appear live; a
// link to anything else, such as [x](!channel), is plain text: "x (!channel)".
func ToMrkdwn(md string) string {
	md = sentinels.Replace(strings.ToValidUTF8(md, "\uFFFD"))
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	out := make([]string, 0, len(lines))
	inFence := false
	for _, line := range lines {
		if isFence(line) {
			inFence = !inFence
			out = append(out, "```")
			continue
		}
		if inFence {
			out = append(out, escapeMrkdwn(line))
			continue
		}
		out = append(out, convertLine(line))
	}
	return strings.Join(out, "\n")
}

func convertLine(line string) string {
	lead := strings.TrimLeft(line, " \t")
	if lead == "" {
		return line
	}
	switch lead[0] {
	case '#', '-', '*', '_', '+', '>':
	default:
		return inline(line)
	}
	if m := reHeading.FindStringSubmatch(line); m != nil {
		title := boldStripper.Replace(m[1])
		if title == "" {
			return ""
		}
		return "*" + inline(title) + "*"
	}
	if reRule.MatchString(line) {
		return "──────────"
	}
	if m := reQuote.FindStringSubmatch(line); m != nil {
		return strings.ReplaceAll(m[1], " ", "") + " " + inline(m[2])
	}
	if m := reBullet.FindStringSubmatch(line); m != nil {
		return m[1] + "• " + inline(m[2])
	}
	return inline(line)
}

// inline converts one line outside code blocks, leaving `code` spans alone.
func inline(line string) string {
	var b strings.Builder
	for {
		i, j := strings.IndexByte(line, '`'), -1
		if i >= 0 {
			j = strings.IndexByte(line[i+1:], '`')
		}
		if j < 0 {
			b.WriteString(inlineText(line))
			return b.String()
		}
		b.WriteString(inlineText(line[:i]))
		b.WriteString("`" + escapeMrkdwn(line[i+1:i+1+j]) + "`")
		line = line[i+2+j:]
	}
}

func inlineText(s string) string {
	if s == "" {
		return s
	}
	s = escapeMrkdwn(s)
	if !strings.ContainsAny(s, "*_~[") && !strings.Contains(s, "&lt;") {
		return s
	}
	// Links become opaque tokens so emphasis rules cannot touch URLs.
	var links []string
	if strings.Contains(s, "](") {
		s, links = tokenize(s, reLink, links, func(s string, m []int) string {
			text, target := linkTextReplacer.Replace(s[m[2]:m[3]]), s[m[4]:m[5]]
			if u, ok := linkURL(target); ok {
				return "<" + u + "|" + text + ">"
			}
			if text == target {
				return text
			}
			return text + " (" + target + ")"
		})
	}
	if strings.Contains(s, "&lt;") {
		s, links = tokenize(s, reAutoLink, links, func(s string, m []int) string {
			u, _ := linkURL(s[m[2]:m[3]])
			return "<" + u + ">"
		})
	}
	bold := false
	if strings.Contains(s, "**") {
		s = reBoldStar.ReplaceAllString(s, boldOpen+"$1"+boldClose)
		bold = true
	}
	if strings.Contains(s, "__") {
		s = reBoldUnd.ReplaceAllString(s, "${1}"+boldOpen+"${2}"+boldClose+"${3}")
		bold = true
	}
	if strings.IndexByte(s, '*') >= 0 {
		s = reItalic.ReplaceAllString(s, "${1}_${2}_${3}")
	}
	if strings.Contains(s, "~~") {
		s = reStrike.ReplaceAllString(s, "~$1~")
	}
	if bold {
		s = boldReplacer.Replace(s)
	}
	if len(links) > 0 {
		s = reToken.ReplaceAllStringFunc(s, func(m string) string {
			n, err := strconv.Atoi(strings.Trim(m, "\x01"))
			if err != nil || n < 0 || n >= len(links) {
				return m
			}
			return links[n]
		})
	}
	return s
}

// linkURL returns a link's escaped target as the URL of a Slack link, and whether
// it may be one: only http(s) and mailto (T3). "|" would end the URL in
// <url|text>, so it is percent-encoded.
func linkURL(target string) (string, bool) {
	raw := strings.ToLower(unescapeSlack(target))
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(raw, scheme) && len(raw) > len(scheme) {
			return strings.ReplaceAll(target, "|", "%7C"), true
		}
	}
	return "", false
}
