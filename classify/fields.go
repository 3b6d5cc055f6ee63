package classify

import (
	"strings"
	"unicode"
)

// The field step: the provider's own machine-readable words. A code is first
// normalised ("RESOURCE_EXHAUSTED", "com.amazon#ThrottlingException",
// "ThrottlingException:http://...", "Throttling.RateQuota" become "resource
// exhausted", "throttling exception", "throttling exception", "throttling rate
// quota"), then looked up in codeTable; a code not in the table is read with the
// text families, as a weaker signal.

// tier says how much a field decides.
type tier int

const (
	// tierExact: the code names its failure exactly; only a text family that C1
	// ranks higher overrides it.
	tierExact tier = iota + 1
	// tierHint: a code that may be reused loosely (a rate code on a request that
	// can never fit, OpenAI's insufficient_quota reused for a TPM throttle): any
	// specific text family wins, but it beats the status.
	tierHint
	// tierType: a generic envelope type (invalid_request_error, api_error,
	// INVALID_ARGUMENT, UNAVAILABLE): used only when the text and the status say
	// nothing.
	tierType
)

type codeEntry struct {
	reason Reason
	tier   tier
}

// codeTable maps normalised codes to reasons. Exception names and Google status
// strings are listed in their normalised form.
var codeTable = map[string]codeEntry{
	// content_filter
	"content filter":                  {ReasonContentFilter, tierExact},
	"content policy violation":        {ReasonContentFilter, tierExact},
	"responsible ai policy violation": {ReasonContentFilter, tierExact},
	"data inspection failed":          {ReasonContentFilter, tierExact},
	"moderation blocked":              {ReasonContentFilter, tierExact},
	"provider refusal":                {ReasonContentFilter, tierExact},
	"invalid prompt":                  {ReasonContentFilter, tierExact}, // OpenAI: the prompt was flagged
	"previous response not found":     {ReasonFormat, tierExact},        // Responses API: the stored response is gone
	// aborted: the DOM/Node AbortError, the Stainless SDKs' APIUserAbortError and
	// undici's RequestAbortedError are raised by an explicit abort() of the caller
	// (a deadline raises TimeoutError); see decide for when it counts
	"abort error": {ReasonAborted, tierExact}, "api user abort error": {ReasonAborted, tierExact}, "request aborted error": {ReasonAborted, tierExact},
	// auth_permanent
	"account deactivated":      {ReasonAuthPermanent, tierExact},
	"deactivated workspace":    {ReasonAuthPermanent, tierExact},
	"organization deactivated": {ReasonAuthPermanent, tierExact},
	"access terminated":        {ReasonAuthPermanent, tierExact},
	"account suspended":        {ReasonAuthPermanent, tierExact},
	"account banned":           {ReasonAuthPermanent, tierExact},
	"invalid grant":            {ReasonAuthPermanent, tierExact}, // OAuth refresh failed
	"consumer suspended":       {ReasonAuthPermanent, tierExact}, // Google ErrorInfo
	"service disabled":         {ReasonAuthPermanent, tierExact}, // Google: the API is disabled for the project
	// A way of access switched off for the resource or the account: no key of it
	// works until a person turns it back on (D4), unlike a bad key (auth).
	"authentication type disabled":                  {ReasonAuthPermanent, tierExact}, // Azure: key auth disabled
	"failed operation service not activated":        {ReasonAuthPermanent, tierExact}, // Tencent Hunyuan
	"failed operation service stop":                 {ReasonAuthPermanent, tierExact},
	"unsupported operation non whitelist account":   {ReasonAuthPermanent, tierExact},
	"failed operation service stop arrears":         {ReasonBilling, tierExact},
	"failed operation free resource pack exhausted": {ReasonBilling, tierExact},
	"failed operation resource pack exhausted":      {ReasonBilling, tierExact},
	"exceed token quota limit":                      {ReasonBilling, tierExact}, // Tencent CloudBase: the token allowance is spent
	"usage not included":                            {ReasonBilling, tierExact}, // ChatGPT/Codex: the plan does not include it
	"failed operation engine server limit exceeded": {ReasonRateLimit, tierHint},
	"limit exceeded":                                {ReasonRateLimit, tierHint},
	"usage limit reached":                           {ReasonRateLimit, tierHint}, // ChatGPT/Codex plan window
	"service quota exceeded exception":              {ReasonRateLimit, tierHint},
	"failed operation engine request timeout":       {ReasonTimeout, tierType},
	// Tencent Cloud API 3.0 common codes (Hunyuan's Response.Error.Code):
	// AuthFailure.* is a bad or stale signature or key (read for its meaning:
	// "auth failure"), these say the account's money ran out.
	"resource insufficient charge resource exhaust": {ReasonBilling, tierExact},
	"resource unavailable in arrears":               {ReasonBilling, tierExact},
	"resource unavailable low balance":              {ReasonBilling, tierExact},
	"failed operation engine server error":          {ReasonTimeout, tierType},
	// billing
	"insufficient balance":            {ReasonBilling, tierExact},
	"billing hard limit reached":      {ReasonBilling, tierExact},
	"billing not active":              {ReasonBilling, tierExact},
	"billing error":                   {ReasonBilling, tierExact}, // Anthropic 402
	"billing disabled":                {ReasonBilling, tierExact}, // Google ErrorInfo
	"exceeded current quota error":    {ReasonBilling, tierExact}, // Moonshot
	"arrearage":                       {ReasonBilling, tierExact}, // DashScope
	"prepaid bill overdue":            {ReasonBilling, tierExact},
	"postpaid bill overdue":           {ReasonBilling, tierExact},
	"invalid subscription":            {ReasonBilling, tierExact}, // Volcengine
	"access denied unpurchased":       {ReasonBilling, tierExact}, // DashScope
	"commodity not purchased":         {ReasonBilling, tierExact},
	"allocation quota free tier only": {ReasonBilling, tierExact},
	"insufficient user quota":         {ReasonBilling, tierExact}, // one-api / new-api
	"payment required":                {ReasonBilling, tierExact},
	"insufficient quota":              {ReasonBilling, tierHint}, // DashScope reuses it for a TPM throttle
	// context_overflow
	"context length exceeded":       {ReasonContextOverflow, tierExact},
	"context window exceeded":       {ReasonContextOverflow, tierExact},
	"model context window exceeded": {ReasonContextOverflow, tierExact},
	"request too large":             {ReasonContextOverflow, tierExact},
	"string above max length":       {ReasonContextOverflow, tierHint}, // also a too-long 'user' parameter
	// overloaded
	"overloaded error":               {ReasonOverloaded, tierExact},
	"overloaded":                     {ReasonOverloaded, tierExact},
	"model not ready exception":      {ReasonOverloaded, tierExact}, // Bedrock (C5)
	"capacity exceeded":              {ReasonOverloaded, tierExact}, // Groq 498
	"model capacity exhausted":       {ReasonOverloaded, tierExact}, // Google ErrorInfo
	"service tier capacity exceeded": {ReasonOverloaded, tierExact}, // Mistral 3505
	// rate_limit: hints, since a "rate" code also comes with a request that can
	// never fit or a spent plan
	"rate limit exceeded":  {ReasonRateLimit, tierHint},
	"rate limit error":     {ReasonRateLimit, tierHint},
	"throttling exception": {ReasonRateLimit, tierHint},
	"resource exhausted":   {ReasonRateLimit, tierHint},
	"too many requests":    {ReasonRateLimit, tierHint},
	"model cooldown":       {ReasonRateLimit, tierHint},
	// model_not_found
	"model not found":              {ReasonModelNotFound, tierExact},
	"deployment not found":         {ReasonModelNotFound, tierExact},
	"model decommissioned":         {ReasonModelNotFound, tierExact},
	"invalid model":                {ReasonModelNotFound, tierExact},
	"unknown model":                {ReasonModelNotFound, tierExact},
	"model access denied":          {ReasonModelNotFound, tierExact}, // DashScope Model.AccessDenied
	"resource not found exception": {ReasonModelNotFound, tierExact}, // Bedrock
	"not found error":              {ReasonModelNotFound, tierExact}, // Anthropic 404
	"resource not found error":     {ReasonModelNotFound, tierExact}, // Moonshot
	"model is deactivated":         {ReasonModelNotFound, tierExact},
	"operation not supported":      {ReasonModelNotFound, tierExact}, // Azure: this model cannot serve the operation
	"key model access denied":      {ReasonModelNotFound, tierExact}, // LiteLLM: the key may not use this model
	"model not supported":          {ReasonModelNotFound, tierExact},
	"exceed context size error":    {ReasonContextOverflow, tierExact}, // llama.cpp
	"not found":                    {ReasonModelNotFound, tierType},    // Google NOT_FOUND
	// auth
	"invalid api key":                        {ReasonAuth, tierExact},
	"api key invalid":                        {ReasonAuth, tierExact}, // Google ErrorInfo
	"api key expired":                        {ReasonAuth, tierExact},
	"authentication error":                   {ReasonAuth, tierExact},
	"permission error":                       {ReasonAuth, tierExact},
	"unauthenticated":                        {ReasonAuth, tierExact},
	"unrecognized client exception":          {ReasonAuth, tierExact},
	"expired token exception":                {ReasonAuth, tierExact},
	"invalid signature exception":            {ReasonAuth, tierExact},
	"incomplete signature exception":         {ReasonAuth, tierExact},
	"missing authentication token exception": {ReasonAuth, tierExact},
	"unsupported country region territory":   {ReasonAuth, tierExact},
	"api key service blocked":                {ReasonAuth, tierExact},
	"auth unavailable":                       {ReasonAuth, tierExact},
	"access token scope insufficient":        {ReasonAuth, tierExact}, // Google ErrorInfo
	"iam permission denied":                  {ReasonAuth, tierExact},
	"consumer invalid":                       {ReasonAuth, tierExact},
	"user project denied":                    {ReasonAuth, tierExact},
	"permission denied":                      {ReasonAuth, tierType},
	"access denied exception":                {ReasonAuth, tierType}, // Bedrock: a model it cannot use reads as model access
	"access denied":                          {ReasonAuth, tierType},
	"request forbidden":                      {ReasonAuth, tierType},
	// format
	"invalid request error": {ReasonFormat, tierType},
	"invalid request":       {ReasonFormat, tierType},
	"invalid argument":      {ReasonFormat, tierType},
	"invalid parameter":     {ReasonFormat, tierType},
	"failed precondition":   {ReasonFormat, tierType},
	"out of range":          {ReasonFormat, tierType},
	"unimplemented":         {ReasonFormat, tierType},
	"validation exception":  {ReasonFormat, tierExact}, // AWS: the input fails the API's constraints, whatever the status
	"validation error":      {ReasonFormat, tierType},
	"bad request":           {ReasonFormat, tierType},
	"unprocessable entity":  {ReasonFormat, tierType},
	"unsupported parameter": {ReasonFormat, tierType},
	"unsupported value":     {ReasonFormat, tierType},
	"invalid value":         {ReasonFormat, tierType},
	"extra forbidden":       {ReasonFormat, tierType},
	// timeout-like (C6)
	"api error":                     {ReasonTimeout, tierType},
	"server error":                  {ReasonTimeout, tierType},
	"internal server error":         {ReasonTimeout, tierType},
	"internal":                      {ReasonTimeout, tierType},
	"internal error":                {ReasonTimeout, tierType},
	"internal server exception":     {ReasonTimeout, tierType},
	"unavailable":                   {ReasonTimeout, tierType},
	"service unavailable":           {ReasonTimeout, tierType},
	"service unavailable exception": {ReasonTimeout, tierType},
	"deadline exceeded":             {ReasonTimeout, tierType},
	"timeout error":                 {ReasonTimeout, tierType},
	"request time out":              {ReasonTimeout, tierType},
	"request timeout":               {ReasonTimeout, tierType},
	"model timeout exception":       {ReasonTimeout, tierType},
	"model error exception":         {ReasonTimeout, tierType},
	"model stream error exception":  {ReasonTimeout, tierType},
	"upstream error":                {ReasonTimeout, tierType},
	"system error":                  {ReasonTimeout, tierType},
	"cancelled":                     {ReasonTimeout, tierType}, // Google CANCELLED: the server gave up
	"aborted":                       {ReasonTimeout, tierType}, // Google ABORTED: a conflict, retry
	"unknown":                       {ReasonTimeout, tierType},
	"data loss":                     {ReasonTimeout, tierType},
}

// stopReasons maps stop/finish/block reasons (a field of the body, or a stop
// reason quoted by a runtime: "Unhandled stop reason: error") to reasons.
var stopReasons = map[string]codeEntry{
	"content_filter": {ReasonContentFilter, tierExact}, "refusal": {ReasonContentFilter, tierExact},
	"safety": {ReasonContentFilter, tierExact}, "prohibited_content": {ReasonContentFilter, tierExact},
	"blocklist": {ReasonContentFilter, tierExact}, "blacklist": {ReasonContentFilter, tierExact}, "spii": {ReasonContentFilter, tierExact}, // GigaChat: blacklist
	"image_safety": {ReasonContentFilter, tierExact}, "recitation": {ReasonContentFilter, tierExact},
	// Bedrock Converse when a guardrail stepped in ("guardrail_intervened") or
	// its own filter did ("content_filtered"); Cohere's v1 toxicity filter.
	"guardrail_intervened": {ReasonContentFilter, tierExact}, "content_filtered": {ReasonContentFilter, tierExact},
	"error_toxic":                   {ReasonContentFilter, tierExact},
	"model_context_window_exceeded": {ReasonContextOverflow, tierExact},
	"context_window_exceeded":       {ReasonContextOverflow, tierExact},
	"context_length_exceeded":       {ReasonContextOverflow, tierExact},
	// C6: a stream that ends with an error stop reason and no detail
	"error": {ReasonTimeout, tierHint}, "abort": {ReasonTimeout, tierHint}, "aborted": {ReasonTimeout, tierHint},
	"malformed_response": {ReasonTimeout, tierHint}, "network_error": {ReasonTimeout, tierHint},
	"malformed_function_call": {ReasonTimeout, tierHint}, "unexpected_tool_call": {ReasonTimeout, tierHint}, "too_many_tool_calls": {ReasonTimeout, tierHint},
}

// geminiFinishNumbers are Gemini's safety stops as its SDKs' dumps print them (3 SAFETY, 4 RECITATION,
// 7 BLOCKLIST, 8 PROHIBITED_CONTENT, 9 SPII): read in a body only, never by Finish.
var geminiFinishNumbers = map[string]bool{"3": true, "4": true, "7": true, "8": true, "9": true}

// reErrorName is an exception or error class name in the original-case text,
// "AbortError: ...", "(ThrottlingException)": an ASCII word that starts with a
// capital after the start, a space, "(", "[" or ".", ends in "Error" or
// "Exception" and is followed by ":", ")", "]", " -" or the end of its line
// ("Error: AbortError" above a stack).
var reErrorName = lazy(`(?:^|[\s(\[.])([A-Z][A-Za-z]*(?:Error|Exception))(?:[:)\]]| -|\n|$)`)

// errorNames finds up to n error class names.
func errorNames(p string, n int) []string {
	var out []string
	for _, m := range reErrorName.get().FindAllStringSubmatch(p, n) {
		out = append(out, m[1])
	}
	return out
}

// reGRPCCode is a gRPC status name as the clients print it: grpc-go's "rpc
// error: code = ResourceExhausted desc = ...", grpcio's "status =
// StatusCode.UNAVAILABLE" and tritonclient's "[StatusCode.UNAVAILABLE]";
// grpc-java's "StatusRuntimeException: UNAVAILABLE: io exception" and
// grpc-js's "14 UNAVAILABLE: No connection established" (a canonical name
// written "NAME:" after an exception's name or after the numeric code, never a
// bare word).
var reGRPCCode = lazy(`code = ([A-Za-z_]+) desc|StatusCode\.([A-Za-z_]+)|(?:(?:^|[^\w.])\d{1,2} |Exception: )([A-Z_]+):`)

// grpcCodes finds up to n gRPC status names in the original-case text. They
// are read through the code table like Google's status strings ("UNAVAILABLE"
// says timeout only when nothing more specific does; "Unauthenticated" is
// auth).
func grpcCodes(p string, n int) []string {
	var out []string
	for _, m := range reGRPCCode.get().FindAllStringSubmatch(p, -1) {
		if name := m[1] + m[2] + m[3]; len(out) < n && (m[3] == "" || grpcNames[name]) {
			out = append(out, name)
		}
	}
	return out
}

// grpcNames are gRPC's canonical status names other than OK.
var grpcNames = map[string]bool{"CANCELLED": true, "UNKNOWN": true, "INVALID_ARGUMENT": true,
	"DEADLINE_EXCEEDED": true, "NOT_FOUND": true, "ALREADY_EXISTS": true, "PERMISSION_DENIED": true,
	"RESOURCE_EXHAUSTED": true, "FAILED_PRECONDITION": true, "ABORTED": true, "OUT_OF_RANGE": true,
	"UNIMPLEMENTED": true, "INTERNAL": true, "UNAVAILABLE": true, "DATA_LOSS": true, "UNAUTHENTICATED": true}

var reStopReasonText = lazy(`(?:stop[ _]reason|finish[ _]reason|finishreason|stopreason|\breason)"?\s*[:=]\s*["'<]?(?:[a-z]*reason\.)?([a-z_]+|\d\b)`)

// fieldHit is what the field step found at one tier.
type fieldHit struct {
	reason   Reason
	rule     string
	evidence string
	family   string // the family of meaning the code belongs to
	field    string // where the code was found ("error.code", "header x-amzn-errortype")
}

func (h fieldHit) ok() bool { return h.reason != "" }

// fieldStep returns the first hit of each tier, in the order the fields were found.
func fieldStep(c *textCtx) (exact, hint, typ fieldHit) {
	var cur field                   // the field being read, for the hit's family and path
	var hits [tierType + 1]fieldHit // by tier
	set := func(t tier, r Reason, rule, evidence string) {
		if dst := &hits[min(t, tierType)]; !dst.ok() {
			fam := reasonFamily(r)
			if i := strings.IndexByte(rule, '/'); i >= 0 && strings.Count(rule, "/") == 2 {
				fam = rule[i+1 : i+1+strings.IndexByte(rule[i+1:], '/')] // "field/<family>/<rule>"
			}
			*dst = fieldHit{r, rule, evidence, fam, cur.path}
		}
	}
	fields := c.ev.fields
	// Stop reasons and error class names quoted in runtime and SDK text are
	// machine words too: "Unhandled stop reason: error", "AbortError: ...",
	// "An error occurred (ResourceNotFoundException) when calling ...".
	if strings.Contains(c.text, "reason") {
		for _, m := range reStopReasonText.get().FindAllStringSubmatch(c.text, 4) {
			fields = append(fields, field{"text stop reason", m[1]})
		}
	}
	for _, p := range c.ev.prose {
		for _, code := range grpcCodes(p, 2) {
			fields = append(fields, field{"text grpc status", code})
		}
		if !strings.Contains(p, "Error") && !strings.Contains(p, "Exception") {
			continue
		}
		for _, name := range errorNames(p, 4) {
			if name == "PermissionError" && reFilePermission.MatchString(c.text) {
				continue // Python's own, for a file: "[Errno 13] Permission denied: '/...'"
			}
			fields = append(fields, field{"text error name", name})
		}
	}
	tables := providerTablesFor(c)
	for _, f := range fields {
		cur = f
		ev := f.path + "=" + f.value
		// Structure first: a provider's own numeric codes, read only for that
		// provider (C2), say more than any text ("1261" is Zhipu's prompt too long).
		if e, name, ok := lookupProviderCode(tables, f); ok {
			set(e.tier, e.reason, "field/"+name+"-code:"+f.value, ev)
			continue
		}
		if isStopPath(f.path) {
			v := strings.ToLower(f.value)
			if e, ok := stopReasons[v]; ok {
				set(e.tier, e.reason, "field/stop-reason:"+v, ev)
				continue
			}
			if geminiFinishNumbers[v] {
				set(tierExact, ReasonContentFilter, "field/stop-reason:"+v, ev)
				continue
			}
			if strings.HasSuffix(f.path, "blockreason") || strings.HasSuffix(f.path, "block_reason") {
				if v != "" && v != "block_reason_unspecified" {
					set(tierExact, ReasonContentFilter, "field/block-reason", ev)
				}
			}
			continue
		}
		n := normalizeCode(f.value)
		if n == "" {
			continue
		}
		if e, ok := codeTable[n]; ok {
			if routedRegion(n, f.path) {
				// The upstream behind a router refused the region: the router's
				// key is good, and its other models (other upstreams) answer.
				set(tierExact, ReasonModelNotFound, "field/routed-region", ev)
				continue
			}
			set(e.tier, e.reason, "field/"+strings.ReplaceAll(n, " ", "_"), ev)
			continue
		}
		// A code the table does not know is read for its meaning, as a hint:
		// "ServiceQuotaExceededException" says "quota exceeded". A bare number
		// has no words to read (provider tables above read numbers).
		if allDigits(n) {
			continue
		}
		sub := textCtx{text: n, provider: c.provider, status: c.status, rawHTTP: c.rawHTTP, ev: c.ev}
		m := first(scan(&sub), func(f *family) bool {
			return f.rank != rankAborted && f.rank != rankNotASignal && f.rank != rankBillingRemedy
		})
		if !m.ok() {
			continue
		}
		t := tierHint
		if m.fam.rank == rankFormat || m.fam.rank == rankGeneric {
			t = tierType
		}
		set(t, m.fam.reason, "field/"+m.fam.name+"/"+m.rule.name, ev)
	}
	return hits[tierExact], hits[tierHint], hits[tierType]
}

func isStopPath(p string) bool {
	for _, s := range []string{"finish_reason", "finishreason", "stop_reason", "stopreason", "blockreason", "block_reason", "text stop reason"} {
		if strings.HasSuffix(p, s) {
			return true
		}
	}
	return false
}

// normalizeCode turns a code into lower-case words: the part after an AWS '#',
// the part before a ':' (x-amzn-errortype adds a URL), separators and camel case
// split into spaces.
func normalizeCode(s string) string {
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexByte(s, ':'); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/' || r == ' ':
			b.WriteByte(' ')
		case unicode.IsUpper(r):
			// a word starts at an upper-case letter after a lower-case one, or
			// before a lower-case one after a run of capitals ("APIKey" -> "api key")
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte(' ')
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// routedRegion reports a region refusal written by the upstream provider inside a
// router's envelope (OpenRouter's metadata.raw). A direct provider that refuses
// the region refuses every model of the credential (auth: rotate, then another
// provider); through a router only this upstream does, so it reads as this
// model being unavailable (model_not_found) and the router's key keeps working.
func routedRegion(code, path string) bool {
	return code == "unsupported country region territory" && strings.Contains(path, "raw:")
}
