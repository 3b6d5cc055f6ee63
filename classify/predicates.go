package classify

import (
	"strconv"
	"strings"
)

// The predicates: checks a rule runs on its match (is the subject a
// credential, is the sentence a condition or an example), and the readers of
// stated counts (a prompt over its limit).

// stringTooLongIsPrompt: "string too long" is a context overflow when it is about
// the prompt; "Invalid 'user': string too long" is a format error.
func stringTooLongIsPrompt(c *textCtx, _ string) bool {
	p := strings.ToLower(c.ev.param)
	if m := reInvalidParam.FindStringSubmatch(c.text); m != nil {
		p = m[1]
	}
	if p == "" {
		return true
	}
	// The last name of the path says what is long: "messages[1].content" is the
	// prompt, "messages[2].tool_calls[0].id" an id.
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		p = p[i+1:]
	}
	if i := strings.IndexByte(p, '['); i >= 0 {
		p = p[:i]
	}
	switch p {
	case "messages", "message", "content", "prompt", "input", "text", "system", "instructions":
		return true
	}
	return false
}

var reInvalidParam = lazy(`invalid '([^']{1,60})'`)

var (
	reTokensGT   = lazy(`(\d[\d,]*)\s*tokens?\s*>\s*(\d[\d,]*)`)
	reSumGT      = lazy(`(\d[\d,]*)\s*\+\s*(\d[\d,]*)\s*>\s*(\d[\d,]*)`)
	reModelLimit = lazy(`\btoken limit\W{0,3}(\d[\d,]*)\s*\(requested\W{0,3}(\d[\d,]*)\)`)
)

// tokensOverMax finds a stated token count over a stated maximum:
// "210000 tokens > 200000 maximum", "197000 + 8192 > 200000", "token limit: 8192
// (requested: 9000)".
func tokensOverMax(t string) bool {
	if !strings.Contains(t, "token") {
		return false
	}
	if g := reModelLimit.FindStringSubmatch(t); g != nil {
		if a, b, ok := counts(g[1], g[2]); ok && b > a {
			return true
		}
	}
	if g := reTokensGT.FindStringSubmatch(t); g != nil {
		if a, b, ok := counts(g[1], g[2]); ok && a > b {
			return true
		}
	}
	if g := reSumGT.FindStringSubmatch(t); g != nil {
		a, b, ok1 := counts(g[1], g[2])
		_, c, ok2 := counts("0", g[3])
		return ok1 && ok2 && a+b > c
	}
	return false
}

var (
	reMaxLength    = lazy(`expected maxlength\W{1,3}(\d+)\W{1,3}actual\W{1,3}(\d+)`)
	reMemberLength = lazy(`value at '(body|prompt|messages?|inputtext|input|text|content)[^']{0,40}' failed to satisfy constraint: member must have length less than or equal to`)
)

// reCountOver is a count, a ">" that is no arrow ("->", "=>") and the count
// after it, a few words apart.
var reCountOver = lazy(`(\d(?:\d|,\d)*)(?:\D{0,26}[^\d=-])?>\D{0,29}?(\d(?:\d|,\d)*)`)

// countsOver finds a stated count over a stated maximum in a sentence about
// tokens, context or length: "Prompt tokens: 230799 > 91442", "(4096 > 4096 -
// 100)". A count of output tokens, bytes or images over a cap is the request's
// parameter or attachment (reNotPromptCount), not its prompt.
func countsOver(t string) bool {
	for _, part := range strings.Split(t, " | ") {
		if !strings.Contains(part, ">") || !strings.Contains(part, "token") && !strings.Contains(part, "context") ||
			reNotPromptCount.MatchString(part) {
			continue
		}
		for _, g := range reCountOver.get().FindAllStringSubmatch(part, 8) {
			if a, b, ok := counts(g[1], g[2]); ok && a > b && b > 0 {
				return true
			}
		}
	}
	return false
}

// schemaLengthOver finds a schema length limit on the prompt or the body that the
// request broke (Bedrock): "expected maxLength: 42000, actual: 46735", "Value at
// 'body' failed to satisfy constraint: Member must have length less than or equal
// to 25000000".
func schemaLengthOver(t string) bool {
	if g := reMaxLength.FindStringSubmatch(t); g != nil {
		if a, b, ok := counts(g[1], g[2]); ok && b > a {
			return true
		}
	}
	return reMemberLength.MatchString(t)
}

// limitBelowRequested finds "Limit X ... Requested Y" in one sentence with Y > X:
// one request larger than the whole per-minute allowance can never pass.
func limitBelowRequested(t string) bool {
	x, y, ok := limitRequested(t)
	return ok && x > 0 && y > x
}

func hasLimitRequested(t string) bool {
	_, _, ok := limitRequested(t)
	return ok
}

// reLimitRequested is "limit[:] X ... requested[:] Y" in one sentence.
var reLimitRequested = lazy(`limit\W{0,3}(\d(?:\d|,\d)*)[^|]{0,80}?requested\W{0,3}(\d(?:\d|,\d)*)`)

// limitRequested reads the first "limit[:] X ... requested[:] Y" of one sentence.
func limitRequested(t string) (x, y int64, ok bool) {
	if !strings.Contains(t, "requested") {
		return 0, 0, false
	}
	if g := reLimitRequested.FindStringSubmatch(t); g != nil {
		return counts(g[1], g[2])
	}
	return 0, 0, false
}

func counts(a, b string) (int64, int64, bool) {
	x, err1 := strconv.ParseInt(strings.ReplaceAll(a, ",", ""), 10, 64)
	y, err2 := strconv.ParseInt(strings.ReplaceAll(b, ",", ""), 10, 64)
	return x, y, err1 == nil && err2 == nil
}

// billingLink: billing words that sit only inside a link of the message
// ("Visit https://console.example.com/settings/billing").
func billingLink(c *textCtx, _ string) bool {
	for _, u := range c.ev.urls {
		if strings.Contains(u, "/docs") || strings.Contains(u, "docs.") {
			continue // a documentation page about billing says nothing of this account
		}
		if containsAny(u, billingURLWords) && reBillingURL.MatchString(u) {
			return true
		}
	}
	return false
}

var billingURLWords = []string{"billing", "credit", "payment", "top", "recharge", "balance", "purchase", "subscri", "pricing"}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

var reBillingURL = lazy(`[/.=_-](billing|credits?|payments?|top-?up|recharge|balance|purchase|subscribe|subscription|pricing/upgrade)\b`)

// A bare "key" or "token" is a credential only in that sense. Text and SDKs use
// both words otherwise: a count of text ("must be at least 1 token long", "5
// tokens are required"), a JSON parse of a response ("Unexpected token 'e', ...
// is not valid JSON"), a dictionary or table key ("KeyNotFoundException", "the
// primary key"), a named configuration key ("the key \"region\" is
// required"), a video's key frames. Read as auth, such a text cools the key
// down for every model.
var (
	reNotCredentialBefore = lazy(`(?:\d[\d,.]*|\bone|\ba single|\bunexpected|\bextraneous|\badditional|\bduplicate|\brequired|\bgiven|\bprimary|\bforeign|\bsort|\bpartition|\bmap|\bdictionary|\bdict|\bjson|\bobject|\bhash|\bcache)\s*$`)
	reNotCredentialAfter  = lazy(`^\s*["'\x60][a-z][a-z0-9_.]{0,29}["'\x60]|^\s*\[[^\]]{1,40}\]|^\s*(?:frames?|long|counts?|limits?|budgets?|usage|length|lengths|(?:in|of) (?:the )?(?:json|schema|expression|template|grammar)|at (?:position|line|column|offset))\b`)
	reClassNameAfter      = lazy(`^\s*(?:exception|error)\b`)
)

// credentialAtEnd accepts a match whose subject, its last word, is a credential.
func credentialAtEnd(c *textCtx, m string) bool {
	i := strings.Index(c.text, m)
	w := lastWord(m)
	if i < 0 || !bareKeyOrToken(w) {
		return true
	}
	at := i + len(m) - len(w)
	return credentialContext(c.text[max(0, at-24):at], c.text[i+len(m):min(len(c.text), i+len(m)+24)])
}

// credentialAtStart accepts a match whose subject, its first word, is a credential.
func credentialAtStart(c *textCtx, m string) bool {
	i := strings.Index(c.text, m)
	w, _, _ := strings.Cut(m, " ")
	if i < 0 || !bareKeyOrToken(w) {
		return true
	}
	after := c.text[i+len(w) : min(len(c.text), i+len(w)+24)]
	if reClassNameAfter.MatchString(c.text[i+len(m) : min(len(c.text), i+len(m)+12)]) {
		return false // "key not found exception": a dictionary lookup failed
	}
	return credentialContext(c.text[max(0, i-24):i], after)
}

func credentialContext(before, after string) bool {
	return !reNotCredentialBefore.MatchString(before) && !reNotCredentialAfter.MatchString(after)
}

func bareKeyOrToken(w string) bool {
	switch w {
	case "key", "keys", "token", "tokens":
		return true
	}
	return false
}

func lastWord(s string) string {
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		return s[i+1:]
	}
	return s
}

// sentenceOf returns the sentence (the part between " | " separators) of c.text
// that holds m, and the text of it before m.
func sentenceOf(c *textCtx, m string) (sentence, before string) {
	i := strings.Index(c.text, m)
	if i < 0 {
		return "", ""
	}
	start := strings.LastIndex(c.text[:i], "|") + 1
	end := len(c.text)
	if k := strings.IndexByte(c.text[i+len(m):], '|'); k >= 0 {
		end = i + len(m) + k
	}
	return c.text[start:end], c.text[start:i]
}

// Prose that describes a case instead of reporting one: a condition ("once
// exhausted, add more credits", "if the HTTP 429 code is returned"), an example
// ("e.g. our GPUs are busy"), a scenario, or advice ("ensure the API key is
// provided", "verify that the key has not expired"). Documentation and
// maintainers' comments say the families' words this way; a provider's refusal
// states them.
var (
	reHypothetical = rx(`\b(once|if|whenever|in case)\b~\b(exhausted|run out|runs out|ran out|used up|depleted|expire[sd]?|is returned|are returned|returns?)\b`)
	reExample      = rx(`\be\.g\.|\bfor example\b|\bsuch as\b|\bscenarios?\b|\bsituations like\b`)
	reGuess        = rx(`\b(may|might|could) (have )?(be|been)\b`)
	reAdvice       = rx(`^\W*(ensure|make sure|verify that|check that|check whether|confirm that|double-check)\b`)
)

// reLimitHit: words that report a limit reached, not describe one.
var reLimitHit = rx(`\bexceed\w*|\breached\b|\bpast the\b|\bhit\b|\btoo many\b|\bquota\b|\b429\b|\bthrottl\w*|\bslow down\b|\bretry\b|\btry again\b|\bwait\b|\blimits?\b`)

// reportsLimitHit accepts a rate unit said with a 429 or with words of a limit
// reached in its sentence.
func reportsLimitHit(c *textCtx, m string) bool {
	if c.status == 429 {
		return true
	}
	s, _ := sentenceOf(c, m)
	return reLimitHit.MatchString(s)
}

// reTimeoutSetting: "timeout" as the name of a setting ("the timeout
// parameter", "le paramètre timeout", "the default timeout is 600 seconds"),
// which documentation describes and no failure reports.
var reTimeoutSetting = rx(`\b(param(eter|ètre|etro)?|option|setting|flag|field|argument|variable|config)s? ['"\x60]?timeout\b|\btimeout['"\x60]? (param(eter)?|option|setting|flag|field|argument|value|variable|configuration)s?\b|\bdefault timeout\b|\btimeout (is|was) set\b`)

// notTimeoutSetting accepts a timeout word unless it is the bare noun naming a
// setting in its sentence.
func notTimeoutSetting(c *textCtx, m string) bool {
	if m != "timeout" {
		return true
	}
	s, _ := sentenceOf(c, m)
	return !reTimeoutSetting.MatchString(s)
}

// notHypothetical accepts a match whose sentence is no condition.
func notHypothetical(c *textCtx, m string) bool {
	s, _ := sentenceOf(c, m)
	return !reHypothetical.MatchString(s)
}

func notClientStatus(c *textCtx, _ string) bool { return c.status < 400 || c.status >= 500 } // no 4xx spoke first

// notExample accepts a match whose sentence is no example or scenario, nor a
// guess ("the endpoint may be temporarily unavailable") beside a status that
// names a lasting cause: a client's reading of a 401 is no busy server.
func notExample(c *textCtx, m string) bool {
	s, _ := sentenceOf(c, m)
	lasting := c.status == 401 || c.status == 402 || c.status == 403 || c.status == 404 || c.status == 407
	return !reExample.MatchString(s) && !(lasting && reGuess.MatchString(s))
}

// credentialStated accepts a credential match that reports a failure: its
// subject is a credential (credentialAtStart), its verb is not negated ("has not
// expired") and its sentence is not advice ("Ensure the API key is provided").
func credentialStated(c *textCtx, m string) bool {
	if !credentialAtStart(c, m) {
		return false
	}
	s, _ := sentenceOf(c, m)
	if reAdvice.MatchString(s) {
		return false
	}
	return !reNegatedVerb.MatchString(m)
}

var reNegatedVerb = rx(`\b(not|never) (been )?(expired|revoked|invalidated)\b`)

var rePromptWindow = lazy(`\bprompt (?:is|has|contains|of) ([\d,]+) tokens?\b[^|]{0,40}?\bcontext (?:window|length|size)(?: is| of)? ([\d,]+)`)

// promptOverWindow finds a prompt's token count stated next to a smaller context
// window: "The prompt is 9884 tokens and the context window is 2048!".
func promptOverWindow(t string) bool {
	if !strings.Contains(t, "prompt") {
		return false
	}
	g := rePromptWindow.FindStringSubmatch(t)
	if g == nil {
		return false
	}
	a, b, ok := counts(g[1], g[2])
	return ok && a > b
}

// Rules of words in other languages ("-zh", "-ja-ko", "-intl") share one
// reading of prose: a condition or an example around the words describes a case
// ("如果余额不足，请前往控制台充值", "レート制限に達した場合は、しばらく待って",
// "si el modelo está sobrecargado"), as notHypothetical does for English.
func guardIntl(families []family) {
	for i := range families {
		for j := range families[i].rules {
			r := &families[i].rules[j]
			if !strings.HasSuffix(r.name, "-zh") && !strings.HasSuffix(r.name, "-ja-ko") && !strings.HasSuffix(r.name, "-intl") {
				continue
			}
			prev, ends := r.check, clauseEnds
			if families[i].rank == rankBillingRemedy {
				// A remedy is advice after its condition: "如果余额不足，请前往控制台充值"
				// (if the balance is short, top up) holds the condition in the
				// sentence, not in the remedy's clause.
				ends = sentenceStops
			}
			r.check = func(c *textCtx, m string) bool {
				return !conditionalClause(c.text, m, ends) && (prev == nil || prev(c, m))
			}
		}
	}
}

// Clause ends in the texts of the "-zh", "-ja-ko" and "-intl" rules.
var (
	clauseEnds    = []string{"|", "，", ",", "。", "；", ";", "、", "！", "？", "!", "?", ". "}
	sentenceStops = []string{"|", "。", "！", "？", "!", "?", ". "}
)

// Condition and example markers: before the words (Chinese, Japanese's もし,
// Korean's 만약, the European and other languages' "if", "for example") or
// after them (Japanese 場合, たら, なら; Korean 경우, -면; Chinese 当...时).
var (
	condBefore = []string{"如果", "若", "假如", "倘若", "一旦", "万一", "例如", "比如", "もし", "例えば", "만약", "예를 들어"}
	condAfter  = []string{"場合", "とき", "たら", "なら", "경우", "하면", "되면", "으면", "다면"}
	reCondIntl = lazy(`(?:^|[\s(¿¡"'])(si|wenn|falls|если|nếu|jika|apabila|bila|lorsque|quand|caso|qualora|eğer|por ejemplo|par exemple|zum beispiel|per esempio|por exemplo|например|misalnya|ví dụ)\s`)
)

// conditionalClause reports whether the clause of t that holds m (its ends are
// ends) states a condition or an example.
func conditionalClause(t, m string, ends []string) bool {
	i := strings.Index(t, m)
	if i < 0 {
		return false
	}
	start, end := 0, len(t)
	for _, d := range ends {
		if k := strings.LastIndex(t[:i], d); k >= 0 && k+len(d) > start {
			start = k + len(d)
		}
		if k := strings.Index(t[i+len(m):], d); k >= 0 && i+len(m)+k < end {
			end = i + len(m) + k
		}
	}
	before, after := t[start:i], t[i+len(m):end]
	if containsAny(before, condBefore) || containsAny(after, condAfter) {
		return true
	}
	if strings.Contains(before, "当") && strings.Contains(after, "时") {
		return true
	}
	return reCondIntl.MatchString(" " + before)
}
