package failover

import (
	"sort"
	"strings"
)

// phraseIndex finds, in one pass over the text, which phrase lists of
// phraseTable have a phrase in it. Phrases are bucketed by a hash of their first
// three bytes;
// each text position looks up its bucket and compares the few candidates. This
// replaces hundreds of strings.Contains calls per Classify (performance target:
// under 20 µs per call).
type phraseIndex struct {
	start   []uint32 // 65537 offsets into entries, by hashed 3-byte key
	entries []phraseEntry
	// used has bit k set when bucket k is not empty: an 8 KB bitmap stays in
	// cache, where the 256 KB start table would not.
	used [65536 / 64]uint64
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
			if len(p) < 3 || p != strings.ToLower(p) {
				panic("failover: phrase must be lower-case and 3+ bytes: " + p)
			}
			es = append(es, phraseEntry{p, uint8(c)})
		}
	}
	sort.SliceStable(es, func(i, j int) bool { return key3(es[i].s, 0) < key3(es[j].s, 0) })
	ix := &phraseIndex{start: make([]uint32, 65537), entries: es}
	for _, e := range es {
		k := key3(e.s, 0)
		ix.start[k+1]++
		ix.used[k>>6] |= 1 << (k & 63)
	}
	for k := 1; k <= 65536; k++ {
		ix.start[k] += ix.start[k-1]
	}
	return ix
}

// mask returns bit c set when some phrase of list c occurs in t.
func (ix *phraseIndex) mask(t string) uint64 {
	var m uint64
	for i := 0; i+2 < len(t); i++ {
		k := key3(t, i)
		if ix.used[k>>6]&(1<<(k&63)) == 0 {
			continue
		}
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

// key3 hashes the three bytes at t[i:] to 16 bits.
func key3(t string, i int) int {
	v := uint32(t[i])<<16 | uint32(t[i+1])<<8 | uint32(t[i+2])
	return int((v * 2654435761) >> 16)
}

// hit reports whether list c of phraseTable matched.
func hit(m uint64, c int) bool { return m&(1<<uint(c)) != 0 }
