package failover

import (
	"sort"
	"strings"
)

// phraseIndex finds, in one pass over the text, which phrase lists of
// phraseTable have a phrase in it. Phrases are bucketed by their first two bytes;
// each text position looks up its bucket and compares the few candidates. This
// replaces hundreds of strings.Contains calls per Classify (performance target:
// under 20 µs per call).
type phraseIndex struct {
	start   []uint32 // 65537 offsets into entries, by 2-byte key
	entries []phraseEntry
}

type phraseEntry struct {
	s   string
	cat uint8
}

var phrases = buildPhraseIndex(phraseTable)

func buildPhraseIndex(table [][]string) *phraseIndex {
	if len(table) > 64 {
		panic("failover: more than 64 phrase lists")
	}
	var es []phraseEntry
	for c, list := range table {
		for _, p := range list {
			if len(p) < 2 || p != strings.ToLower(p) {
				panic("failover: phrase must be lower-case and 2+ bytes: " + p)
			}
			es = append(es, phraseEntry{p, uint8(c)})
		}
	}
	key := func(s string) int { return int(s[0])<<8 | int(s[1]) }
	sort.SliceStable(es, func(i, j int) bool { return key(es[i].s) < key(es[j].s) })
	ix := &phraseIndex{start: make([]uint32, 65537), entries: es}
	for _, e := range es {
		ix.start[key(e.s)+1]++
	}
	for k := 1; k <= 65536; k++ {
		ix.start[k] += ix.start[k-1]
	}
	return ix
}

// mask returns bit c set when some phrase of list c occurs in t.
func (ix *phraseIndex) mask(t string) uint64 {
	var m uint64
	for i := 0; i+1 < len(t); i++ {
		k := int(t[i])<<8 | int(t[i+1])
		lo, hi := ix.start[k], ix.start[k+1]
		for j := lo; j < hi; j++ {
			e := &ix.entries[j]
			if m&(1<<e.cat) != 0 {
				continue
			}
			if strings.HasPrefix(t[i:], e.s) {
				m |= 1 << e.cat
			}
		}
	}
	return m
}

// hit reports whether list c of phraseTable matched.
func hit(m uint64, c int) bool { return m&(1<<uint(c)) != 0 }
