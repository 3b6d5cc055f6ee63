package classify

import (
	"regexp"
	"strings"
	"sync"
)

// lazyRE is a regular expression compiled on its first use, once, safely for
// concurrent first use: a bot that never sees a failure never compiles one
// (package initialisation allocates next to nothing; BENCHMARKS.md).
type lazyRE struct {
	src  string // as written; "~" is a gap (see gap) when gaps is set
	gaps bool
	once sync.Once
	re   *regexp.Regexp
}

// rx is a pattern in which "~" stands for a gap inside one sentence.
func rx(p string) *lazyRE { return &lazyRE{src: p, gaps: true} }

// lazy is a plain pattern.
func lazy(p string) *lazyRE { return &lazyRE{src: p} }

// get compiles the pattern on first use.
func (l *lazyRE) get() *regexp.Regexp {
	l.once.Do(func() {
		src := l.src
		if l.gaps {
			src = strings.ReplaceAll(src, "~", gap)
		}
		l.re = regexp.MustCompile(src)
	})
	return l.re
}

// String is the pattern as written, for building larger ones.
func (l *lazyRE) String() string { return l.src }

// The methods of regexp.Regexp that classify calls, on the compiled pattern.
func (l *lazyRE) MatchString(s string) bool              { return l.get().MatchString(s) }
func (l *lazyRE) FindStringSubmatch(s string) []string   { return l.get().FindStringSubmatch(s) }
func (l *lazyRE) FindStringSubmatchIndex(s string) []int { return l.get().FindStringSubmatchIndex(s) }
