package classify

import "strings"

// Provider code tables: the private numeric codes some providers put in their
// error bodies. A number means nothing across providers (Zhipu's 1002 is a bad
// token, MiniMax's 1002 a rate limit), so a table is read only when the provider
// is the one that wrote it (C2): its id names it, or the body has a shape only
// that provider sends. Entries are hints (codeTable's middle tier): a code beats
// the status and generic words, so a new wording of a known code lands right, but
// a specific text wins where the provider reuses a code loosely (Z.ai answers a
// key sent to the wrong endpoint with 1113, "insufficient balance", and says
// "invalid api endpoint or credentials" in the text).

// providerCodes is one provider's table.
type providerCodes struct {
	name      string   // rule name: "field/<name>-code:<code>"
	providers []string // provider ids containing one of these use the table
	shape     func(ev *evidence) bool
	codes     map[string]codeEntry
}

// codePathKeys are the keys a provider's code may sit under.
var codePathKeys = []string{"code", "status_code", "error_code", "errorcode", "type"}

var providerTables = []providerCodes{
	{
		// Zhipu / Z.ai (docs.bigmodel.cn/cn/faq/api-code, docs.z.ai/api-reference/api-code):
		// {"error":{"code":"1261","message":"Prompt 超长"}}, and in the
		// Anthropic-compatible route "[1308][...]".
		name:      "zhipu",
		providers: []string{"zhipu", "glm", "zai", "z.ai", "z-ai", "bigmodel"},
		shape:     func(ev *evidence) bool { return bracketCode(ev.message) },
		codes: map[string]codeEntry{
			"1000": {ReasonAuth, tierHint}, "1001": {ReasonAuth, tierHint}, "1002": {ReasonAuth, tierHint},
			"1003": {ReasonAuth, tierHint}, "1004": {ReasonAuth, tierHint}, "1111": {ReasonAuth, tierHint},
			"1220": {ReasonAuth, tierHint},
			// 1110 inactive account, 1112 locked (support unlocks it), 1121 locked for violations
			"1110": {ReasonAuthPermanent, tierHint}, "1112": {ReasonAuthPermanent, tierHint}, "1121": {ReasonAuthPermanent, tierHint},
			"1113": {ReasonBilling, tierHint}, "1309": {ReasonBilling, tierHint}, "1311": {ReasonBilling, tierHint},
			"1120": {ReasonTimeout, tierHint}, "1230": {ReasonTimeout, tierHint}, "1234": {ReasonTimeout, tierHint},
			// 1211 unknown model, 1212 the model does not support this call, 1221/1222 API retired or unknown
			"1211": {ReasonModelNotFound, tierHint}, "1212": {ReasonModelNotFound, tierHint},
			"1221": {ReasonModelNotFound, tierHint}, "1222": {ReasonModelNotFound, tierHint},
			"1210": {ReasonFormat, tierType}, "1213": {ReasonFormat, tierType}, "1214": {ReasonFormat, tierType},
			"1215": {ReasonFormat, tierType},
			"1261": {ReasonContextOverflow, tierHint},
			"1300": {ReasonContentFilter, tierHint}, "1301": {ReasonContentFilter, tierHint},
			// rate codes are hints, as in codeTable: a request that can never fit still wins
			"1231": {ReasonRateLimit, tierHint}, "1302": {ReasonRateLimit, tierHint}, "1303": {ReasonRateLimit, tierHint},
			"1304": {ReasonRateLimit, tierHint}, "1308": {ReasonRateLimit, tierHint}, "1310": {ReasonRateLimit, tierHint},
			"1305": {ReasonOverloaded, tierHint},
		},
	},
	{
		// MiniMax base_resp.status_code (platform.minimaxi.com error codes).
		name:      "minimax",
		providers: []string{"minimax"},
		shape:     func(ev *evidence) bool { return hasFieldPrefix(ev, "base_resp.") },
		codes: map[string]codeEntry{
			"1001": {ReasonTimeout, tierHint}, "1013": {ReasonTimeout, tierHint},
			"1002": {ReasonRateLimit, tierHint}, "1039": {ReasonRateLimit, tierHint}, "1041": {ReasonRateLimit, tierHint},
			"2045": {ReasonRateLimit, tierHint}, "2056": {ReasonRateLimit, tierHint},
			"1004": {ReasonAuth, tierHint}, "2049": {ReasonAuth, tierHint},
			"1008": {ReasonBilling, tierHint},
			"1026": {ReasonContentFilter, tierHint}, "1027": {ReasonContentFilter, tierHint},
			"2013": {ReasonFormat, tierType},
		},
	},
	{
		// iFlytek Spark header.code (www.xfyun.cn/doc/spark/Web.html, error codes):
		// {"header":{"code":11200,"message":"AppIdNoAuthError:(...) domain.generalv3",
		// "sid":"...","status":2}}. 11200 and 10016 say the app is not licensed for
		// this model version or its allowance for it is spent (the message names the
		// domain): another model answers, so model_not_found; 11201-11203 are daily,
		// per-second and concurrency windows.
		name:      "spark",
		providers: []string{"spark", "xfyun", "iflytek", "xunfei"},
		shape:     func(ev *evidence) bool { return hasField(ev, "header.code") && hasField(ev, "header.status") },
		codes: map[string]codeEntry{
			"10003": {ReasonFormat, tierType}, "10004": {ReasonFormat, tierType}, "10005": {ReasonFormat, tierType},
			"10163": {ReasonFormat, tierType},
			"10006": {ReasonRateLimit, tierHint}, "10007": {ReasonRateLimit, tierHint},
			"11201": {ReasonRateLimit, tierHint}, "11202": {ReasonRateLimit, tierHint}, "11203": {ReasonRateLimit, tierHint},
			"10008": {ReasonOverloaded, tierHint}, "10110": {ReasonOverloaded, tierHint},
			"10009": {ReasonTimeout, tierHint}, "10010": {ReasonTimeout, tierHint}, "10011": {ReasonTimeout, tierHint},
			"10012": {ReasonTimeout, tierHint}, "10222": {ReasonTimeout, tierHint},
			"10013": {ReasonContentFilter, tierHint}, "10014": {ReasonContentFilter, tierHint}, "10019": {ReasonContentFilter, tierHint},
			"10015": {ReasonAuthPermanent, tierHint}, // the appid is on the blacklist
			"10016": {ReasonModelNotFound, tierHint}, "11200": {ReasonModelNotFound, tierHint},
			"10907": {ReasonContextOverflow, tierHint},
		},
	},
	{
		// Baidu Qianfan error_code (cloud.baidu.com/doc/WENXINWORKSHOP/s/tlmyncueh),
		// sent with HTTP 200.
		name:      "qianfan",
		providers: []string{"baidu", "qianfan", "ernie", "wenxin"},
		codes: map[string]codeEntry{
			"17": {ReasonRateLimit, tierHint}, "18": {ReasonRateLimit, tierHint},
			"336501": {ReasonRateLimit, tierHint}, "336502": {ReasonRateLimit, tierHint},
			"19":  {ReasonBilling, tierHint}, // the total request allowance is spent
			"110": {ReasonAuth, tierHint}, "111": {ReasonAuth, tierHint},
		},
	},
	{
		// Naver CLOVA Studio (HyperCLOVA X) status.code
		// (api.ncloud-docs.com/docs/en/clovastudio-troubleshoot-c4xx):
		// {"status":{"code":"40082","message":"model fade out"}}. 40080 and 40082
		// are a missing and a retired model, 40009 a feature or input type this
		// model cannot take ("Change to a model that can process the requested
		// input type"), 40005 and 40006 output withheld by policy.
		name:      "clova",
		providers: []string{"clova", "naver", "ncloud", "hyperclova"},
		shape:     func(ev *evidence) bool { return clovaStatusCode(ev) },
		codes: map[string]codeEntry{
			"40000": {ReasonFormat, tierType}, "40001": {ReasonFormat, tierType}, "40004": {ReasonFormat, tierType},
			"40055": {ReasonFormat, tierType}, "40060": {ReasonFormat, tierType}, "40061": {ReasonFormat, tierType},
			"40003": {ReasonContextOverflow, tierHint},
			"40005": {ReasonContentFilter, tierHint}, "40006": {ReasonContentFilter, tierHint},
			"40009": {ReasonModelNotFound, tierHint}, "40080": {ReasonModelNotFound, tierHint}, "40082": {ReasonModelNotFound, tierHint},
			"40100": {ReasonAuth, tierHint}, "40101": {ReasonAuth, tierHint}, "40102": {ReasonAuth, tierHint},
			"40103": {ReasonAuth, tierHint}, "40104": {ReasonAuth, tierHint},
			"42900": {ReasonRateLimit, tierHint}, "42901": {ReasonRateLimit, tierHint},
			"50000": {ReasonTimeout, tierType},
		},
	},
}

// clovaStatusCode reports CLOVA Studio's envelope: a five-digit status.code.
func clovaStatusCode(ev *evidence) bool {
	for _, f := range ev.fields {
		if f.path == "status.code" && len(f.value) == 5 && allDigits(f.value) && (f.value[0] == '4' || f.value[0] == '5') {
			return true
		}
	}
	return false
}

// providerTablesFor returns the tables that apply to this response.
func providerTablesFor(c *textCtx) []*providerCodes {
	var out []*providerCodes
	for i := range providerTables {
		t := &providerTables[i]
		if containsAny(c.provider, t.providers) || t.shape != nil && t.shape(c.ev) {
			out = append(out, t)
		}
	}
	return out
}

// lookupProviderCode finds f in the tables when it is a numeric code field.
func lookupProviderCode(tables []*providerCodes, f field) (codeEntry, string, bool) {
	if len(tables) == 0 || !allDigits(f.value) {
		return codeEntry{}, "", false
	}
	key := f.path
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		key = key[i+1:]
	}
	if !containsString(codePathKeys, key) {
		return codeEntry{}, "", false
	}
	for _, t := range tables {
		if e, ok := t.codes[f.value]; ok {
			return e, t.name, true
		}
	}
	return codeEntry{}, "", false
}

// bracketCode reports Zhipu's "[1308][message][request id]" message shape.
func bracketCode(msg string) bool {
	msg = strings.TrimSpace(msg)
	if len(msg) < 7 || msg[0] != '[' || msg[5] != ']' {
		return false
	}
	return msg[1] == '1' && allDigits(msg[1:5])
}

func hasField(ev *evidence, path string) bool {
	for _, f := range ev.fields {
		if f.path == path {
			return true
		}
	}
	return false
}

func hasFieldPrefix(ev *evidence, prefix string) bool {
	for _, f := range ev.fields {
		if strings.HasPrefix(f.path, prefix) {
			return true
		}
	}
	return false
}

func allDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// reasonFamily names the family of meaning a reason found by a field belongs
// to, for Explanation.Family.
func reasonFamily(r Reason) string {
	switch r {
	case ReasonTimeout:
		return "server-or-network"
	case ReasonUnclassified:
		return "not-a-signal"
	case ReasonAuthPermanent:
		return "auth-permanent"
	}
	return strings.ReplaceAll(string(r), "_", "-")
}
