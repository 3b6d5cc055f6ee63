package adapters

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// fence opens and closes a Markdown code block.
const fence = "```"

// Split cuts text into chunks that each fit one chat message of at most limit
// units, as counted by length (runes for Slack, UTF-16 code units for Discord). It
// cuts at a paragraph break in the second half of a chunk when there is one, else
// at a line end, else at a space inside an over-long line, and mid-word only as a
// last resort; it never splits a rune. A chunk that ends inside a code block is
// closed with ``` and the next one reopens it with the same fence line (language
// included), so every chunk renders on its own. Blank text gives no chunk.
func Split(text string, limit int, length func(string) int) []string {
	limit = max(limit, 16)
	text = strings.TrimRight(text, " \t\n")
	if strings.TrimSpace(text) == "" {
		return nil
	}
	if length(text) <= limit {
		return []string{text}
	}
	s := splitter{limit: limit, length: length}
	for _, line := range strings.Split(text, "\n") {
		s.add(line)
	}
	s.open = "" // an unbalanced block stays as written
	s.flush(len(s.cur))
	return s.chunks
}

type splitLine struct {
	s         string
	openAfter string // the open fence line after this line, "" outside code
	body      bool   // false for a reopened fence line
}

type splitter struct {
	limit  int
	length func(string) int
	chunks []string
	cur    []splitLine
	size   int    // units of cur joined with "\n"
	open   string // the open fence line at the end of cur
}

// add appends one line, flushing chunks as they fill.
func (s *splitter) add(line string) {
	for {
		open := s.open
		if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) {
			if open == "" {
				open = t
			} else {
				open = ""
			}
		}
		sep := min(len(s.cur), 1)
		reserve := 0 // room to close a block still open after this line
		if open != "" {
			reserve = len(fence) + 1
		}
		fits := s.size+sep+s.length(line)+reserve <= s.limit
		if !fits && s.hasBody() {
			s.flush(s.paragraphCut())
			continue
		}
		// A line alone longer than a chunk: take what fits (a fence it opens
		// or closes takes effect with its head) and go on with the rest.
		head := line
		if !fits {
			head = cutAt(line, s.limit-s.size-sep-reserve, s.length)
		}
		s.push(splitLine{s: head, openAfter: open, body: true})
		s.open = open
		if fits {
			return
		}
		line = line[len(head):]
		s.flush(len(s.cur))
	}
}

// hasBody reports whether cur holds more than a reopened fence line.
func (s *splitter) hasBody() bool {
	return slices.ContainsFunc(s.cur, func(l splitLine) bool { return l.body })
}

// push appends l to cur.
func (s *splitter) push(l splitLine) {
	if len(s.cur) > 0 {
		s.size++
	}
	s.cur = append(s.cur, l)
	s.size += s.length(l.s)
}

// paragraphCut is where to end the chunk: at the last blank line outside code in
// the chunk's second half, else after every line held.
func (s *splitter) paragraphCut() int {
	size := s.size
	for i := len(s.cur) - 1; i > 0; i-- {
		size -= s.length(s.cur[i].s) + 1
		if strings.TrimSpace(s.cur[i].s) == "" && s.cur[i].openAfter == "" && size >= s.limit/2 {
			return i
		}
	}
	return len(s.cur)
}

// flush emits cur[:cut] as a chunk (closing an open block) and keeps the rest,
// after a reopened fence line when the cut falls inside a block.
func (s *splitter) flush(cut int) {
	if cut == 0 {
		return
	}
	open := s.cur[cut-1].openAfter
	if cut == len(s.cur) {
		open = s.open
	}
	parts := make([]string, 0, cut+1)
	for _, l := range s.cur[:cut] {
		parts = append(parts, l.s)
	}
	if open != "" {
		parts = append(parts, fence)
	}
	chunk := strings.TrimRight(strings.Trim(strings.Join(parts, "\n"), "\n"), " \t\n")
	if strings.TrimSpace(chunk) != "" && chunk != fence+"\n"+fence {
		s.chunks = append(s.chunks, chunk)
	}
	rest := s.cur[min(cut+1, len(s.cur)):] // a paragraph cut drops its blank line
	s.cur, s.size = nil, 0
	if open != "" {
		reopen := open
		if s.length(reopen)+1+len(fence)+1 > s.limit/2 {
			reopen = fence // a fence line too long to repeat
		}
		s.push(splitLine{s: reopen, openAfter: open})
	}
	for _, l := range rest {
		s.push(l)
	}
}

// cutAt returns the longest prefix of line within max units, ending after a space
// in its second half where there is one; it never splits a rune and always takes
// at least one.
func cutAt(line string, max int, length func(string) int) string {
	n, end := 0, 0
	for i, r := range line {
		w := length(string(r))
		if n+w > max {
			break
		}
		n += w
		_, size := utf8.DecodeRuneInString(line[i:]) // 1 for a byte of invalid UTF-8
		end = i + size
	}
	if end == 0 {
		_, size := utf8.DecodeRuneInString(line)
		return line[:size]
	}
	if space := strings.LastIndexByte(line[:end], ' ') + 1; space > end/2 && end < len(line) {
		return line[:space]
	}
	return line[:end]
}
