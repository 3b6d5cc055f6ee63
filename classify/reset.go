package classify

import (
	"errors"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxStatedWait bounds parsed waits so arithmetic never overflows; the engine
// applies its own (much smaller) cap (C11).
const maxStatedWait = 10 * 365 * 24 * time.Hour

// parseNumberOrDuration reads the forms that a whole reset text and a reset
// header both start with: a bare number (seconds to wait, or an epoch: see
// parseSecondsOrEpoch) or a Go duration from now.
func parseNumberOrDuration(s string, now time.Time) (time.Time, bool) {
	if t, ok := parseSecondsOrEpoch(s, now); ok {
		return t, true
	}
	if d, ok := parseGoDuration(s); ok {
		return now.Add(d), true
	}
	return time.Time{}, false
}

// parseSecondsOrEpoch reads a bare number: seconds to wait, or a Unix epoch in
// seconds (>= 1e9) or milliseconds (>= 1e12) from 2015 on.
func parseSecondsOrEpoch(s string, now time.Time) (time.Time, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return time.Time{}, false
	}
	// A Unix epoch counts only when it lands in a plausible era (2015 on), so a
	// small number is never read as a 1970s/2001 date.
	switch {
	case f >= 1e12 && f < 1e14:
		if t := time.UnixMilli(int64(f)).UTC(); t.Year() >= 2015 {
			return t, true
		}
		return time.Time{}, false
	case f >= 1e9 && f < 1e11:
		if t := time.Unix(int64(f), 0).UTC(); t.Year() >= 2015 {
			return t, true
		}
	}
	d, ok := secondsDuration(f)
	if !ok {
		return time.Time{}, false
	}
	return now.Add(d), true
}

func secondsDuration(f float64) (time.Duration, bool) {
	if math.IsNaN(f) || f < 0 || f > maxStatedWait.Seconds() {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// parseGoDuration accepts Go-style durations ("1m30s", "6ms", "18.642s") and
// rejects negatives and absurd values.
func parseGoDuration(s string) (time.Duration, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxStatedWait {
		return 0, false
	}
	return d, true
}

// zonePat is an optional zone after a time, captured without its parentheses: "z",
// "utc", "gmt", an offset ("+05:30", "gmt-3", "utc+8"), an unambiguous abbreviation
// ("pst", "cest", "ist") or an IANA name ("(pacific/auckland)", "etc/gmt+5").
const zonePat = `(?:\s*\(?((?:utc|gmt) ?[+-] ?\d{1,2}(?::?\d{2})?|[+-]\d{2}:?\d{2}|z|utc|gmt|` +
	`pst|pdt|mst|mdt|cdt|est|edt|akst|akdt|hst|bst|cet|cest|eet|eest|wet|west|ist|jst|kst|aest|aedt|acst|acdt|awst|nzst|nzdt|sgt|hkt|msk|brt|` +
	`(?:africa|america|antarctica|asia|atlantic|australia|europe|indian|pacific|etc|us|canada|brazil|mexico|chile)(?:/[a-z_+\-0-9]+)+)\b\)?)?`

// yearlessCore is "MM-DD hh:mm[:ss] [zone]".
const yearlessCore = `(\d{1,2})-(\d{1,2})\s+(\d{1,2}):(\d{2})(?::(\d{2}))?` + zonePat

var (
	// 2026-04-01T00:00:00Z, 2026-09-09 05:38:28, 2026-04-01 at 00:00 UTC, 2026-04-01
	reISOTime = lazy(`(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:t|\s+at\s+|\s+|_)(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?` + zonePat)
	// anchored forms used on scanned candidates
	reISOAnchored      = lazy(`^` + reISOTime.String())
	reYearlessAnchored = lazy(`^` + yearlessCore)
	// A date with its month's name: an HTTP date ("Tue, 20 Aug 2026 15:27:00 GMT"),
	// an app's ("try again at Aug 20, 2026, 3:27 PM", "20 August 2026 at 15:27 UTC").
	reMonthDate = lazy(`\b(?:([a-z]{3})[a-z]*\.? (\d{1,2}),? (\d{4})|(\d{1,2}) ([a-z]{3})[a-z]*\.? (\d{4})),?(?: at)? (\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?` + zonePat)
	// Chinese: 30秒后重试, 5分钟后
	reCNWait = lazy(`(\d+(?:\.\d+)?)\s*(毫秒|秒钟|秒|分钟|分|小时|天)后`)
)

func atoiSub(s string, m []int, g int) (int, bool) {
	if m[2*g] < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(s[m[2*g]:m[2*g+1]])
	return n, err == nil
}

func subStr(s string, m []int, g int) string {
	if m[2*g] < 0 {
		return ""
	}
	return s[m[2*g]:m[2*g+1]]
}

// abbrevOffsets are the zone abbreviations whose offset is not in doubt (CST,
// both Central and China Standard Time, is left out), in hours east of UTC.
var abbrevOffsets = map[string]float64{"pst": -8, "pdt": -7, "mst": -7, "mdt": -6, "cdt": -5, "est": -5, "edt": -4, "akst": -9,
	"akdt": -8, "hst": -10, "bst": 1, "cet": 1, "cest": 2, "eet": 2, "eest": 3, "wet": 0, "west": 1, "ist": 5.5, "jst": 9, "kst": 9,
	"aest": 10, "aedt": 11, "acst": 9.5, "acdt": 10.5, "awst": 8, "nzst": 12, "nzdt": 13, "sgt": 8, "hkt": 8, "msk": 3, "brt": -3}

// reUnreadZone is a zone name zonePat does not know, right after a time
// ("10:00 (Mars/Olympus)"): such a moment is not read as UTC.
var reUnreadZone = lazy(`^\s*\(?[a-z]+/[a-z_]`)

// zoneOf is m's zone group g, and whether no unknown zone name follows the moment.
func zoneOf(s string, m []int, g int) (string, bool) {
	z := subStr(s, m, g)
	return z, z != "" || !reUnreadZone.MatchString(s[m[1]:])
}

var reZoneWord = lazy(`^us/|/gmt|/utc|(^|[/_])[a-z]`)

var reOffset = lazy(`^(?:utc|gmt)? ?([+-]) ?(\d{1,2}):?(\d{2})?$`)

// zoneLoc turns a zone of zonePat into a location: UTC for none, a fixed offset
// for "gmt-3", "+05:30" or an abbreviation, the zone database for an IANA
// name (its offset on the date itself, summer time included).
func zoneLoc(z string) (*time.Location, bool) {
	switch z {
	case "", "z", "utc", "gmt":
		return time.UTC, true
	}
	if h, ok := abbrevOffsets[z]; ok {
		return time.FixedZone(strings.ToUpper(z), int(h*3600)), true
	}
	if m := reOffset.FindStringSubmatch(z); m != nil {
		h, _ := strconv.Atoi(m[2])
		mi := 0
		if m[3] != "" {
			mi, _ = strconv.Atoi(m[3])
		}
		if h > 14 || mi > 59 {
			return nil, false
		}
		off := h*3600 + mi*60
		if m[1] == "-" {
			off = -off
		}
		return time.FixedZone(z, off), true
	}
	// IANA names, lower-cased by the reader, capitalised back
	// ("america/new_york" -> "America/New_York", "etc/gmt+5" -> "Etc/GMT+5").
	name := reZoneWord.get().ReplaceAllStringFunc(z, strings.ToUpper)
	loc, err := time.LoadLocation(name)
	return loc, err == nil
}

// validDate builds a time only when every field is in range (no normalisation).
// A year before 2015 is no provider's reset (a zero value printed,
// "2001-01-01T00:00:00Z"), as for epochs.
func validDate(y, mo, d, h, mi, sec, nsec int, loc *time.Location) (time.Time, bool) {
	if y < 2015 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 {
		return time.Time{}, false
	}
	if sec == 60 {
		sec = 59
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, nsec, loc)
	if t.Day() != d || int(t.Month()) != mo {
		return time.Time{}, false
	}
	return t.UTC(), true
}

func isoFromMatch(s string, m []int) (time.Time, bool) {
	y, _ := atoiSub(s, m, 1)
	mo, _ := atoiSub(s, m, 2)
	d, _ := atoiSub(s, m, 3)
	h, _ := atoiSub(s, m, 4)
	mi, _ := atoiSub(s, m, 5)
	sec, _ := atoiSub(s, m, 6)
	nsec := 0
	if frac := subStr(s, m, 7); frac != "" {
		for len(frac) < 9 {
			frac += "0"
		}
		nsec, _ = strconv.Atoi(frac[:9])
	}
	z, ok := zoneOf(s, m, 8)
	loc, known := zoneLoc(z)
	if !ok || !known {
		return time.Time{}, false
	}
	return validDate(y, mo, d, h, mi, sec, nsec, loc)
}

// yearlessFromMatch resolves "MM-DD hh:mm[:ss]" in the UTC year of now, or the
// next year when that moment has passed (never year 0 or 2001).
func yearlessFromMatch(s string, m []int, now time.Time) (time.Time, bool) {
	mo, _ := atoiSub(s, m, 1)
	d, _ := atoiSub(s, m, 2)
	h, _ := atoiSub(s, m, 3)
	mi, _ := atoiSub(s, m, 4)
	sec, _ := atoiSub(s, m, 5)
	z, ok := zoneOf(s, m, 6)
	loc, known := zoneLoc(z)
	if !ok || !known {
		return time.Time{}, false
	}
	year := now.UTC().Year()
	if year < 1970 || year > 9990 {
		return time.Time{}, false
	}
	// Up to 8 years ahead covers 29 February.
	for y := year; y <= year+8; y++ {
		t, ok := validDate(y, mo, d, h, mi, sec, 0, loc)
		if !ok {
			if mo == 2 && d == 29 {
				continue
			}
			return time.Time{}, false
		}
		if !t.Before(now) {
			return t, true
		}
	}
	return time.Time{}, false
}

// Words that introduce a wait ("try again in 20s") and a moment ("reset at ...").
var (
	waitKeywords = []string{
		"try again in", "try again after", "again in", "again after", "retry in", "retry after",
		"retrying in", "retry-after", "retry_after", "retryafter", "retrydelay", "retry_delay",
		"wait for", "wait", "reset in", "resets in", "reset after", "available in",
		"available again in", "refresh in", "refreshes in", "cooldown", "cool down for",
		"replenished in", "refilled in", "等待",
	}
	momentKeywords = []string{
		"reset", "regain", "retry", "again", "available", "until", "resume", "refresh", "renew",
		"restore", "after", "unlock", "恢复", "重置", "解除", "刷新", "之后", "后再", "可用",
	}
)

// findRecovery looks for a stated wait or moment in lower-cased text. Waits come
// back as a duration (at zero); moments as at.
func findRecovery(low string, now time.Time) (time.Duration, time.Time, bool) {
	if d, ok := findWait(low); ok {
		return d, time.Time{}, true
	}
	if at, ok := findMoment(low, now); ok {
		return 0, at, true
	}
	return 0, time.Time{}, false
}

func findWait(low string) (time.Duration, bool) {
	for _, kw := range waitKeywords {
		from := 0
		for from < len(low) {
			i := strings.Index(low[from:], kw)
			if i < 0 {
				break
			}
			pos := from + i + len(kw)
			from = pos
			if d, ok := durationAfter(low[pos:], kw); ok {
				return d, true
			}
		}
	}
	if !strings.Contains(low, "后") {
		return 0, false
	}
	if m := reCNWait.FindStringSubmatch(low); m != nil {
		f, err := strconv.ParseFloat(m[1], 64)
		if err == nil {
			mult := map[string]float64{"毫秒": 0.001, "秒": 1, "秒钟": 1, "分": 60, "分钟": 60, "小时": 3600, "天": 86400}[m[2]]
			if d, ok := secondsDuration(f * mult); ok {
				return d, true
			}
		}
	}
	return 0, false
}

var unitSeconds = map[string]float64{
	"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
	"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
	"m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
	"h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
	"d": 86400, "day": 86400, "days": 86400,
	"w": 7 * 86400, "week": 7 * 86400, "weeks": 7 * 86400,
}

// reWaitLead is what may stand between a wait word and its figure:
// separators and filler words ("in", "about", "at least", `": "`).
var reWaitLead = lazy("^[ \t\n:=\"'`~(≈]*(?:(?:in|after|for|about|approximately|approx\\.|roughly|another|at least|least) [ \t\n:=\"'`~(≈]*){0,6}")

// reWaitPart is one figure of a wait and its unit, and the separator to the
// next ("1 hour and 30 minutes", "1h 30m", "1 minute, 5 seconds").
var reWaitPart = lazy(`^([\d.]+) *([a-zµ]*)(?: and |, | )?`)

// durationAfter parses "  in 9m38.016s", `": "34s"`, " 9 seconds", " 1 hour 30 minutes"
// at the start of s. A bare number counts as seconds only after header-like keywords.
func durationAfter(s string, kw string) (time.Duration, bool) {
	i := len(reWaitLead.get().FindString(s))
	if strings.HasSuffix(kw, " in") || strings.HasSuffix(strings.TrimRight(s[:i], " "), " in") || strings.HasPrefix(s, " in ") {
		if d, ok := clockDuration(s[i:]); ok { // "in 10:25:13"; "after 10:25" is a moment
			return d, true
		}
	}
	total, parts := 0.0, 0
	for ; parts < 6; parts++ {
		m := reWaitPart.FindStringSubmatch(s[i:])
		if m == nil {
			break
		}
		num, err := strconv.ParseFloat(strings.TrimRight(m[1], "."), 64)
		if err != nil {
			break
		}
		mult, ok := unitSeconds[m[2]]
		if !ok {
			if parts == 0 && m[2] == "" && isHeaderLike(kw) && !goesOnAsMoment(s[i+len(m[1]):]) {
				return secondsDuration(num)
			}
			break
		}
		total += num * mult
		i += len(m[0])
	}
	if parts == 0 {
		return 0, false
	}
	return secondsDuration(total)
}

// goesOnAsMoment: a figure followed by "-", "/" or ":" and a digit starts a
// date or a time of day ("retry after 2026-03-16 ...", "retry after 10:25"),
// a moment for findMoment, not a count of seconds.
func goesOnAsMoment(rest string) bool {
	return len(rest) > 1 && strings.ContainsRune("-/:", rune(rest[0])) && rest[1] >= '0' && rest[1] <= '9'
}

func isHeaderLike(kw string) bool {
	switch kw {
	case "retry-after", "retry_after", "retryafter", "retry after", "retrydelay", "retry_delay":
		return true
	}
	return false
}

// reDateStart finds where a date may start: four digits and a dash (an ISO
// date) or one or two digits and a dash (a year-less "08-25 01:37"), not inside
// a longer number, a range or a version.
var reDateStart = lazy(`(?:^|[^\d-])(\d{4})-\d|(?:^|[^\d/.:-])(\d{1,2})-\d`)

// findMoment returns the first absolute time in low that follows a reset word:
// a date found by reDateStart and read by an anchored pattern, an HTTP date, a
// time of day.
func findMoment(low string, now time.Time) (time.Time, bool) {
	for _, m := range reDateStart.get().FindAllStringSubmatchIndex(low, 16) {
		// 2026-04-01... or, with one or two digits first, 08-25 01:37:00
		d, re, read := m[2], reISOAnchored, func(s string, m []int) (time.Time, bool) { return isoFromMatch(s, m) }
		if d < 0 {
			d, re, read = m[4], reYearlessAnchored, func(s string, m []int) (time.Time, bool) { return yearlessFromMatch(s, m, now) }
		}
		if m := re.FindStringSubmatchIndex(low[d:]); m != nil && (hasMomentContext(low, d) || hasMomentAfter(low, d+m[1])) {
			if t, ok := read(low[d:], m); ok {
				return t, true
			}
		}
	}
	for _, m := range reMonthDate.get().FindAllStringSubmatchIndex(low, 4) {
		if !hasMomentContext(low, m[0]) {
			continue
		}
		if t, ok := monthDateFromMatch(low, m); ok {
			return t, true
		}
	}
	for _, m := range reClock.get().FindAllStringSubmatchIndex(low, 4) {
		if !hasMomentContext(low, m[2]) { // the lead word ("resets") counts
			continue
		}
		if t, ok := clockFromMatch(low, m, now); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// reClock finds a time of day after a moment word: "try again after 11:34 AM",
// "available at 14:05 UTC", "Access resets at 10:57 PM GMT-3", "resets
// 2:30pm (Pacific/Auckland)", "will reset at 1pm (Etc/GMT+5)". An hour alone
// counts only with am or pm.
var reClock = lazy(`\b(?:at|after|until|by|from|resets?|renews?|refreshes)\s+(\d{1,2})(?::(\d{2})(?::(\d{2}))?)?\s*(am|pm|a\.m\.|p\.m\.)?` + zonePat)

// clockFromMatch resolves a time of day to its next occurrence at or after now
// (a time without a zone is UTC, C11).
func clockFromMatch(s string, m []int, now time.Time) (time.Time, bool) {
	h, _ := atoiSub(s, m, 1)
	mi, _ := atoiSub(s, m, 2)
	sec, _ := atoiSub(s, m, 3)
	h, okH := hour24(h, subStr(s, m, 4))
	z, ok := zoneOf(s, m, 5)
	loc, known := zoneLoc(z)
	if !okH || !ok || !known || mi > 59 || sec > 59 || m[4] < 0 && subStr(s, m, 4) == "" {
		return time.Time{}, false
	}
	local := now.In(loc)
	t := time.Date(local.Year(), local.Month(), local.Day(), h, mi, sec, 0, loc)
	if t.Before(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t.UTC(), true
}

// hour24 turns a clock's hour and its am or pm into 0-23.
func hour24(h int, ampm string) (int, bool) {
	switch {
	case ampm == "":
		return h, h <= 23
	case ampm[0] == 'p':
		return h%12 + 12, h >= 1 && h <= 12
	}
	return h % 12, h >= 1 && h <= 12
}

// monthDateFromMatch reads a reMonthDate match; a time without a zone is UTC
// (C11), and a date before 2015 is no provider's reset (parseHTTPDate).
func monthDateFromMatch(s string, m []int) (time.Time, bool) {
	mon, d, y := subStr(s, m, 1), subStr(s, m, 2), subStr(s, m, 3)
	if mon == "" {
		mon, d, y = subStr(s, m, 5), subStr(s, m, 4), subStr(s, m, 6)
	}
	date, err := time.Parse("Jan 2 2006", mon+" "+d+" "+y) // month names match in any case
	h, _ := atoiSub(s, m, 7)
	h, okH := hour24(h, subStr(s, m, 10))
	mi, _ := atoiSub(s, m, 8)
	sec, _ := atoiSub(s, m, 9)
	z, ok := zoneOf(s, m, 11)
	loc, known := zoneLoc(z)
	if err != nil || !okH || !ok || !known || date.Year() < 2015 {
		return time.Time{}, false
	}
	return validDate(date.Year(), int(date.Month()), date.Day(), h, mi, sec, 0, loc)
}

// momentAfterKeywords follow the moment they name: Chinese puts the verb after
// the time ("您的限额将在 2026-08-24 00:09:21 重置").
var momentAfterKeywords = []string{"重置", "恢复", "解除", "刷新", "可用"}

// hasMomentAfter reports whether a moment word follows the time ending at end.
func hasMomentAfter(low string, end int) bool {
	if end > len(low) {
		return false
	}
	window := clip(low[end:], 24)
	for _, kw := range momentAfterKeywords {
		if strings.Contains(window, kw) {
			return true
		}
	}
	return false
}

func hasMomentContext(low string, at int) bool {
	start := at - 64
	if start < 0 {
		start = 0
	}
	window := low[start:at]
	for _, kw := range momentKeywords {
		if strings.Contains(window, kw) {
			return true
		}
	}
	return false
}

func lowerHeaders(h map[string]string) map[string]string {
	if len(h) == 0 {
		return nil
	}
	lh := make(map[string]string, len(h))
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic when two spellings of one key collide
	for _, k := range keys {
		lk := strings.ToLower(strings.TrimSpace(k))
		if _, seen := lh[lk]; !seen {
			lh[lk] = strings.TrimSpace(h[k])
		}
	}
	return lh
}

func waitUntil(at, now time.Time) time.Duration {
	d := at.Sub(now)
	if d < 0 {
		return 0
	}
	return d
}

// retryAfterHeader reads the explicit retry headers only.
func retryAfterHeader(lh map[string]string, now time.Time) (time.Duration, time.Time, string, bool) {
	for _, k := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if v, ok := lh[k]; ok && v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				if d, ok := secondsDuration(f / 1000); ok {
					return d, now.Add(d), k, true
				}
			}
		}
	}
	if v, ok := lh["retry-after"]; ok && v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			if d, ok := secondsDuration(f); ok {
				return d, now.Add(d), "retry-after", true
			}
		} else if t, err := parseHTTPDate(v); err == nil {
			t = t.UTC()
			return waitUntil(t, now), t, "retry-after", true
		} else if d, ok := parseGoDuration(v); ok {
			return d, now.Add(d), "retry-after", true
		}
	}
	return 0, time.Time{}, "", false
}

// resetHeaders reads the rate-limit reset headers.
func resetHeaders(lh map[string]string, now time.Time) (time.Duration, time.Time, string, bool) {
	type cand struct {
		key string
		at  time.Time
	}
	var exhausted, tokens, others []cand
	keys := make([]string, 0, len(lh))
	for k := range lh {
		if strings.Contains(k, "ratelimit") && strings.Contains(k, "reset") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		at, ok := parseHeaderMoment(lh[k], now)
		if !ok {
			continue
		}
		c := cand{k, at}
		rem := strings.Replace(k, "reset", "remaining", 1)
		if v, ok := lh[rem]; ok && rem != k {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f <= 0 {
				exhausted = append(exhausted, c)
				continue
			}
		}
		if strings.Contains(k, "token") {
			tokens = append(tokens, c)
		} else {
			others = append(others, c)
		}
	}
	pick := func(cs []cand) (time.Duration, time.Time, string, bool) {
		best := cs[0]
		for _, c := range cs[1:] {
			if c.at.After(best.at) {
				best = c
			}
		}
		return waitUntil(best.at, now), best.at, best.key, true
	}
	switch {
	case len(exhausted) > 0:
		return pick(exhausted)
	case len(tokens) > 0:
		return pick(tokens)
	case len(others) > 0:
		return pick(others)
	}
	return 0, time.Time{}, "", false
}

// parseHeaderMoment reads one reset header value.
func parseHeaderMoment(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return time.Time{}, false
	}
	if t, ok := parseNumberOrDuration(v, now); ok {
		return t, true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil && t.Year() >= 1970 && t.Year() <= 9999 {
		return t.UTC(), true
	}
	if t, err := parseHTTPDate(v); err == nil {
		return t.UTC(), true
	}
	return time.Time{}, false
}

// parseHTTPDate parses the three HTTP date forms (RFC 9110 section 5.6.7).
func parseHTTPDate(s string) (time.Time, error) {
	var err error
	for _, layout := range []string{"Mon, 02 Jan 2006 15:04:05 GMT", time.RFC850, time.ANSIC, time.RFC1123Z} {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			// Like an epoch (parseSecondsOrEpoch), a date before 2015 is no
			// provider's reset ("Mon, 01 Jan 2001 0:00:00 GMT" is a zero value
			// printed), never a moment to wait for.
			if y := t.Year(); y < 2015 || y > 9999 {
				return time.Time{}, errors.New("http date out of range")
			}
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

// recovery picks one recovery signal (C11) and says where it came from; see
// Classify.
func recovery(r Response, ev *evidence, reason Reason, now time.Time) (time.Duration, time.Time, string) {
	lh := lowerHeaders(r.Headers)
	if d, at, k, ok := retryAfterHeader(lh, now); ok {
		return d, at, "header " + k
	}
	if d, at, ok := findRecovery(ev.text, now); ok {
		if at.IsZero() {
			return d, now.Add(d), "text"
		}
		return waitUntil(at, now), at, "text"
	}
	if d, at, k, ok := retryAfterHeader(ev.hdrs, now); ok {
		return d, at, "body " + k
	}
	if d, at, k, ok := bodyResetFields(ev.hdrs, now); ok {
		return d, at, "body " + k
	}
	// x-ratelimit-reset-* describe the rate-limit buckets; they say nothing about
	// a content filter or a bad key sent with them.
	if reason == ReasonRateLimit {
		if d, at, k, ok := resetHeaders(lh, now); ok {
			return d, at, "header " + k
		}
		if d, at, k, ok := resetHeaders(ev.hdrs, now); ok {
			return d, at, "body " + k
		}
	}
	return 0, time.Time{}, ""
}

// bodyResetFields reads the reset fields a provider puts in its error body (C11):
// a moment ("resets_at": 1775317531, epoch seconds; "reset_at":
// "2026-04-01T00:00:00Z"; a copied "X-Codex-Primary-Reset-At" header) before a
// wait ("resets_in_seconds": 602705, "reset_after": 30, "retry_after_ms": 1500).
// Among moments the one under a plain name wins, then the soonest; likewise for
// waits. Rate-limit bucket fields (x-ratelimit-reset-*) are left to resetHeaders,
// which reads them for rate limits only.
// dropSeparators makes "reset_after" and "Reset-After" read "resetafter" (built
// once: a Replacer built per key cost about 100 KB and 40 µs on a body with
// twenty Codex headers).
var dropSeparators = strings.NewReplacer("-", "", "_", "")

func bodyResetFields(h map[string]string, now time.Time) (time.Duration, time.Time, string, bool) {
	type cand struct {
		key   string
		at    time.Time
		plain bool
	}
	var moments, waits []cand
	better := func(a, b cand) bool {
		if a.plain != b.plain {
			return a.plain
		}
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		return a.key < b.key
	}
	for k, v := range h {
		if strings.Contains(k, "ratelimit") || strings.Contains(k, "rate-limit") {
			continue
		}
		n := dropSeparators.Replace(k)
		if !strings.Contains(n, "reset") && !strings.Contains(n, "retry") {
			continue
		}
		switch {
		case strings.HasSuffix(n, "resetat") || strings.HasSuffix(n, "resetsat") || strings.HasSuffix(n, "resettime") || strings.HasSuffix(n, "resettimestamp"):
			if at, ok := parseHeaderMoment(v, now); ok {
				moments = append(moments, cand{k, at, n == "resetat" || n == "resetsat"})
			}
		default:
			unit, ok := waitUnit(n)
			if !ok {
				continue
			}
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				if d, ok := secondsDuration(f / unit); ok {
					waits = append(waits, cand{k, now.Add(d), !strings.HasPrefix(n, "x")})
				}
			}
		}
	}
	for _, cs := range [][]cand{moments, waits} {
		if len(cs) == 0 {
			continue
		}
		best := cs[0]
		for _, c := range cs[1:] {
			if better(c, best) {
				best = c
			}
		}
		return waitUntil(best.at, now), best.at, best.key, true
	}
	return 0, time.Time{}, "", false
}

// waitUnit is how many of a wait field's units make a second ("_ms" 1000, "seconds", "after", "resets_in" 1).
func waitUnit(n string) (float64, bool) {
	switch {
	case strings.HasSuffix(n, "ms") || strings.HasSuffix(n, "millis") || strings.HasSuffix(n, "milliseconds"):
		return 1000, true
	case strings.HasSuffix(n, "seconds") || strings.HasSuffix(n, "secs") || strings.HasSuffix(n, "after") || strings.HasSuffix(n, "resetsin") || strings.HasSuffix(n, "resetin"):
		return 1, true
	}
	return 0, false
}

// clockDuration reads a wait written as a clock, "10:25:13" (hours, minutes,
// seconds: Azure API Management's "Quota will be replenished in 10:25:13"), at
// the start of s. Two fields ("10:25") are a moment of day, not a wait, and are
// left to the moment parsers.
func clockDuration(s string) (time.Duration, bool) {
	m := reClockWait.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	se, _ := strconv.Atoi(m[3])
	return secondsDuration(float64(h*3600 + mi*60 + se))
}

var reClockWait = lazy(`^(\d{1,3}):([0-5]\d):([0-5]\d)(?:[^\d:.]|\.(?:\D|$)|$)`)
