package failover

import (
	"regexp"
	"strconv"
	"strings"
)

// Phrase rules of Classify. Every function takes the lower-cased haystack (body
// strings, error codes, transport error text; URLs removed) and answers one
// question. The tables follow research/anchors.md 1.6 and the corpus README, with
// Chinese wording of DashScope, Moonshot, Zhipu, MiniMax and one-api gateways.

func hasAny(t string, list ...string) bool {
	for _, p := range list {
		if strings.Contains(t, p) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
}

// hasWord reports whether w occurs in t with no letter, digit or '_' on either side.
func hasWord(t string, words ...string) bool {
	for _, w := range words {
		from := 0
		for {
			i := strings.Index(t[from:], w)
			if i < 0 {
				break
			}
			i += from
			j := i + len(w)
			if (i == 0 || !isWordByte(t[i-1])) && (j >= len(t) || !isWordByte(t[j])) {
				return true
			}
			from = i + 1
		}
	}
	return false
}

// followedBy reports whether a subject word (start at a word boundary; a plural
// "s" allowed) is followed, within gap bytes and the same sentence, by an object
// phrase that starts at a word boundary. It replaces backtracking regexps.
func followedBy(t string, subjects []string, gap int, objects ...string) bool {
	for _, sub := range subjects {
		from := 0
		for from < len(t) {
			i := strings.Index(t[from:], sub)
			if i < 0 {
				break
			}
			i += from
			j := i + len(sub)
			from = j
			if i > 0 && isWordByte(t[i-1]) {
				continue
			}
			if j < len(t) && t[j] == 's' && (j+1 >= len(t) || !isWordByte(t[j+1])) {
				j++
			}
			if j < len(t) && isWordByte(t[j]) {
				continue
			}
			end := j + gap
			if end > len(t) {
				end = len(t)
			}
			w := t[j:end]
			if k := sentenceEnd(w); k >= 0 {
				w = w[:k]
			}
			for _, o := range objects {
				if containsWordStart(w, o) {
					return true
				}
			}
		}
	}
	return false
}

// sentenceEnd finds ". ", a final ".", "|", a newline or "。" in w.
func sentenceEnd(w string) int {
	for k := 0; k < len(w); k++ {
		switch w[k] {
		case '|', '\n':
			return k
		case '.':
			if k+1 >= len(w) || w[k+1] == ' ' {
				return k
			}
		}
	}
	if k := strings.Index(w, "。"); k >= 0 {
		return k
	}
	return -1
}

func containsWordStart(w, o string) bool {
	from := 0
	for {
		i := strings.Index(w[from:], o)
		if i < 0 {
			return false
		}
		i += from
		if i == 0 || !isWordByte(w[i-1]) || !isWordByte(o[0]) {
			return true
		}
		from = i + 1
	}
}

// span allows any character but a sentence end or a field separator; a dot inside
// a token (gpt-3.5, 1.5-pro) is fine.
const span = `(?:[^.|\n]|\.[^\s|])`

var (
	reWindowNumber  = regexp.MustCompile(`\b(?:\d+|one|five|a)[ -]?(?:hours?|hrs?|days?|weeks?|months?)\b` + span + `{0,30}?\b(?:limits?|quotas?|window|allowance)\b`)
	reTokensGT      = regexp.MustCompile(`(\d[\d,]*)\s*tokens?\s*>\s*(\d[\d,]*)`)
	reContextExceed = regexp.MustCompile(`\b(?:input|prompt|max_tokens|messages?|request|conversation)\b` + span + `{0,50}?\bexceed` + span + `{0,50}?\bcontext\b`)
	reCapacity      = regexp.MustCompile(`\b(?:at|over|no|out of|insufficient|lack of|limited)\s+(?:available\s+|serving\s+|compute\s+)?capacity\b|\bcapacity\s+(?:exhausted|constraints?|issues?|reached|unavailable|is full)`)
	reStopReason    = regexp.MustCompile(`(?:stop[ _]reason|finish[ _]reason|\breason)\W{0,3}(?:error|abort|aborted|malformed_response|network_error)\b`)
	reLimitZero     = regexp.MustCompile(`\blimit\W{0,3}0\b`)
	reCNWindow      = regexp.MustCompile(`(?:每日|每天|每周|每月|每小时|今日|今天|本周|本月|当日|当天|\d+\s*小时|\d+\s*天|周)` + `[^。|]{0,12}?(?:上限|限额|额度|配额|用量|次数|限制)`)
)

func isAborted(t string, m uint64) bool {
	if hit(m, lTimeoutGuard) {
		return false
	}
	return hit(m, lAborted)
}

func isContentFilter(t string, m uint64) bool {
	return hit(m, lContentFilter)
}

func isAuthPermanent(t string, m uint64) bool {
	if hit(m, lAuthPermanent) {
		return true
	}
	if !hit(m, lAuthPermVerbs) || hit(m, lBillingHints) {
		return false // "account suspended, check your billing details" is billing
	}
	return followedBy(t, []string{"account", "organization", "organisation", "org", "workspace", "team", "user",
		"api key", "api-key", "api_key", "key", "token", "credential", "project"}, 60,
		"deactivated", "suspended", "banned", "revoked", "terminated", "restricted", "blocked", "disabled",
		"deleted", "frozen", "locked")
}

// googleQuotaMetric reports Google's "Quota exceeded for metric ... limit: N" form,
// which reuses OpenAI's billing wording for a rate window.
func googleQuotaMetric(t string, m uint64) bool {
	return hit(m, lGoogleQuota)
}

func isBilling(t string, m uint64) bool {
	google := googleQuotaMetric(t, m)
	if google {
		// limit: 0 = the free tier grants nothing for this model; only billing helps.
		if reLimitZero.MatchString(t) && strings.Contains(t, "quota") {
			return true
		}
	} else if hit(m, lQuotaBilling) {
		return true
	}
	if hit(m, lBilling) {
		return true
	}
	if hit(m, lTopUp) && hasWord(t, wTopUp...) {
		return true
	}
	if hit(m, lCNCredit) && !reCNWindow.MatchString(t) {
		return true
	}
	if strings.Contains(t, "current plan") && hit(m, lPlanWords) {
		return true
	}
	return false
}

func isUsageWindow(t string, m uint64) bool {
	if hit(m, lUsageWindow) {
		return true
	}
	if hit(m, lPeriodWords) && followedBy(t, wPeriodWords, 40,
		"limit", "quota", "allocation", "allowance", "budget", "cap ", "caps") {
		return true
	}
	if hit(m, lResetWords) && followedBy(t, []string{"limit", "quota"}, 40, wResetWords...) {
		return true
	}
	if hit(m, lWindowUnits) && hit(m, lWindowObjects) &&
		reWindowNumber.MatchString(t) {
		return true
	}
	return hasNonASCII(t) && reCNWindow.MatchString(t)
}

func parseCount(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	return n, err == nil
}

func isContextOverflow(t string, m uint64) bool {
	if hit(m, lContext) {
		return true
	}
	if strings.Contains(t, "exceed") && strings.Contains(t, "context") && reContextExceed.MatchString(t) {
		return true
	}
	if strings.Contains(t, ">") { // "prompt is too long: 210000 tokens > 200000 maximum"
		if g := reTokensGT.FindStringSubmatch(t); g != nil {
			a, ok1 := parseCount(g[1])
			b, ok2 := parseCount(g[2])
			if ok1 && ok2 && a > b {
				return true
			}
		}
	}
	// "Limit X, Requested Y" with Y > X: one request larger than the tier allows.
	if strings.Contains(t, "requested") && limitBelowRequested(t) {
		return true
	}
	return false
}

// limitBelowRequested finds "limit[:] X ... requested[:] Y" in one sentence with Y > X.
func limitBelowRequested(t string) bool {
	from := 0
	for n := 0; n < 8; n++ {
		i := strings.Index(t[from:], "limit")
		if i < 0 {
			return false
		}
		i += from + len("limit")
		from = i
		x, end, ok := numberAfter(t, i)
		if !ok {
			continue
		}
		w := t[end:min(len(t), end+80)]
		if k := sentenceEnd(w); k >= 0 {
			w = w[:k]
		}
		j := strings.Index(w, "requested")
		if j < 0 {
			continue
		}
		y, _, ok := numberAfter(w, j+len("requested"))
		if ok && x > 0 && y > x {
			return true
		}
	}
	return false
}

// numberAfter reads "[: ]1,000" at t[i:] (up to three separator bytes).
func numberAfter(t string, i int) (int64, int, bool) {
	for k := 0; k < 3 && i < len(t) && !isDigit(t[i]); k++ {
		if c := t[i]; isWordByte(c) {
			return 0, i, false
		}
		i++
	}
	j := i
	var n int64
	for j < len(t) && (isDigit(t[j]) || t[j] == ',' && j+1 < len(t) && isDigit(t[j+1])) {
		if isDigit(t[j]) {
			if n > 1e15 {
				return 0, j, false
			}
			n = n*10 + int64(t[j]-'0')
		}
		j++
	}
	return n, j, j > i
}

func isOverloaded(t string, m uint64) bool {
	if hit(m, lOverloaded) {
		return true
	}
	return strings.Contains(t, "capacity") && reCapacity.MatchString(t)
}

func isRateLimit(t string, m uint64) bool {
	if hit(m, lRateLimit) {
		return true
	}
	if hit(m, lRateWords) && hasWord(t, "rpm", "tpm", "rpd", "tpd", "ipm", "itpm", "otpm", "429") {
		return true
	}
	return hit(m, lLimitVerbs) && regexpLimitHit.MatchString(t)
}

var regexpLimitHit = regexp.MustCompile(`\b(?:limits?|quotas?)\s+(?:exceeded|reached|hit)\b|\b(?:exceeded|reached|hit)\s+(?:the|your|its)?\s*(?:limits?|quotas?)\b`)

// isModelAccess: access denials that name the model (Bedrock AccessDenied for a
// model id, DashScope Model.AccessDenied): switch model rather than rotate keys.
func isModelAccess(t string, m uint64) bool {
	return hit(m, lModelAccess)
}

func isAuth(t string, m uint64) bool {
	if hit(m, lAuth) {
		return true
	}
	if hit(m, lAuthWords) && hasWord(t, "forbidden") {
		return true
	}
	if strings.Contains(t, "无效") && hit(m, lCNKeyWords) {
		return true
	}
	return hit(m, lAuthWords) && hasWord(t, "401", "403")
}

func isModelNotFound(t string, m uint64) bool {
	if hit(m, lModelNotFound) {
		return true
	}
	if strings.Contains(t, "invalid model") && !strings.Contains(t, "invalid model reference") {
		return true
	}
	if strings.Contains(t, "invalid_model") {
		return true
	}
	if strings.Contains(t, "模型") && hit(m, lCNModelMissing) {
		return true
	}
	if hit(m, lModelWord) && followedBy(t, []string{"model"}, 100, "not found", "not exist", "does not exist", "doesn't exist",
		"do not exist", "could not be found", "cannot be found", "can't be found", "is not available",
		"not available", "unavailable", "is not supported", "not supported", "deprecated", "decommissioned",
		"retired", "no longer", "not enabled", "not loaded", "not served", "not accessible", "has been disabled",
		"is disabled", "not allowed", "not permitted", "not a valid") {
		return true
	}
	return hit(m, lDeployWords) && followedBy(t, []string{"deployment", "engine", "endpoint"}, 60, "not found", "does not exist", "not exist")
}

func isFormat(t string, m uint64) bool {
	return hit(m, lFormat)
}

func isTimeoutText(t string, m uint64, ev *evidence) bool {
	if hit(m, lTimeout) {
		return true
	}
	if hit(m, lTimeoutWords) && hasWord(t, wTimeoutWords...) {
		return true
	}
	if strings.Contains(t, "reason") && reStopReason.MatchString(t) {
		return true
	}
	for _, c := range ev.codes {
		switch strings.ToLower(c) {
		case "internal", "unavailable", "deadline_exceeded", "api_error", "server_error", "internal_server_error":
			return true
		}
	}
	return false
}

func hasNonASCII(t string) bool {
	for i := 0; i < len(t); i++ {
		if t[i] >= 0x80 {
			return true
		}
	}
	return false
}

// Phrase lists, by index into phraseTable. One scan of the text (phraseIndex)
// sets bit c of a mask when a phrase of list c occurs.
const (
	lTimeoutGuard = iota
	lAborted
	lContentFilter
	lAuthPermanent
	lAuthPermVerbs
	lGoogleQuota
	lQuotaBilling
	lBilling
	lCNCredit
	lPlanWords
	lUsageWindow
	lWindowUnits
	lWindowObjects
	lContext
	lOverloaded
	lRateLimit
	lLimitVerbs
	lModelAccess
	lAuth
	lCNKeyWords
	lModelNotFound
	lCNModelMissing
	lFormat
	lTimeout
	catORKeyLimit
	catQuotaExhausted
	catStatusWords
	catRecoveryWords
	lBillingHints
	// gates: a rule that needs one of these words skips its scan when none occurs
	lTopUp
	lPeriodWords
	lResetWords
	lRateWords
	lAuthWords
	lModelWord
	lDeployWords
	lTimeoutWords
)

// Word lists shared by a gate and the rule it guards.
var (
	wTopUp        = []string{"top up", "top-up", "topup"}
	wPeriodWords  = []string{"daily", "weekly", "monthly", "hourly", "yearly", "annual"}
	wResetWords   = []string{"reset", "refresh", "renew", "regain"}
	wTimeoutWords = []string{"terminated", "internal", "unavailable", "eof"}
)

var phraseTable = [][]string{
	lTimeoutGuard: {
		"timeout", "timed out", "time out",
	},
	lAborted: {
		"request was aborted", "request aborted", "request was cancelled", "request was canceled",
		"request cancelled", "request canceled", "cancelled by user", "canceled by user", "cancelled by the user",
		"canceled by the user", "aborted by user", "aborted by the user", "user aborted", "client closed request",
		"canceled by the client", "cancelled by the client", "请求已取消", "用户取消",
	},
	lContentFilter: {
		"content_filter", "content filter", "content_policy", "content policy", "contentpolicy", "invalid_prompt",
		"datainspectionfailed", "data inspection failed", "blockreason", "responsibleaipolicyviolation",
		"flagged as potentially violating", "violating our usage policy", "violates our usage polic",
		"violation of our usage polic", "content management policy", "safety system", "safety filter",
		"safety setting", "blocked by safety", "blocked due to safety", "safety reasons", "prohibited_content",
		"prohibited content", "inappropriate content", "harmful content", "moderation_blocked",
		"flagged by moderation", "flagged by our moderation", "output blocked", "response was blocked",
		"prompt was blocked", "sensitive content", "sensitive words", "sensitive_words", "stop reason: refusal",
		"stop_reason: refusal", "finish_reason: refusal", "refusal", "敏感", "内容安全", "违规", "不当内容", "内容审核", "安全审核",
		"不合规", "input was flagged", "output was flagged", "content was flagged", "requires moderation",
		"new_sensitive",
	},
	lAuthPermanent: {
		"account_deactivated", "deactivated account", "deactivated_workspace", "deactivated workspace",
		"organization_deactivated", "not allowed for this organization", "not allowed for this organisation",
		"reported as leaked", "key was leaked", "leaked api key", "key has been leaked", "invalid_grant",
		"refresh token is invalid", "refresh token has expired", "refresh token expired", "refresh token revoked",
		"oauth token refresh failed", "access_terminated", "account_suspended", "account_banned", "封禁", "已被禁用",
		"已禁用", "已停用", "被冻结", "已冻结", "已注销", "账号异常", "账户异常",
	},
	lAuthPermVerbs: {
		"deactivated", "suspended", "banned", "revoked", "terminated", "restricted", "blocked", "disabled",
		"deleted", "frozen", "locked",
	},
	lGoogleQuota: {
		"quota exceeded for metric", "resource_exhausted", "quotafailure", "quota_metric",
	},
	lQuotaBilling: {
		"exceeded your current quota", "exceeded current quota", "exceeded_current_quota",
		"check your plan and billing details",
	},
	lBilling: {
		"insufficient_quota", "insufficient quota", "billing_hard_limit", "billing hard limit",
		"billing_not_active", "billing not active", "billing_error", "billing error", "billing is not enabled",
		"billing has been disabled", "billing account", "enable billing", "billing to be enabled", "billing issue",
		"billing_issue", "credit balance", "insufficient credit", "insufficient_credit", "not enough credit",
		"out of credits", "no credits", "credits exhausted", "credits have been exhausted", "credits remaining: 0",
		"requires more credits", "purchase credits", "purchase more credits", "buy credits", "buy more credits",
		"used all available credits", "credit limit reached", "insufficient balance", "insufficient_balance",
		"insufficientbalance", "insufficient account balance", "insufficient funds", "insufficient_funds",
		"balance is too low", "balance too low", "balance is insufficient", "balance not enough",
		"not enough balance", "negative balance", "balance has been exhausted", "payment required",
		"payment_required", "payment method", "add a payment", "payment is overdue", "payment overdue",
		"payment failed", "arrearage", "overdue", "arrears", "unpaid", "please recharge", "recharge your account",
		"freetieronly", "free tier of the model has been exhausted", "free tier is not available",
		"commoditynotpurchased", "unpurchased", "not purchased", "invalidsubscription",
		"valid coding plan subscription", "subscription has expired", "subscription expired",
		"subscription is inactive", "no active subscription", "subscription is not active",
		"does not include access", "plan does not include", "spending limit reached for your plan",
		"exceeded your credit", "credits to continue", "余额不足", "欠费", "充值", "账户余额", "无可用资源包", "资源包已用完", "资源包已耗尽",
		"套餐已过期", "套餐已到期", "未购买", "请购买", "余额已用完", "余额为0", "信用额度",
	},
	lCNCredit: {
		"额度不足", "额度已用尽", "额度已用完", "额度已耗尽",
	},
	lPlanWords: {
		"not available", "not included", "does not include", "not supported", "upgrade",
	},
	lUsageWindow: {
		"usage limit", "usage_limit", "spending limit", "spend limit", "spending cap", "spend cap", "usage cap",
		"regain access", "limit will reset", "limits will reset", "limit resets", "resets tomorrow",
		"reset tomorrow", "free allocation", "weekly limit", "daily limit", "monthly limit", "hourly limit",
		"quota will reset", "quota resets", "rolling window", "rolling time window", "automatic quota refresh",
		"subscription quota limit", "使用上限", "用量上限", "用量已达", "使用额度已达",
	},
	lWindowUnits: {
		"hour", "hrs", "day", "week", "month",
	},
	lWindowObjects: {
		"limit", "quota", "window", "allowance",
	},
	lContext: {
		"context_length_exceeded", "context length exceeded", "context_window_exceeded", "context window exceeded",
		"maximum context length", "max context length", "maximum context window", "exceeds the context window",
		"exceeds context window", "exceeds the model's context", "exceeds the model's maximum context",
		"exceeds model context", "exceeds the maximum context", "exceed context limit", "exceeds context limit",
		"exceeds the context limit", "context limit exceeded", "context overflow", "context length is",
		"prompt is too long", "prompt too long", "prompt is too large", "prompt too large", "request_too_large",
		"request too large", "request is too large", "request entity too large", "payload too large",
		"input is too long", "input too long", "input is too large", "input too large", "input token count",
		"too many input tokens", "exceeds the maximum number of tokens", "maximum number of tokens allowed",
		"exceeds the maximum number of input tokens", "range of input length", "input length exceeds",
		"input length should be", "input tokens exceed", "reduce the length of the messages", "model token limit",
		"exceeds the token limit", "token limit exceeded for the model", "request exceeds the maximum size",
		"request size exceeds", "body length constraint", "maximum prompt length", "message is too long",
		"messages are too long", "too many tokens in the prompt", "larger than the model's context", "上下文过长",
		"上下文超出", "上下文长度超", "超出最大上下文", "超出上下文", "超过上下文", "请压缩上下文", "输入过长", "输入长度超", "超出最大长度", "超过最大长度", "超过模型最大",
		"超出模型最大", "文本过长", "长度超过限制", "超出长度限制", "string_above_max_length", "string too long", "超长",
	},
	lOverloaded: {
		"overloaded", "overload", "high demand", "high load", "heavy load", "too busy", "server is busy",
		"servers are busy", "service is busy", "system is busy", "currently busy", "is busy",
		"modelnotreadyexception", "model not ready", "model is not ready", "currently loading", "model is loading",
		"is still loading", "model is currently unavailable", "model is temporarily unavailable",
		"temporarily unavailable due to", "insufficientcapacity", "insufficient_capacity", "engine_overloaded",
		"no available capacity", "繁忙", "过载", "负载过高", "负载较高", "访问量过大", "请求量过大", "资源紧张", "算力不足", "模型未就绪", "模型加载中",
		"模型正在加载", "capacity_exceeded", "capacity exceeded",
	},
	lRateLimit: {
		"rate limit", "rate_limit", "ratelimit", "rate-limit", "rate limited", "too many requests",
		"too_many_requests", "too many concurrent", "concurrency", "concurrent request", "throttl",
		"requests per minute", "tokens per minute", "requests per day", "tokens per day", "requests per second",
		"per minute", "per-minute", "per second", "per day", "resource_exhausted", "resource exhausted",
		"resource has been exhausted", "quota exceeded", "quota_exceeded", "exceeded quota", "exceeded the quota",
		"quota limit", "allocated quota", "exceeded your current quota", "model_cooldown", "too many tokens",
		"slow down", "request limit", "requests limit", "servicequotaexceeded", "service quota", "请求过于频繁", "频繁",
		"频率", "限流", "并发", "请求次数", "速率", "配额", "请求过多", "太多请求", "超过限制", "限速", "too many connections",
	},
	lLimitVerbs: {
		"exceeded", "reached", " hit",
	},
	lModelAccess: {
		"access to the model", "access to model", "access to this model", "model.accessdenied", "model_not_found",
		"modelnotfound", "model_decommissioned", "deploymentnotfound", "deployment_not_found",
		"not found the model", "resource_not_found",
	},
	lAuth: {
		"invalid api key", "invalid_api_key", "invalid api-key", "invalidapikey", "invalid x-api-key",
		"incorrect api key", "api key not valid", "api_key_invalid", "api key not found", "api key is invalid",
		"api key is missing", "missing api key", "no api key", "api key required", "api key is required",
		"invalid key", "key is invalid", "key not valid", "invalid token", "invalid_token", "token is invalid",
		"token expired", "token has expired", "expired token", "key has expired", "key expired", "authentication",
		"unauthenticated", "unauthorized", "unauthorised", "not authorized", "authorization required",
		"authorization header", "permission_error", "permission denied", "permission_denied",
		"insufficient permission", "insufficient_permission", "does not have permission", "do not have permission",
		"missing scope", "access denied", "access_denied", "accessdenied", "no such user", "user not found",
		"invalid credentials", "invalid_credentials", "no credentials", "missing credentials",
		"credentials not found", "could not validate credentials", "could not authenticate", "bad credentials",
		"login fail", "signature does not match", "security token", "unrecognizedclient", "invalid authorization",
		"not allowed to access", "ip not authorized", "ip_not_authorized", "api key provided",
		"check your api key", "鉴权失败", "认证失败", "身份验证失败", "无权访问", "未授权", "密钥无效", "令牌无效", "令牌已过期", "无效的令牌", "令牌验证失败",
		"没有权限", "权限不足",
	},
	lCNKeyWords: {
		"key", "令牌", "密钥", "token",
	},
	lModelNotFound: {
		"model not found", "model_not_found", "unknown model", "unknown_model", "no endpoints found",
		"no endpoint found", "no allowed providers", "router not found", "not_found_error", "no models loaded",
		"no model loaded", "model not loaded", "not a valid model", "not supported model", "unsupported model",
		"unsupported_model", "resourcenotfoundexception", "model_decommissioned", "decommissioned", "模型不存在",
		"模型未找到", "找不到模型", "不支持该模型", "不支持的模型", "模型已下线", "模型已下架", "无可用渠道", "no available model provider",
		"no available provider", "no providers available", "identifier is invalid", "invalid model identifier",
		"invalid model id", "model id is invalid",
	},
	lCNModelMissing: {
		"不存在", "未找到", "找不到", "下线", "下架", "不支持",
	},
	lFormat: {
		"invalid request", "invalid_request", "invalid_argument", "invalid argument", "invalid parameter",
		"invalid_parameter", "invalidparameter", "invalid value", "invalid_value", "unsupported parameter",
		"unsupported_parameter", "unsupported value", "unsupported_value", "unrecognized request argument",
		"unrecognized", "extra inputs are not permitted", "extra_forbidden", "validation error",
		"validationexception", "validation_error", "bad request", "badrequest", "malformed", "not valid json",
		"invalid json", "json_invalid", "parse error", "failed to parse", "could not parse", "must be",
		"is required", "missing required", "string should match pattern", "tool_use", "tool_call",
		"roles must alternate", "does not support", "is not supported", "not supported",
		"must end with a user message", "prefill", "invalid type", "expected a", "schema", "参数错误", "参数无效", "参数不合法",
		"无效的参数", "请求参数", "格式错误", "不合法", "不支持",
	},
	lTimeout: {
		"timeout", "timed out", "time out", "deadline exceeded", "deadline_exceeded", "internal server error",
		"internal_server_error", "internal error", "internal_error", "internalerror", "internalserverexception",
		"server_error", "server error", "server had an error", "error occurred while processing", "bad gateway",
		"gateway timeout", "service unavailable", "service_unavailable", "serviceunavailable",
		"temporarily unavailable", "upstream", "backend error", "connection reset", "connection refused",
		"connection error", "connection closed", "connection aborted", "connection lost", "connection was closed",
		"network error", "network is unreachable", "no such host", "i/o timeout", "unexpected eof", "broken pipe",
		"socket hang up", "other side closed", "fetch failed", "econnreset", "econnrefused", "econnaborted",
		"etimedout", "esockettimedout", "enotfound", "eai_again", "ehostunreach", "enetunreach", "epipe",
		"und_err", "stream_read_error", "stream closed", "stream was closed", "stream aborted",
		"stream ended unexpectedly", "premature close", "operation was aborted", "an unknown error occurred",
		"unknown error, 520", "web server is returning an unknown error", "web server is down",
		"origin is unreachable", "a timeout occurred", "modeltimeoutexception", "modelerrorexception",
		"modelstreamerrorexception", "please retry or report", "try again later", "retry your request",
		"tls handshake", "内部错误", "服务器错误", "服务器内部错误", "系统错误", "系统异常", "网络错误", "网络异常", "服务暂时不可用", "服务不可用", "请求超时",
		"连接超时", "连接错误", "超时",
	},
	catORKeyLimit: {
		"key limit exceeded", "key limit reached", "budget limit exceeded", "key budget",
	},
	catQuotaExhausted: {
		"quota has been exhausted", "quota is exhausted", "quota was exhausted", "quota exhausted",
		"quota has been used up", "out of quota",
	},
	catStatusWords: {
		"http", "status", "error code",
	},
	catRecoveryWords: {
		"again", "retry", "wait", "reset", "available", "refresh", "cooldown", "cool down", "regain", "until",
		"resume", "renew", "restore", "after", "unlock", "恢复", "重置", "解除", "刷新", "之后", "后再", "可用", "后",
	},
	lBillingHints: {
		"billing", "quota", "balance", "credit", "payment", "overdue", "欠费", "余额",
	},
	lTopUp:       wTopUp,
	lPeriodWords: wPeriodWords,
	lResetWords:  wResetWords,
	// "itpm" and "otpm" contain "tpm"
	lRateWords:    {"rpm", "tpm", "rpd", "tpd", "ipm", "429"},
	lAuthWords:    {"forbidden", "401", "403"},
	lModelWord:    {"model"},
	lDeployWords:  {"deployment", "engine", "endpoint"},
	lTimeoutWords: wTimeoutWords,
}
