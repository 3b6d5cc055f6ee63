package detour

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The docs link to each other by file and heading; the manifests, the example
// configuration and the unit file point into them. Each of those links must
// land: on a file of the repository and, with an anchor, on a heading of that
// file as GitHub names it. The files are read from the repository itself.

// repoURL is the repository's address: a link to it (the unit file's
// Documentation=, a CHANGELOG reference) is checked like a relative one.
const repoURL = "https://github.com/detourbot/detour"

// linkedFiles are the files whose links are checked: the Markdown docs and the
// files a person reads beside them.
func linkedFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "BENCHMARKS.md", "config.example.yaml", "packaging/detour.service"}
	for _, glob := range []string{"docs/*.md", "slack-manifest*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	// inline links and images: [text](target "title"); reference definitions: [x]: target
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// in YAML comments and unit files: a path of the repository to a Markdown
	// file, with or without an anchor, or the repository's address.
	plainRef = regexp.MustCompile(`(?:` + regexp.QuoteMeta(repoURL) + `[^\s)"'>]*|\b(?:[\w.-]+/)*[\w.-]+\.md(?:#[\w-]+)?)`)
	// a section named by words instead of a link: `README "Console"`, `README (## Slack)`
	namedSection = regexp.MustCompile(`\bREADME\s*(?:\(|"|,|§)`)
)

// slug is GitHub's anchor for a heading's text: lower case, the Markdown of
// the heading taken out, every character but letters, digits, spaces, hyphens
// and underscores dropped, spaces made hyphens.
func slug(heading string) string {
	h := regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1") // a link counts by its text
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	h = regexp.MustCompile(`<[^>]+>`).ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors returns every anchor of a Markdown text: its headings' slugs (a
// repeated one numbered -1, -2, ... as GitHub does) and its HTML anchors.
// Headings inside code fences are none.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[2])
		if n := seen[s]; n > 0 {
			out[s+"-"+itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + itoa(n%10)
}

// markdownLinks returns the link targets of a Markdown text, outside code
// fences and code spans.
func markdownLinks(md string) []string {
	var out []string
	inFence := false
	for _, line := range strings.Split(md, "\n") {
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// TestDocs_LinksResolve: every relative link and anchor of the docs, the
// manifests, the example configuration and the unit file lands on a file and a
// heading; none names a README section in words (they moved to docs/).
func TestDocs_LinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, bool) {
		if a, ok := cache[path]; ok {
			return a, true
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, false
		}
		cache[path] = anchors(string(b))
		return cache[path], true
	}
	checked := 0
	for _, file := range linkedFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		var targets []string
		base := filepath.Dir(file)
		if strings.HasSuffix(file, ".md") {
			targets = markdownLinks(text)
			for _, line := range strings.Split(codeSpan.ReplaceAllString(stripLinks(text), ""), "\n") {
				if namedSection.MatchString(line) {
					t.Errorf("%s names a README section in words, not by a link that can be checked: %q", file, strings.TrimSpace(line))
				}
			}
		} else {
			for _, line := range strings.Split(text, "\n") {
				if namedSection.MatchString(line) {
					t.Errorf("%s names a README section in words, not by a link that can be checked: %q", file, strings.TrimSpace(line))
				}
				targets = append(targets, plainRef.FindAllString(line, -1)...)
			}
			base = "." // paths in comments are written from the repository's root
		}
		for _, target := range targets {
			path, anchor, local := resolve(base, target)
			if !local {
				continue
			}
			checked++
			if path == "" {
				path = file
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s links %q: no file %s", file, target, path)
				continue
			}
			if anchor == "" || info.IsDir() || !strings.HasSuffix(path, ".md") {
				continue
			}
			a, _ := anchorsOf(path)
			if !a[anchor] {
				t.Errorf("%s links %q: %s has no heading with the anchor #%s", file, target, path, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links checked: the walk missed the docs", checked)
	}
}

// stripLinks drops the links of a Markdown text: a README section named
// inside a link's text is a link.
func stripLinks(md string) string {
	return regexp.MustCompile(`\[[^\]]*\]\([^)]*\)`).ReplaceAllString(md, "")
}

// resolve splits a link target into the repository path it names (relative to
// base; "" = the linking file itself) and its anchor; local is false for
// links off the repository (other sites, mail).
func resolve(base, target string) (path, anchor string, local bool) {
	if rest, ok := strings.CutPrefix(target, repoURL); ok {
		switch {
		case rest == "" || strings.HasPrefix(rest, "#"):
			rest = "/README.md" + rest // the repository's page shows its README
		case strings.HasPrefix(rest, "/blob/") || strings.HasPrefix(rest, "/tree/"):
			parts := strings.SplitN(rest, "/", 4) // "", blob, ref, path
			if len(parts) < 4 {
				return "", "", false
			}
			rest = "/" + parts[3]
		default:
			return "", "", false // releases, compare, issues: not files (TestDocs_ChangelogLinks)
		}
		base, target = ".", strings.TrimPrefix(rest, "/")
	}
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "//") {
		return "", "", false
	}
	path, anchor, _ = strings.Cut(target, "#")
	if path != "" {
		path = filepath.Join(base, path)
	}
	return path, anchor, true
}

// The slug rules, on headings this repository has.
func TestDocs_Slug(t *testing.T) {
	for h, want := range map[string]string{
		"Running it as a service":                                        "running-it-as-a-service",
		"1. Create the app from the manifest":                            "1-create-the-app-from-the-manifest",
		"Rehearsing a config against the fake provider (`bot fake-llm`)": "rehearsing-a-config-against-the-fake-provider-bot-fake-llm",
		"Busy workspaces (mention-only mode)":                            "busy-workspaces-mention-only-mode",
		"15. Conversations as teams have them (H1-H4, I1-I5, U1-U5)":     "15-conversations-as-teams-have-them-h1-h4-i1-i5-u1-u5",
		"Drills: rehearse provider failures before they happen":          "drills-rehearse-provider-failures-before-they-happen",
		"[0.1.0] - 2026-12-02":                                           "010---2026-12-02",
		"Licence and versions":                                           "licence-and-versions",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
	a := anchors("# A\n```\n# not a heading\n```\n## A\n<a name=\"x\"></a>\n")
	if !a["a"] || !a["a-1"] || a["not-a-heading"] || !a["x"] {
		t.Errorf("anchors = %v", a)
	}
	if got := markdownLinks("see [a](b.md#c) and `[x](y.md)`\n```\n[z](w.md)\n```\n[r]: docs/x.md \"t\"\n"); !slices.Equal(got, []string{"b.md#c", "docs/x.md"}) {
		t.Errorf("markdownLinks = %q", got)
	}
}

// TestDocs_ChangelogLinks: the CHANGELOG's version links name what exists: a
// tag or a commit of the repository (0.1.0 was never tagged, so its link is
// its commit). It needs the repository's history; a clone without it (an
// archive, a shallow clone) skips.
func TestDocs_ChangelogLinks(t *testing.T) {
	b, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, line := range strings.Split(string(b), "\n") {
		m := refDef.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rest, ok := strings.CutPrefix(m[1], repoURL+"/")
		if !ok {
			continue
		}
		kind, what, _ := strings.Cut(rest, "/")
		switch kind {
		case "compare":
			from, to, _ := strings.Cut(what, "...")
			refs = append(refs, from, to)
		case "tree", "commit":
			refs = append(refs, what)
		case "releases":
			refs = append(refs, strings.TrimPrefix(what, "tag/"))
		default:
			t.Errorf("CHANGELOG links %s: not a version", m[1])
		}
	}
	if len(refs) == 0 {
		t.Fatal("no version links in CHANGELOG.md")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git to read the history with")
	}
	if out, err := exec.Command(git, "rev-parse", "--is-shallow-repository").Output(); err != nil || strings.TrimSpace(string(out)) != "false" {
		t.Skip("not a clone with its whole history")
	}
	for _, ref := range refs {
		if ref == "HEAD" {
			continue
		}
		if err := exec.Command(git, "rev-parse", "--verify", "--quiet", ref+"^{commit}").Run(); err != nil {
			t.Errorf("CHANGELOG links %q, which is neither a tag nor a commit of the repository", ref)
		}
	}
}
