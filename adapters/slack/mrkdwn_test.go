package slack

import (
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
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ToMrkdwn(c.in); got != c.want {
				t.Fatalf("ToMrkdwn(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
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
