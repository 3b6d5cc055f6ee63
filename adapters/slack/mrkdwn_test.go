package slack

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/detourbot/detour/adapters"
)

func TestToMrkdwn(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"bold", "**bold** text", "*bold* text"},
		{"bold underscores", "a __strong__ b", "a *strong* b"},
		{"italic star", "an *italic* word", "an _italic_ word"},
		{"italic underscore kept", "an _italic_ word", "an _italic_ word"},
		{"bold and italic", "**b** and *i*", "*b* and _i_"},
		{"strike", "~~gone~~", "~gone~"},
		{"link", "see [the docs](https://example.com/a?b=1&c=2)", "see <https://example.com/a?b=1&amp;c=2|the docs>"},
		{"link with bold text", "[**x**](http://e.com)", "<http://e.com|x>"},
		{"image", "![logo](http://e.com/l.png)", "<http://e.com/l.png|logo>"},
		{"autolink", "<https://e.com>", "<https://e.com>"},
		{"url with stars untouched", "[a](http://e.com/*x*)", "<http://e.com/*x*|a>"},
		{"h1", "# Title", "*Title*"},
		{"h3 with bold", "### **Big** deal ###", "*Big deal*"},
		{"bullet star", "* item one", "• item one"},
		{"bullet dash nested", "  - sub", "  • sub"},
		{"numbered kept", "1. first", "1. first"},
		{"escape", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"quote", "> quoted **x**", "> quoted *x*"},
		{"rule", "---", "──────────"},
		{"inline code untouched", "use `**not bold**` and `a<b`", "use `**not bold**` and `a&lt;b`"},
		{"unmatched backtick", "it`s **ok**", "it`s *ok*"},
		{"snake_case kept", "call my_func_name now", "call my_func_name now"},
		{"multiplication kept", "2 * 3 * 4", "2 * 3 * 4"},
		{"code block", "```go\nx := **y** <z>\n```\n**after**", "```\nx := **y** &lt;z&gt;\n```\n*after*"},
		{"tilde fence", "~~~\n# not heading\n~~~", "```\n# not heading\n```"},
		{"crlf", "**a**\r\n**b**", "*a*\n*b*"},
		{"empty", "", ""},
		{"notice passes", "↪️ model fallback: a/b (selected c/d; billing)", "↪️ model fallback: a/b (selected c/d; billing)"},
		{"mailto link", "[mail](mailto:a@b.c)", "<mailto:a@b.c|mail>"},
		{"mailto autolink", "<mailto:a@b.c>", "<mailto:a@b.c>"},
		{"pipe in url encoded", "[x](https://e.com/a|b)", "<https://e.com/a%7Cb|x>"},
		{"uppercase scheme", "[x](HTTPS://e.com)", "<HTTPS://e.com|x>"},
		{"bare scheme is no link", "[x](https://)", "x (https://)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ToMrkdwn(c.in); got != c.want {
				t.Fatalf("ToMrkdwn(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

// covers T3: hostile model output never becomes a live mention, and real links
// still render.
func TestToMrkdwn_T3_NoLiveMention(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"channel link", "[x](!channel)", "x (!channel)"},
		{"here link", "[everyone](!here)", "everyone (!here)"},
		{"user link", "[y](@U123)", "y (@U123)"},
		{"subteam link", "[team](!subteam^S1)", "team (!subteam^S1)"},
		{"channel ref link", "[c](#C123)", "c (#C123)"},
		{"javascript link", "[x](javascript:alert(1))", "x (javascript:alert(1))"},
		{"slack-escaped target", "[x](&lt;!channel&gt;)", "x (&amp;lt;!channel&amp;gt;)"},
		{"raw here", "<!here>", "&lt;!here&gt;"},
		{"raw channel with label", "<!channel|all>", "&lt;!channel|all&gt;"},
		{"raw user", "<@U123>", "&lt;@U123&gt;"},
		{"raw subteam", "<!subteam^S1>", "&lt;!subteam^S1&gt;"},
		{"bare subteam", "!subteam^S1", "!subteam^S1"},
		{"everyone text", "@everyone @here @channel", "@everyone @here @channel"},
		{"discord role", "<@&123>", "&lt;@&amp;123&gt;"},
		{"mention inside link text", "[<!here>](https://e.com)", "<https://e.com|&lt;!here&gt;>"},
		{"mention inside url", "[x](https://e.com/<!here>)", "<https://e.com/&lt;!here&gt;|x>"},
		{"pipe smuggles label", "[x](https://e.com|<@U1>)", "<https://e.com%7C&lt;@U1&gt;|x>"},
		{"autolink with label", "<https://e.com|<!here>>", "&lt;https://e.com|&lt;!here&gt;&gt;"},
		{"sentinel bytes dropped", "\x010\x01 [a](https://e.com)", "0 <https://e.com|a>"},
		{"in code", "`<!here>` and ```\n<@U1>\n```", "`&lt;!here&gt;` and ```\n&lt;@U1&gt;\n```"},
		{"real link kept", "see [docs](https://e.com/x) and <https://e.com/y>", "see <https://e.com/x|docs> and <https://e.com/y>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ToMrkdwn(c.in)
			if got != c.want {
				t.Fatalf("ToMrkdwn(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
			if bad := unsafeOpeners(got); len(bad) > 0 {
				t.Fatalf("live control sequences %q in %q", bad, got)
			}
		})
	}
}

// unsafeOpeners returns every "<" sequence of s that does not open an http(s) or
// mailto link: what Slack could render as a mention (<!…>, <@…>, <#…>) or any other
// control sequence.
func unsafeOpeners(s string) []string {
	var bad []string
	for i := 0; i < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		rest := strings.ToLower(s[i:])
		if strings.HasPrefix(rest, "<http://") || strings.HasPrefix(rest, "<https://") || strings.HasPrefix(rest, "<mailto:") {
			continue
		}
		bad = append(bad, s[i:min(len(s), i+12)])
	}
	return bad
}

// FuzzToMrkdwn_T3_NoLiveMention: for any input, no output (nor any chunk of it)
// holds a "<" that does not open an http(s)/mailto link, so nothing the formatter
// writes can be a live <!…>, <@…> or <#…>. Seed corpus: testdata/fuzz. covers T3
func FuzzToMrkdwn_T3_NoLiveMention(f *testing.F) {
	for _, s := range []string{"[x](!channel)", "<!here>", "[y](@U123)", "!subteam^S1", "@everyone", "<@&123>",
		"[a](https://e.com|<!here>)", "<https://e.com|x>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := ToMrkdwn(s)
		if bad := unsafeOpeners(out); len(bad) > 0 {
			t.Fatalf("ToMrkdwn(%q) = %q holds %q", s, out, bad)
		}
		for _, c := range adapters.Split(out, 64, utf8.RuneCountInString) {
			if bad := unsafeOpeners(c); len(bad) > 0 {
				t.Fatalf("chunk %q holds %q", c, bad)
			}
		}
	})
}

func FuzzToMrkdwnAndSplit(f *testing.F) {
	f.Add("**a** [b](http://c) `d` ```\ne\n```")
	f.Add("# h\n* i\n> q\n~~s~~")
	f.Fuzz(func(t *testing.T, s string) {
		out := ToMrkdwn(s)
		for _, c := range adapters.Split(out, 64, utf8.RuneCountInString) {
			if utf8.RuneCountInString(c) > 64 {
				t.Fatalf("chunk too long: %q", c)
			}
		}
	})
}
