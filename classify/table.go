package classify

import (
	"strings"
	"sync"
)

// The text step: families of meaning, in the order of C1 (deterministic
// signatures before transient ones; within them the more specific first). A family
// is a list of rules; a rule needs a literal key in the text (cheap to look for)
// and then, when it has one, a regular expression that anchors the meaning: a
// subject next to its verb ("account ... has been suspended"), a status number
// only where it reads as a status, a lone word only as the whole message. So
// "The user terminated the session manually." and "402 items found in the
// database" match nothing.
//
// The texts are lower-cased, URLs are removed, and the parts of a body (message,
// raw upstream message, error text) are joined by " | ": a gap in a pattern never
// crosses a part or a sentence.

// rank orders the families for C1: a lower rank wins.
type rank int

const (
	rankAborted rank = iota
	rankLocal        // detour's own process out of descriptors or memory (A4)
	rankNoDetails
	rankContentFilter
	rankAuthPermanent
	rankBilling
	rankWindow // periodic usage windows and self-set spend caps: rate_limit (C3)
	rankContext
	rankCrashed // a local runtime's process died: says nothing about who must act (C7)
	rankOverloaded
	rankRateLimit
	rankBillingRemedy // "purchase credits", "upgrade your plan" with nothing stronger
	rankModelNotFound
	rankAuth
	rankStream // a stream that broke off or a resource busy (C6), said in words specific enough to beat format
	rankFormat
	rankNotASignal // C7: specific texts that say nothing about who must act
	rankGeneric    // C6: server, gateway, network and stream wording
)

// reLocation: the provider will not serve the caller's country or region.
const reLocation = `\blocation is not supported\b|\bnot (available|supported) in your (country|region|territory|location)\b|\bunsupported[ _]country\b|\bcountry, region, or territory not supported\b|\bfrom unsupported countries, regions,? or territories\b`

// Shared vetoes.
var (
	// A Google per-metric quota reuses OpenAI's billing sentence for a rate window.
	reGoogleMetric = rx(`quota exceeded for (quota )?metric|quota_metric|quotametric|quota metric`)
	// Billing words that make a suspension a billing matter, not a revoked key.
	reBillingWords = rx(`billing|balance|credit|payment|overdue|invoice|arrear|unpaid|quota|plan\b|欠费|余额`)
	// Rate wording: a token count over a per-minute limit is a rate limit.
	reRateWords = rx(`rate[ _-]?limit|per[ -](minute|min|second|day|hour)\b|\b(tpm|rpm|tpd|rpd)\b|tokens per|requests per`)
	// ... and a max_tokens over the model's output cap is a bad parameter.
	reRateOrOutputCap = rx(`rate[ _-]?limit|per[ -](minute|min|second|day|hour)\b|\b(tpm|rpm|tpd|rpd)\b|tokens per|requests per|\b(maximum|max)[ _](new[ _])?tokens\b`)
	// The account's access ended (for a policy violation, say): not a filtered request.
	reAccessEnded = rx(`\baccess (was |has been |is )?(terminated|revoked|suspended|banned)\b|\b(account|organi[sz]ation|team|workspace|project|key)s? (was |has been |is |have been )?(terminated|suspended|banned|deactivated|disabled)\b|\b(has been|have been|was|is) (terminated|suspended|banned|deactivated|disabled|blocked|locked) (in|for|on) (this|your|the) (account|organi[sz]ation|project|workspace|team)\b`)
	// Traffic that an abuse guard blocks for a while (Google's "unusual traffic
	// from your computer network ... The block will expire shortly after those
	// requests stop"): the requests' rate broke the terms, not their content.
	reTrafficBlock         = rx(`\bdetected unusual traffic\b|\bunusual traffic (from|coming from) your\b|\bsending automated (queries|requests|traffic)\b|\b(block|ban|restriction)s? (will|should) (expire|be lifted|lift)\b`)
	reAccessEndedOrTraffic = rx(reAccessEnded.String() + `|` + reTrafficBlock.String())
	// An IAM role without the permission is the credential's problem, not the model's.
	reIAM = rx(`\biam\b|not authori[sz]ed to perform`)
	// Go's JSON syntax errors name an "object key": a malformed body, not a bad key.
	reGoJSONSyntax = rx(`\binvalid character '.{1,6}' (looking for|after|in)\b`)
	// A block that lifts by itself is an ordinary auth cooldown, not a disable.
	reTemporary = rx(`\btemporar(y|ily)\b|\bfor (\d+|a few|several) (seconds?|minutes?|hours?)\b|\btry again (later|in)\b`)
	// Billing words, or a block that lifts by itself: neither is a revoked account.
	// A guess is no statement: "account may be suspended or lack permissions"
	// (a relay's reading of any 403) says nothing was suspended.
	reHedge = rx(`\b(may|might|could) (have )?(be|been) (suspended|disabled|banned|blocked|deactivated|restricted|locked|revoked)\b|\b(possibly|probably|perhaps) (suspended|disabled|banned|blocked|deactivated|restricted|locked|revoked)\b|\bor lacks? (the )?(required )?permissions?\b`)
	// Billing words, a block that lifts by itself, or a guess: none is a revoked account.
	reBillingOrTemporaryOrHedge = rx(reBillingWords.String() + `|` + reTemporary.String() + `|` + reHedge.String())
	reBillingOrHedge            = rx(reBillingWords.String() + `|` + reHedge.String())
	// Only a person lifts it: support must be contacted, an identity verified.
	reLiftedByPerson = rx(`\b(contact|reach out to) (our |the )?(support|customer service|customer support|help ?center)\b|\bverify your identity\b|\bsubmit an appeal\b`)
	// Words of a periodic window (C3): an allowance that resets is a rate limit.
	reWindowWords = rx(`\b(daily|weekly|monthly|hourly|per[ -](minute|second|hour|day)|today|tomorrow|resets?|refresh(es)?)\b`)
	// A budget over a period (LiteLLM's budget_duration, "crossed budget ... >= 1d"): it resets (C3).
	reBudgetWindow = rx(reWindowWords.String() + `|\bbudget[ _]duration\b|>=? ?\d+(d|h|w|mo)\b`)
	// A field or parameter named in quotes: a value of the request, not the prompt.
	reNamedField = rx(`'[^'|]{1,40}' (field|parameter|param|property|argument)\b|\b(field|parameter|param|property|argument) '[^'|]{1,40}'`)
	reOnlyUsedIn = rx(`\b(keys?|tokens?|credentials?|tier|plan|subscription)\b[^|.]{0,20}\b(can|may) only be used (in|with|from|by|for)\b`) // bound to one client: auth
	// A limit of one request's shape or of its output, not of a rate.
	reShapeOrOutputCap = rx(`\bper (message|request|prompt|call|turn|conversation|input|response)\b|\bin a single (message|request|prompt|call|turn|conversation)\b|\bmax[_ ]?(completion[_ ]|output[_ ]|new[_ ])?tokens\b|\boutput (token )?limit\b`)
	// A count of output tokens, bytes or images over a cap is a parameter or an
	// attachment of the request, not a prompt too long for the window.
	reNotPromptCount = rx(`\bmax[_ ](new[_ ]|completion[_ ]|output[_ ])?tokens\b|\boutput tokens\b|\bcompletion tokens\b|\bbytes\b|\bimages?\b|\bmb\b|\bfiles?\b|\battachments?\b|\buploads?\b|\bpdfs?\b|\bvideos?\b|\bper[ -](minute|second|hour|day)\b|\b(tpm|rpm|tpd|rpd)\b|rate[ _-]?limit`)
	// A request parameter named right after "not supported", or the one to use
	// instead: the request must change, not the model.
	reParamNotSupported = rx(`\bnot supported (with |for |the |parameter |param )*['"]?(max_?tokens|max_?completion_?tokens|temperature|top_[pk]|logprobs|stop|presence_penalty|frequency_penalty|stream_options|reasoning_effort|n)\b|\bplease use (the )?['"]?max_?completion_?tokens\b`)
)

// reIAMDenial is Google IAM's denial of a permission on a resource, with its
// boilerplate "(or it may not exist)".
const reIAMDenial = `\bpermission '[^'|]{1,80}' denied on\b|\(or it may not exist\)`

// reModelRegion: a model the account's region does not serve (not the caller's
// country refused, which is reLocation).
const reModelRegion = `\bmodels?\b~\b(is |are )?(currently )?(unavailable|not available|not supported|not offered)\b~\bin (your|this|the|the current|the selected|your current) (region|cloud region)\b|\benable cross[- ]region (inference|calls)\b`

// families is the text step's table, in rank order, built on the first
// failure (buildFamilies).
var families = sync.OnceValue(buildFamilies)

func buildFamilies() []family {
	fs := []family{
		{name: "aborted", rank: rankAborted, reason: ReasonAborted, rules: []rule{
			// Only a caller's cancel without a server response (see specificAdmits);
			// a server's 408 "Request was aborted" is a timeout.
			pat("request-aborted", "abort", `\brequest (was |has been )?aborted\b|\b(user|caller|client) aborted\b|\baborted by (the )?(user|client|caller)\b`),
			pat("cancelled-by-caller", "cancel", `\b(request|call|generation|completion) (was |has been )?cancell?ed\b|\bcancell?ed by (the )?(user|client|caller)\b`).
				unlessRe(rx(`\btimeout\b|deadline`)), // Go's "request canceled ... (Client.Timeout exceeded ...)" is a timeout
			pat("interrupted-by-user", "interrupted|context cancel|disconnected", `\binterrupted by (the )?(user|caller|client)\b|\bcontext cancell?ed\b|\b(request|connection) (is |was |has been )?disconnected (from|by) the client( side)?\b`),
			// Apple's URLSession when the app cancels its task (NSURLErrorCancelled).
			// The caller's cancel: the browser's "signal is aborted without reason", anyio's cancel scopes.
			pat("signal-aborted", "signal|cancel scope", `\bsignal (is |was |has been )?aborted\b|\bcancell?ed by (a |the )?cancel scope\b`),
			pat("nsurl-cancelled", "-999", `\bnsurlerrordomain code=-999\b|\bnsurlerrorcancelled\b`),
			lit("cancelled-zh", "请求已取消", "用户取消", "已取消请求"),
			// Client libraries' own cancel, said as the whole error: axios'
			// "CanceledError: canceled" (ERR_CANCELED), Python's
			// asyncio CancelledError, OkHttp's "java.io.IOException: Canceled",
			// Kotlin's "JobCancellationException: Job was cancelled".
			pat("client-cancel", "cancel|err_canceled", `(?:^|\| )(?:[\w.]*\.)?cancell?ederror(?::\s*cancell?ed)?\W{0,3}(\||$)|\berr_canceled\b|\bjobcancellationexception\b|\bjob was cancell?ed\b|(?:^|\| )java\.io\.ioexception: canceled\W{0,3}(\||$)`),
		}},
		{name: "local-resource", rank: rankLocal, reason: ReasonLocal, rules: []rule{
			// The client's own error text with no response (A4): Go's "socket: too
			// many open files", Python's "[Errno 24] Too many open files", Node's
			// EMFILE, "cannot allocate memory". The provider did nothing; with an
			// HTTP status the words are the provider's own trouble.
			pat("out-of-descriptors", "open files|emfile|enfile|allocate memory|errno 24|errno 12",
				`\btoo many open files\b|\b(emfile|enfile)\b|\bcannot allocate memory\b|\[errno (24|12)\]`).
				when(func(c *textCtx, _ string) bool { return c.rawHTTP == 0 }),
		}},
		{name: "no-error-details", rank: rankNoDetails, reason: ReasonNoErrorDetails, rules: []rule{
			lit("literal", "no error details in response"),
		}},
		{name: "content-filter", rank: rankContentFilter, reason: ReasonContentFilter, rules: []rule{
			pat("policy-violation", "violat|against|breach", `\b(violat\w*|against|breach\w*)\b~\b(polic(y|ies)|terms of (service|use)|(usage|content|community) guidelines)\b`).unlessRe(reAccessEndedOrTraffic),
			pat("content-filter", "content", `\bcontent[ _-]?(filter\w*|polic(y|ies)|management polic(y|ies)|moderation)\b`).
				unlessRe(rx(`\b(invalid|unknown|unsupported|malformed|not a valid)( content[ _-]?filter(ing)?)? (polic(y|ies)|configuration|config)\b|\bprovide a valid (polic(y|ies)|configuration)\b`)),
			pat("flagged", "flagged", `\b(prompt|input|output|content|request|message|response|text)s? (was |were |has been |is )?flagged\b|\bflagged (as|for|by)\b`),
			pat("safety-system", "safety", `\bsafety (system|filters?|settings?|reasons?|polic(y|ies)|checks?)\b|\bblocked (by|due to) safety\b`),
			pat("harmful-content", "content", `\b(harmful|inappropriate|unsafe|prohibited|sensitive|explicit|disallowed|violating|illegal) ((input|output|prompt|generated|response|user) )?content\b`),
			// OCI's "Inappropriate output content detected in output blocklist"; Gemini
			// SDKs' "Candidate was blocked due to RECITATION" (the finish reason, quoted).
			pat("blocklist", "blocklist|block list", `\bdetected in (the )?(input |output |prompt |response )?block ?list\b|\bblocked by (the |a )?(custom |content )?block ?list\b|\bmatched (the |a )?block ?list\b`),
			pat("blocked-for-filter", "blocked", `\b(candidate|response|prompt|output|input|content|generation|completion|answer)s? (was |were |has been |have been |is |got )?blocked (due to|because of|for) (safety|recitation|prohibited[ _]content|blocklist|spii|image[ _]safety|(the )?content (policy|filter))\b`),
			// A safety stop by its block reason in any spelling: "block_reason: PROHIBITED_CONTENT",
			// "BlockedReason.OTHER", "BlockedReasonSafety", "blocked/empty due to SPII", "blocked prompt".
			pat("block-reason", "block", `\bblock(ed)?[ _]?reason\W{1,4}(blockedreason\.)?(safety|other|prohibited[ _]?content|blocklist|spii|image[ _]safety|recitation)\b|\bblockedreason(safety|other|prohibitedcontent|blocklist|spii|imagesafety)\b|\bblocked(/empty)? (due to|for reason|because of)\W{1,3}(safety|prohibited[ _]content|blocklist|spii|recitation)\b|\bblocked prompt\b|\bprompt (was |is |has been )?blocked\b`),
			pat("content-risk", "risk", `\bcontent (exists|has|contains|carries) risks?\b|\brisky content\b|\bcontent risk\b`),
			pat("refusal", "refus|declin", `\brefusal\b|\brefused to (answer|respond|comply|generate)\b|\b(model|assistant|claude|gemini|gpt|llm|ai|bot)\b~\b(declined|refused) to (answer|respond|comply|generate|continue|assist|help)\b`),
			pat("moderation", "moderation", `\b(requires|failed|blocked by|flagged by|rejected by)( our)? moderation\b|\bmoderation (blocked|failed|rejected)\b`),
			lit("data-inspection", "data inspection failed"),
			word("sensitive-token", "new_sensitive", "input_sensitive", "output_sensitive"),
			// one-api/new-api's own word filter ("sensitive_words_detected"), a platform
			// gateway's "sensitive_word_detected": the content was refused, whatever
			// status the relay sends with it.
			pat("sensitive-words", "sensitive", `\bsensitive[ _]words?[ _](detected|found|hit|matched)\b|\b(detected|found|contains?|hit) (a |an )?sensitive[ _]words?\b`),
			lit("sensitive-zh", "敏感", "内容安全", "内容审核", "安全审核", "不当内容", "违规内容", "内容违规", "不合规内容", "涉及违规", "含有违规", "不安全"),
			// Japanese and Korean: content refused by a safety or content policy.
			lit("sensitive-ja-ko", "不適切な内容", "不適切なコンテンツ", "安全ポリシーに違反", "コンテンツポリシーに違反", "ポリシーに違反", "有害なコンテンツ", "부적절한 콘텐츠", "부적절한 내용", "유해한 콘텐츠", "콘텐츠 정책", "안전 정책", "정책을 위반", "정책 위반"),
			// ... and in the European and other languages relays write in.
			lit("sensitive-intl", "política de contenido", "contenido inapropiado", "política de conteúdo", "conteúdo impróprio",
				"politique de contenu", "contenu inapproprié", "inhaltsrichtlinie", "unangemessene inhalte", "politica sui contenuti",
				"contenuto inappropriato", "политику контента", "политики контента", "недопустимый контент", "içerik politikası",
				"chính sách nội dung", "kebijakan konten"),
		}},
		{name: "auth-permanent", rank: rankAuthPermanent, reason: ReasonAuthPermanent, rules: []rule{
			pat("subject-disabled", "deactivated|suspended|banned|revoked|terminated|disabled|deleted|frozen|blocked|restricted|locked",
				`\b(account|organi[sz]ation|org|workspace|team|project|api[ _-]?key|key|token|credential)s?\b~\b(deactivated|suspended|banned|revoked|terminated|disabled|deleted|frozen|blocked|restricted|locked)\b`).and("account|organi|org|workspace|team|project|key|token|credential").unlessRe(reBillingOrTemporaryOrHedge),
			// A suspension, even a "temporary" one, that only a person lifts ("contact our support
			// team to verify your identity"): waiting does not bring the credential back.
			pat("lifted-by-a-person", "suspended|locked|disabled|blocked|deactivated",
				`\b(account|user|id|organi[sz]ation|org|workspace|team|key|token)s?\b~\b(suspended|locked|disabled|blocked|deactivated)\b`).
				unlessRe(reBillingOrHedge).when(func(c *textCtx, _ string) bool { return reLiftedByPerson.MatchString(c.text) }),
			pat("disabled-subject", "deactivated|suspended|banned|revoked|terminated|disabled|deleted|frozen|blocked|restricted|locked",
				`\b(deactivated|suspended|banned|revoked|terminated|disabled|deleted|frozen|blocked|restricted|locked)[ _](account|organi[sz]ation|workspace|team|project|api key|key)\b`).and("account|organi|workspace|team|project|key").unlessRe(reBillingOrTemporaryOrHedge),
			// "Gemini has been disabled in this account", "the API is disabled for the project"
			pat("disabled-in-account", "deactivated|suspended|banned|terminated|disabled|blocked|locked",
				`\b(has been|have been|was|is|got) (deactivated|suspended|banned|terminated|disabled|blocked|locked) (in|for|on) (this|your|the) (account|organi[sz]ation|org|project|workspace|team)\b`).unlessRe(reBillingOrTemporaryOrHedge),
			// A service or API that was never switched on for the account: a person must enable it.
			pat("service-not-activated", "activated|enabled|not open|开通",
				`\b(service|api|product)\b~\b(is |has )?(not|never)( yet)? (been )?(activated|enabled|opened|open)\b|\bthe api you are accessing is not open\b|\bnot (been )?(activated|enabled) (for|on|in) (this|your|the) (account|project|organi[sz]ation|subscription|tenant|workspace)\b|服务未开通|未开通`).
				unlessRe(rx(reBillingWords.String() + `|\bmodels?\b`)), // a model not enabled is model_not_found
			pat("archived", "archived|no longer accessible", `\b(project|organi[sz]ation|org|workspace|account|team|key)\b~\b(has been |was |is )?archived\b|\b(project|organi[sz]ation|workspace|account)\b~\bno longer accessible\b`),
			pat("leaked-key", "leak", `\b(key|token|credential)s?\b~\bleaked\b|\bleaked (api )?(key|token|credential)`).and("key|token|credential"),
			pat("oauth-refresh", "refresh", `\brefresh[ _]token\b~\b(invalid|expired|revoked|not found|reused|been used)\b|\bcould not be refreshed\b|\b(token|oauth) refresh (failed|failure|error)\b|\bfailed to refresh (the )?(access |oauth )?token\b`),
			lit("invalid-grant", "invalid_grant"),
			pat("access-ended", "access|account", `\baccess (was |has been |is )?(terminated|revoked|suspended|banned)\b|\baccess_terminated\b|\b(service|access) (is )?(unavailable|disabled|blocked) for (this |your |the )?account\b`),
			pat("org-not-allowed", "not allowed for this organ", `not allowed for this organi[sz]ation`).
				unlessRe(rx(`\b(providers?|models?|upstreams?)\b~\bnot allowed for this organi[sz]ation`)), // a router's policy on one upstream: model_not_found
			lit("banned-zh", "封禁", "已被禁用", "已禁用", "已停用", "被冻结", "已冻结", "已注销", "账号异常", "账户异常", "被封", "已被锁定", "被锁定", "已锁定", "非活动状态", "停服", "令牌状态不可用").unlessRe(reBillingWords),
		}},
		{name: "billing", rank: rankBilling, reason: ReasonBilling, rules: []rule{
			pat("insufficient-funds", "insufficient", `\binsufficient(_|\s~\b)(balance|credits?|funds|quota)\b`),
			lit("credit-balance", "credit balance"),
			pat("balance-low", "balance|funds|credit", `\b(balance|funds|credits?)\b~\b(is |are )?(insufficient|too low|not enough|negative|depleted|below zero)\b|\b(not enough|negative|zero|low) (account )?(balance|funds)\b`),
			pat("trial-ended", "trial", `\b(free|your|api) trial( period| credits?)?\b~\b(has )?(expired|ended|is over|used up|exhausted)\b`),
			pat("out-of-credits", "credit", `\b(out of|run out of|ran out of|no|not enough|any|zero|requires? more|needs? more) (api )?credits?\b|\bused (up )?all (of )?(your |the |available |remaining )*credits\b|\bcredits? (have been |has been |have |has |are |is )?(exhausted|depleted|used up|run out)\b|\bcredits remaining: 0\b`).when(notHypothetical).
				unlessRe(rx(`\bno credits? (were |was |have been |has been )?(consumed|charged|deducted|used|billed)\b`)), // a refund, not a shortage
			pat("used-up", "used up", `\bused up (all )?(your |the |its )?(credits?|points|balance|quota|allowance)\b`),
			pat("payment", "payment", `\bpayment[ _](required|method|failed|overdue|declined|is overdue|is required)\b`).unlessRe(reRateWords),
			pat("billing-trouble", "billing", `\bbilling[ _](hard[ _]limit|not[ _]active|issue|problem|error|is not enabled|has been disabled|is disabled|account|required|to be enabled)\b|\benable billing\b|\b(issue|problem) with (your )?(account'?s? )?billing\b|\bplans? (&|and) billing\b|\bbilling details\b`).unlessRe(reGoogleMetric),
			pat("hard-limit", "hard limit", `\bhard limit (has been )?reached\b`),
			pat("current-quota", "current", `\bexceeded[ _](your |the )?current[ _]quota\b`).unlessRe(reGoogleMetric),
			pat("free-tier-zero", "limit", `\blimit\W{0,3}0\b`).when(func(c *textCtx, _ string) bool { return strings.Contains(c.text, "quota") }),
			word("arrears", "arrears", "arrearage", "overdue", "unpaid", "past due", "outstanding balance"),
			pat("quota-exhausted", "quota", `\bquota\b~\b(has been |is |was |are |have been )?(exhausted|used up|depleted|run out)\b|\bout of quota\b|\bquota_exhausted\b`).and("exhausted|used up|depleted|run out|out of quota"),
			pat("free-tier", "free tier", `\bfree tier\b~\b(exhausted|used up|not available|only)\b`).and("exhausted|used up|not available|only").unlessRe(reOnlyUsedIn),
			pat("subscription", "subscription", `\bsubscription\b~\b(has )?(expired|inactive|is not active|not active|ended|lapsed|cancell?ed|disabled|suspended)\b|\bno (active|valid) (\w+ )?subscription\b|\bnot have an? (active |valid )(\w+ )?subscription\b|\bpurchase an? (\w+ )?subscription\b`).and("expired|inactive|not active|ended|lapsed|cancel|disabled|suspended|no active|no valid|purchase|have a"),
			// A model or feature the plan does not include (the corpora read a
			// plan-gated model as billing: Zhipu's 1311, "plan does not yet include
			// access to GLM-5V-Turbo"; see testdata/corpus/README.md).
			pat("plan-excludes", "plan|include|subscription|limited to|restricted to", `\bplan (does not|doesn't|do not) (yet )?(include|support|cover)\b|\b(does not|doesn't|do not) work with your (current )?plan\b|\bnot (available|included) (in|on|with|under) (your |the )?(current )?(pricing |subscription )?plan\b|\bdoes not (yet )?include access\b|\b(model|feature)\b~\brequires (a |an )?(paid |pro |premium |higher |active )?(subscription|plan)\b|\bfree (account|key|plan|tier|api)s? (is |are )?(only )?(limited|restricted) to (use|using)\b`),
			lit("extra-usage", "extra usage"),
			// A plan's paid allowance used up, more to be bought (Copilot's premium requests), no window named.
			pat("paid-allowance", "allowance|overage|paid premium", `\bexceeded (your |the )?(\w+ ){0,2}allowance\b|\ballowance\b~\b(exceeded|used up|exhausted|reached|spent)\b|\b(do not|don't|does not) (currently )?have overages? enabled\b|\benable (additional )?paid (premium )?requests\b`).
				unlessRe(reWindowWords),
			pat("budget", "budget", `\bbudget\b~\b(exceeded|reached|exhausted|used up)\b|\bexceeded (your |the )?budget\b|\bbudget_exceeded\b`).unlessRe(reBudgetWindow), // C3
			pat("invoices", "invoice|pay", `\b(past|unpaid|overdue|outstanding|open) invoices?\b|\bfail\w* to pay\b|\bpayment (is )?past due\b`),
			pat("suspended-for-billing", "suspended|disabled|blocked|deactivated", `\b(account|organi[sz]ation|workspace|team|project)\b~\b(suspended|disabled|blocked|deactivated)\b`).and("billing|balance|credit|payment|invoice|spending|overdue|arrear|quota"),
			pat("exceeded-credits", "credit", `\bexceeded (your |the )?(\w+ ){0,3}credits?\b`),
			pat("account-ceiling", "maximum allowed|credit limit|credits limit", `\bmaximum allowed (monthly )?(spend|spending) limit\b|\bcredits? limit (exceeded|reached|has been reached)\b`),
			pat("no-asset", "no available", `\bno available (asset|resource package|balance)\b`),
			pat("openrouter-key-limit", "limit|budget|capacity", `\bkey limit (exceeded|reached)\b|\bbudget limit (exceeded|reached)\b|\bkey budget\b|\b(create|use) a key with a higher\b|\btoken capacity required\b|\bprompt tokens limit exceeded\b`).only("openrouter"),
			pat("more-credits-required", "credit", `\bmore credits (are |is )?(required|needed)\b`),
			// A cap the account set for itself, with no reset: someone must raise it
			// (a cap that names its reset is a window, C3).
			pat("self-set-cap", "set|configured|custom", `\b(reached|exceeded|hit)\b~\b(the |your )?(set|configured|self-set|custom) (\w+ )?(limit|cap|quota|budget)\b`).
				unlessRe(rx(`\b(daily|weekly|monthly|hourly|per[ -](minute|second|hour|day)|today|resets?|refresh|concurren\w*|requests)\b|rate[ _-]?limit`)),
			// A free grant or a token allowance used up: nothing refills it by waiting
			// unless the text names a period or a reset (then it is a window, C3).
			pat("allowance-spent", "quota", `\bfree (allocated |tier |trial )?quota\b~\b(exceeded|exhausted|used up|run out|reached)\b|\busage (has )?exceeded (the |your )?(token |usage )?quota\b|\b(token|prepaid|package|resource pack) quota\b~\b(exceeded|exhausted|used up|run out)\b`).
				unlessRe(rx(reGoogleMetric.String() + `|\b(daily|weekly|monthly|hourly|per[ -](minute|second|hour|day)|today|reset|resets|refresh)\b`)),
			// A free allowance reached with no reset named: Replicate's "Free time
			// limit reached ... To continue using Replicate, set up billing". One
			// that resets ("free usage limit (reset hourly)") is a window (C3).
			pat("free-limit", "free", `\bfree (time |usage |trial |tier |plan |credits? )?limits?\b~\b(reached|exceeded|hit|used up)\b|\b(reached|exceeded|hit) (the |your )?free (time |usage |trial |tier |plan |credits? )?limits?\b`).
				unlessRe(rx(reGoogleMetric.String() + `|\b(daily|weekly|monthly|hourly|per[ -](minute|second|hour|day)|today|reset|resets|refresh|rate)\b`)),
			pat("over-budget", "budget", `\bover (the |its |your )?budget\b|\bexceededbudget\b`),
			lit("balance-zh", "余额不足", "欠费", "账户余额", "余量已用尽", "无可用资源包", "资源包已用完", "资源包已耗尽", "套餐已过期", "套餐已到期", "未购买", "请购买", "余额已用完", "余额为0", "计费资源已耗尽", "计费资源不足", "信用额度", "额度已用尽", "额度已用完", "额度已耗尽"),
			lit("balance-ja-ko", "残高が不足", "残高不足", "クレジットが不足", "クレジット残高が不足", "クレジットを使い切", "支払いが必要", "お支払い", "잔액이 부족", "잔액 부족", "크레딧이 부족", "크레딧 부족", "크레딧을 모두 사용", "결제가 필요", "결제 정보"),
			lit("balance-intl", "saldo insuficiente", "solde insuffisant", "crédit insuffisant", "guthaben ist aufgebraucht",
				"unzureichendes guthaben", "nicht genügend guthaben", "credito insufficiente", "saldo insufficiente", "недостаточно средств",
				"недостаточно баланса", "пополните баланс", "yetersiz bakiye", "bakiye yetersiz", "số dư không đủ", "saldo tidak mencukupi",
				"saldo tidak cukup", "brak środków", "onvoldoende saldo"),
			lit("credit-zh", "额度不足").unlessRe(rx(`每日|每天|每周|每月|每小时|今日|本周|本月`)),
		}},
		{name: "usage-window", rank: rankWindow, reason: ReasonRateLimit, rules: []rule{
			pat("usage-limit", "usage", `\busage[ _](limits?|cap|quota)\b`),
			pat("spend-limit", "spend", `\b(spend|spending) (limits?|caps?)\b`),
			pat("periodic", "daily|weekly|monthly|hourly|yearly|annual|per-day|-hour|per day|per week|per month",
				`\b(daily|weekly|monthly|hourly|yearly|annual|per-day|five-hour|\d+-hour)\b~\b(limits?|quotas?|allowance|allocation|budget|caps?)\b|\b(limits?|quotas?|allowance|caps?) \([^)|]{1,40} per (day|week|month)\) (has been |was |is )?(exceeded|reached|hit|used up)\b`).and("limit|quota|allowance|allocation|budget|cap"),
			pat("n-hour-window", "hour|hr|day|week|month", `\b(\d+|one|five|a)[ -]?(hours?|hrs?|days?|weeks?|months?)\b~\b(limits?|quotas?|window|allowance)\b`).and("limit|quota|window|allowance"),
			// Azure API Management's quota policy: "Out of call volume quota. Quota
			// will be replenished in 10:25:13."
			pat("resets", "reset|refresh|renew|replenish|refill", `\b(limits?|quotas?)\b~\b(will |to )?(be )?(reset|refresh|renew|replenish|refill)(s|ed)?\b|\bresets? (tomorrow|on|at|in|every)\b|\bautomatic quota refresh\b`).and("limit|quota|reset|refresh"),
			pat("regain-access", "regain access|rolling|subscription quota", `\bregain access\b|\brolling (time )?window\b|\bsubscription quota limit\b`),
			// Periodic limits in other languages (C3).
			lit("window-intl", "límite diario", "límite de uso diario", "límite mensual", "limite diário", "limite mensal", "limite quotidienne",
				"limite journalière", "limite mensuelle", "tageslimit", "monatslimit", "limite giornaliero", "limite mensile", "дневной лимит",
				"суточный лимит", "месячный лимит", "günlük limit", "aylık limit", "giới hạn hàng ngày", "batas harian", "batas bulanan"),
			pat("window-zh", "每|今日|今天|本周|本月|当日|当天|小时|天|使用上限|用量",
				`(每日|每天|每周|每月|每小时|今日|今天|本周|本月|当日|当天|\d+\s*小时|\d+\s*天)[^。|]{0,12}?(上限|限额|额度|配额|用量|次数|限制)|使用上限|用量上限|用量已达|使用额度已达`),
		}},
		{name: "context-overflow", rank: rankContext, reason: ReasonContextOverflow, rules: []rule{
			// The whole request over a size limit (a 413's body; an attachment over its own cap is format).
			pat("request-over-size", "exceed", `\bexceeds? (the )?(maximum|max)( allowed)? (content[ -]length|request size|payload size|body size)\b|\bexceed(s|ed)? (the )?(session max(imum)? length|`+"`"+`?session_len`+"`"+`?)`).
				unlessRe(rx(`\b(images?|files?|attachments?|uploads?|pdfs?|videos?|audio)\b`)),
			pat("context-exceeded", "context", `\bcontext[ _-]?(length|window|size|limit)s?\b~\b(exceed\w*|overflow\w*|too (long|large)|reached|is full)\b|\bcontext[ _](length|window)[ _]exceeded\b|\bcontext overflow\b|\b(reached|hit)( the| its| your)? (model'?s? |maximum |max )*context[ _-]?(length|window|size)\b`),
			pat("context-overflows", "context", `\bcontext\b~\boverflows?\b|\bcontext (length|window|size) of only\b`),
			pat("exceeds-context", "context", `\bexceed\w*\b~\bcontexts?\b|\bran out of (room|space)\b~\bcontext\b|\blarger than (the )?(model'?s )?context\b`).and("exceed|ran out|larger than"),
			pat("max-context", "context|max|prompt has", `\b(maximum|max) context (length|window|size)\b|\b(maximum|max) (model|prompt|input) (length|len|size)\b|\bmax_model_len\b|\bprompt has [\d,]+ tokens?\b~\bcontext (size|length|window)\b`),
			pat("prompt-too-long", "too long|too large|longer than|larger than",
				`\b(prompt|input|message|messages|conversation|text)s? (is |are |was |were )?(too long|too large|longer than|larger than)\b|\b(prompt|input) too long\b`),
			pat("prompt-longer", "prompt|input", `\b(prompt|input)\b~\b(is |are )?(too long|longer than|larger than)\b`),
			pat("cannot-exceed", "exceed", `\btokens?\b~\b(cannot|can't|must not|may not|should not) exceed\b`),
			pat("request-too-large", "large", `\brequest (is |was )?too large\b|\brequest[ _]too[ _]large\b|\b(request entity|payload|content) too large\b`).
				when(func(c *textCtx, _ string) bool { return !hasLimitRequested(c.text) || limitBelowRequested(c.text) }),
			pat("request-size", "request|payload", `\brequest (exceeds|is larger than) the maximum (allowed )?(size|number of bytes|length)\b|\brequest size exceeds\b|\bpayload size (has )?exceed`),
			// A request over a gateway's or a channel's size cap: GitHub Models'
			// "Request body too large for gpt-4o model. Max size: 8000 tokens.",
			// gRPC's "received message larger than max (6291456 vs. 4194304)" (sent
			// as RESOURCE_EXHAUSTED, which is no rate here). A smaller request helps.
			pat("body-over-cap", "body|larger than max", `\brequest body (is |was )?too (large|long)\b|\b(received|sent|send) message larger than max\b|\bmessage larger than max \(`),
			pat("token-limit", "exceed|token limit", `\btokens?\b~\bexceed\w*\b~\b(limit|maximum|max|context|allowed)\b|\bexceed\w* (the )?(model'?s? )?(maximum |max )?(number of )?(input )?tokens?\b|\btoken limit\b~\b(exceeded|reached)\b|\bexceeded (the )?model token limit\b|\bmodel token limit\b`).and("token").unlessRe(rx(reRateOrOutputCap.String() + `|\benqueued\b`)).
				// Novita's 429 TOKEN_LIMIT_EXCEEDED "Token limit exceeded. Please try
				// again later." is a tokens-per-minute window: with a 429 only counts
				// that can never fit make it the prompt's size.
				when(func(c *textCtx, _ string) bool { return c.status != 429 || tokensOverMax(c.text) || countsOver(c.text) }),
			pat("too-many-tokens", "too many", `\btoo many (input )?tokens\W{0,3}(size limit|in (the )?prompt|for (the )?(model|context))`),
			pat("tokens-must-be", "must", `\binputs?\W{0,3} tokens \+ \W{0,3}max_new_tokens\W{0,3} must be <=|\binputs?\W{0,3} must have less than [\d,]+ tokens\b|\b(input|prompt) tokens?\W{0,3}[\d,]+\W{0,3}( plus [^|]{0,40}?)? must be (<=?|less than( or equal to)?|at most|smaller than|no more than|fewer than) [\d,]+`),
			pat("reduce-length", "length", `\breduce the length of the (messages|prompt|input|conversation)\b|\bcurrent length is [\d,]+ while limit is [\d,]+|\brange of input length\b|\binput length (should|must|exceeds)\b`),
			pat("string-too-long", "string", `\bstring[ _]too[ _]long\b|\bstring_above_max_length\b`).when(stringTooLongIsPrompt),
			rule{name: "token-counts", keys: []string{"token", "requested"}, check: func(c *textCtx, _ string) bool { return tokensOverMax(c.text) || limitBelowRequested(c.text) }},
			// "does not fit in the context", llama.cpp's and LM Studio's n_keep >= n_ctx
			pat("does-not-fit", "fit|n_keep|keep", `\b(does not|doesn't|do not|don't|will not|won't|cannot|can't|could not|couldn't|did not|didn't) fit (in|into|within) (the )?(model'?s |available |current |slot )?(context|kv[ -]?cache)\b|\bn_keep\b~(>=|>|greater than|exceeds?)~\bn_ctx\b|\btokens to keep\b~\bgreater than the (model'?s )?context\b|\bgreater than the (model'?s )?context (length|window|size)\b`),
			pat("sequence-length", "sequence length", `\b(exceed\w*|longer than|greater than|larger than|more than)\b~\b(maximum|max)( supported| allowed)? sequence length\b|\b(maximum|max)( supported| allowed)? sequence length (is|of)( just| only)? [\d,]+`).unlessRe(reRateWords),
			pat("max-input-length", "exceed|supports up to|longer than",
				`\bexceeds? (the )?(model'?s )?(maximum|max) (allowed |supported |permitted )?(input |prompt |context |request )?(length|size)\b|\btoken count is [\d,]+ but (the )?model only supports up to\b|\bmodel only supports up to [\d,]+ (input )?tokens\b|\blength of (the )?prompt\b~\b(longer|greater|more) than\b|\bprompt ?\+ ?(generation|completion|tokens_to_generate)\b~\b(exceed\w*|longer|greater|limit)\b|\b(model|context|input|prompt|sequence)( max(imum)?)? length (exceeded|exceeds)\b|\bmax(imum)? (model |context |input |prompt )?length exceeded\b`).
				// "the 'user' field exceeds the maximum length" is a parameter
				unlessRe(rx(reNotPromptCount.String() + `|` + reNamedField.String())),
			// Bedrock's schema limits on the body or the prompt: "expected maxLength:
			// 42000, actual: 46735", "Value at 'body' failed to satisfy constraint:
			// Member must have length less than or equal to 25000000"
			rule{name: "schema-length", keys: []string{"maxlength", "length less than or equal"}, check: func(c *textCtx, _ string) bool { return schemaLengthOver(c.text) }},
			rule{name: "counts-over", keys: []string{">"}, also: []string{"token"}, check: func(c *textCtx, _ string) bool { return countsOver(c.text) }},
			// TensorRT-LLM's "The sum of prompt length (9351.0), query length (0) should
			// not exceed max_num_tokens (8192)", "input tokens length 40000 exceeds
			// max_num_tokens 32768": the prompt's own size against a limit of the model.
			pat("prompt-length-over", "length|tokens", `\b(prompt|input)[ _](length|len|size|tokens? length)\b~\b(should not|must not|cannot|can't|may not|does not|shall not) exceed\b|\b(prompt|input)[ _](length|len|size|tokens? length)\b~\bexceeds? (the |its )?(max|maximum|limit)`).unlessRe(reNotPromptCount),
			// TabbyAPI's "Request length 71599 + 2048 is greater than max_seq_len
			// 65536", exllama's "prompt length ... greater than the max sequence length".
			pat("length-over-seq-len", "max_seq_len|max_model_len|n_ctx|max_position_embeddings|sequence length|context",
				`\b(request|prompt|input|context)[ _](length|len|size)\b~\b(is )?(greater|longer|larger|more) than (the )?(max_seq_len|max_model_len|n_ctx|max_position_embeddings|max(imum)?[ _](sequence|context)[ _](length|len|size)|context (length|size|window))\b`),
			// Baidu ERNIE's "the max length of current question is 11200", "the max
			// input characters is 20000", Snowflake Cortex's "max tokens of 8192
			// exceeded": a limit on the prompt stated as the error.
			pat("max-question-length", "the max|tokens of", `\bthe max(imum)? (length|input (characters|tokens)|tokens) of (the )?(current )?(question|prompt|input|messages?) is [\d,]+|\bthe max(imum)? input (characters|tokens) is [\d,]+|\bmax(imum)? tokens of [\d,]+ exceeded\b`),
			// GPT4All's "The prompt is 9884 tokens and the context window is 2048!"
			rule{name: "prompt-vs-window", keys: []string{"context"}, also: []string{"token"}, check: func(c *textCtx, _ string) bool { return promptOverWindow(c.text) }},
			lit("context-zh", "上下文过长", "上下文超出", "上下文长度超", "超出最大上下文", "超出上下文", "超过上下文", "请压缩上下文", "输入过长", "输入长度超", "超出最大长度", "超过最大长度", "超过模型最大", "超出模型最大", "文本过长", "长度超过限制", "超出长度限制", "超长"),
			// Context overflow in the European and other languages relays write in:
			// a verb of exceeding next to the context's name, so a sentence that
			// only states a window ("Das Kontextfenster beträgt 128.000 Token") is prose.
			pat("context-intl", "context|kontext|contexte|contexto|contesto|контекст|bağlam|ngữ cảnh|konteks",
				`(excede|exceden|supera|superan|sobrepasa|ultrapassa|excedeu|dépasse|dépassé|dépassée|überschreitet|überschritten|überschreitung|supera|superato|превышен\w*|превышает|aşıyor|aşıldı|vượt quá|melebihi)~(contexto|contexte|kontext\w*|contesto|контекст\w*|bağlam\w*|ngữ cảnh|konteks)|(contexto|contexte|kontext\w*|contesto|контекст\w*|bağlam\w*|ngữ cảnh|konteks)~(excede|exceden|supera|superan|ultrapassa|excedido|excedida|superado|superada|sobrepasado|ultrapassado|excedeu|dépassé|dépassée|dépasse|überschritten|überschreitet|superato|superata|превышен\w*|превышает|aşıldı|aşıyor|vượt quá|melebihi|demasiado larg[oa]|trop long(ue)?|zu lang|troppo lung[oa]|слишком длинн\w*|çok uzun|quá dài|terlalu panjang)`),
			lit("context-ja-ko", "コンテキスト長を超え", "コンテキストの長さを超え", "コンテキストウィンドウを超え", "最大トークン数を超え", "トークン数の上限を超え", "入力が長すぎ", "プロンプトが長すぎ", "メッセージが長すぎ", "컨텍스트 길이를 초과", "컨텍스트 길이 초과", "컨텍스트 창을 초과", "최대 토큰 수를 초과", "입력이 너무 깁", "프롬프트가 너무 깁", "입력 길이를 초과"),
		}},
		{name: "runtime-crashed", rank: rankCrashed, reason: ReasonUnclassified, rules: []rule{
			// A local runtime whose process died (a GPU driver abort, a corrupt model
			// file): retrying may or may not help and another key will not; it still
			// advances while candidates remain (R2). Ranked above the words of what it
			// was doing ("error loading model", "loading"), which describe, not decide.
			pat("process-died", "process|runner|worker|crashed|exit status|segmentation|core dumped",
				`\b(process|runner|subprocess|worker)\b~\b(has |have |had )?(unexpectedly )?(terminated|exited|crashed|died|stopped)\b|\b(has|had|have) crashed\b|\bexit status [1-9]\d*\b|\bsegmentation fault\b|\bcore dumped\b`).unlessRe(rx(`\b(may|might|could) have (crashed|stopped|died|exited|terminated)\b`)), // a guess
			// Ollama's server losing its own llama runner on loopback: "POST predict:
			// Post \"http://127.0.0.1:35943/completion\": EOF", "do load request: Post
			// ...: EOF", "an error was encountered while running the model: unexpected
			// EOF". A dead runner, not a network between us and a provider.
			pat("runner-call-failed", "predict|load request|running the model|llm response", `\bpost predict\b|\bdo load request\b|\berror was encountered while running the model\b|\berror reading llm response\b`),
			// vLLM's engine, dead under its API server: v1's "EngineCore encountered
			// an issue. See stack trace (above) for the root cause." (EngineDeadError),
			// v0's "Background loop has errored already." (AsyncEngineDeadError). Like
			// a dead runner: nothing says whether it comes back.
			pat("engine-dead", "engine|background loop", `\benginecore encountered an issue\b|\b(async|mq)?enginedeaderror\b|\bengine (core )?(is )?dead\b|\bbackground loop has errored\b|\bengine loop (is not running|has died|died)\b`),
		}},
		{name: "overloaded", rank: rankOverloaded, reason: ReasonOverloaded, rules: []rule{
			pat("overloaded", "overload", `(\b|_)overload(ed|ing)?\b`).unlessRe(rx(`\boverload (your|the user's|this) (system|machine|computer|device)\b`)).when(notExample),
			pat("high-demand", "demand|load|traffic|volume|experiencing", `\b(high|heavy|peak|unusually high|increased) (demand|load|traffic|volume of requests)\b|\bexperiencing (high|heavy|a high|an unusually)\b`).when(notExample),
			pat("busy", "busy", `\b(server|servers|service|system|api|model|engine|platform|backend|gpus?|llm|runner)s? (is |are )?(currently |temporarily |too |very |extremely )?busy\b|\btoo busy\b|\bcurrently busy\b`).when(notExample),
			pat("capacity", "capacity", `\b(at|over|out of|no|insufficient|lack of|limited|exceeded|exceeds?|reached)\s+(the )?(available |serving |compute |gpu |maximum |full |peak )?capacity\b|\bcapacity\b~\b(exhausted|constraints?|issues?|reached|unavailable|is full|exceeded|limits?)\b|\binsufficientcapacity\b`),
			// llama.cpp and llamafile: "slot unavailable", "all slots are busy". Only
			// at the start of a message, so prose about a meeting slot is not a server.
			pat("slots-busy", "slot|worker", `(?:^|\| )(no |all )?(the )?(free |available |idle )?(slots?|workers?) (is |are )?(currently )?(unavailable|busy|in use|occupied|full)\b|\ball (the )?(slots|workers) are (currently )?(busy|in use|occupied|full)\b`),
			pat("no-room", "no ", `\bno (more |free |available )?(data centers?|servers?|workers?|replicas?|instances?|slots?|gpus?|nodes?)\b~\b(available|to forward|left|free)\b|\bno (free|available) (slots?|workers?|gpus?|replicas?|instances?|nodes?)\b`).unlessRe(reStockStatus),
			pat("loading", "loading|ready", `\bmodel\b~\b(is |still )?(currently )?loading\b|\bloading (the )?model\b|\bmodel (is )?(not|not yet) ready\b|\bmodelnotready`).
				unlessRe(rx(`\b(error|failed|failure|unable|cannot|could not) (while )?(loading|to load)\b|\bloading (was |has been )?(stopped|aborted|failed)\b`)), // a load that failed or stopped is not one under way
			// Lepton, Modal, Baseten: a deployment that is scaling or starting is
			// there and will serve shortly.
			pat("scaling-up", "scaling|warming|starting|spinning|cold|booting", `\b(model|deployment|endpoint|app|server|service|instance|replica|container|function|worker)s?\b~\b(is |are )?(still )?(scaling up|warming up|starting up|spinning up|cold[- ]starting|booting)\b`),
			pat("temporarily-unable", "temporarily", `\btemporarily unable to (handle|process|serve|accept)\b`).when(notExample),
			pat("model-unavailable-later", "unavailable", `\bmodel\b~\b(is |currently )?unavailable\b`).and("try again|retry|later|shortly|moment").
				unlessRe(rx(reModelRegion)), // not served in this region: model_not_found
			// "服务器忙，稍后再试" (server busy, try later): 忙 alone, after its subject.
			pat("busy-subject-zh", "忙", `(服务器|服务|系统|模型|引擎|接口|后台|平台)(正|太|很|较)?忙`),
			lit("busy-zh", "繁忙", "过载", "负载过高", "负载较高", "访问量过大", "请求量过大", "资源紧张", "算力不足", "模型未就绪", "模型加载中", "模型正在加载", "暂时不可用"),
			lit("busy-ja-ko", "混雑", "混み合って", "過負荷", "高負荷", "アクセスが集中", "サーバーが混", "과부하", "혼잡", "서버가 바쁩", "서버가 사용량이 많", "사용량이 많아"),
			// Overloaded and busy in the European and other languages relays and
			// corporate gateways write their pages in.
			lit("busy-intl", "sobrecargado", "sobrecargada", "sobrecarregado", "sobrecarregada", "surchargé", "surchargée", "surcharge du serveur",
				"überlastet", "überlastung", "sovraccarico", "sovraccarica", "перегружен", "перегрузк", "aşırı yüklü", "aşırı yük", "quá tải", "kelebihan beban",
				"servidor está ocupado", "serveur est occupé", "server ist ausgelastet", "сервер занят", "sunucu meşgul", "máy chủ đang bận", "server sedang sibuk"),
			lit("unavailable-intl", "vorübergehend nicht verfügbar", "temporalmente no disponible", "temporariamente indisponível",
				"temporairement indisponible", "временно недоступ", "geçici olarak kullanılamıyor", "tạm thời không khả dụng",
				"sementara tidak tersedia", "一時的に利用できません", "일시적으로 사용할 수 없"),
			// A server shedding load: its queue is full. Ray Serve's "Request dropped
			// due to backpressure (num_queued_requests=100, max_queued_requests=100)",
			// Triton's "Exceeds maximum queue size", "request queue is full".
			pat("load-shed", "backpressure|queue|pending|queued|waiting requests", `\b(dropped|rejected|shed) due to backpressure\b|\bbackpressure ?(error|exceeded|limit)\b|\b(exceeds?|exceeded|reached|over) (the )?max(imum)? queue (size|length|depth)\b|\b(request|pending|waiting|inference|job|task|server|scheduler|engine) queue (is |was )?(full|at capacity)\b|\bmax_queued_requests\b|\btoo many (pending|queued|waiting) requests\b`).unlessRe(rx(`\bqueue (is |was )?full of\b`)),
		}},
		{name: "rate-limit", rank: rankRateLimit, reason: ReasonRateLimit, rules: []rule{
			word("enum-name", "quotalimit", "quotaexceeded", "ratelimited", "ratelimitexceeded", "toomanyrequests"), // a client's enum: "QuotaLimit"
			pat("rate-limit", "rate", `\brate[ _-]?limit(ed|ing)\b|\brate[ _-]?limits?[ _](exceeded|reached|hit|error|exhausted|is exceeded|has been|of|for|on|reset|exceeded)|\brate_limit|\bratelimit|\b(exceed\w*|reached|hit|over|past|exhausted|used up)\b~\brate[ _-]?limits?\b|\brate[ _-]?limits?\W*$`).
				// every alternative names the rate limit: without it, "exceeded ~ rate
				// limit" tried each "exceeded" of a Google body to its sentence's end
				and("rate limit|rate-limit|rate_limit|ratelimit|rate limits"),
			pat("too-many-requests", "too|exceeded", `\btoo[ _]many[ _](requests|concurrent|connections|tokens|calls)\b|\bexceeded (your |the )?(current |allowed |maximum )?(number of )?(requests|calls|queries)\b`),
			pat("concurrency", "concurren", `\bconcurren(cy|t (requests?|calls|connections))\b`),
			lit("throttled", "throttl"),
			// A unit of rate counts only where the text reports the limit hit: "The
			// rate limiter now allows 100 requests per minute per key" describes one.
			pat("per-unit", "per|pm|pd", `\b(requests?|tokens?|calls?|queries)\s+per\s+(minute|second|day|hour|min)\b|\bper[ -](minute|second)\b|\b(rpm|tpm|rpd|tpd|ipm|itpm|otpm)\b|\b(requests?|tokens?|calls?|queries)\s*/\s*(minute|min|second|sec|hour|day)\b|\b(maximum|max) number of (requests|calls|tokens)\b~\bper (minute|second|hour|day)\b`).when(reportsLimitHit),
			pat("resource-exhausted", "exhausted", `\bresource[ _]?(has been )?exhausted\b|\bresourceexhausted\b`),
			pat("quota-exceeded", "quota", `\bquota\b~\b(exceeded|reached|limit)\b|\bexceeded[ _](the |your )?(current |allocated )?quota\b|\ballocated quota\b`).unlessRe(reDiskQuota),
			pat("limit-hit", "limit", `\benqueued token limit\b|\blimits?\s+(has been |have been |was )?(exceeded|reached|hit)\b|\b(request frequency|requests|accounts|keys|tokens) (has been|have been|is|are) (currently |temporarily )?(rate[ -])?limited\b|\b(exceeded|reached|hit)\s+(the |your |its )?(request |requests |token |call )?limits?\b`).
				// a cap on one request's shape ("the limit of 10 images per message")
				// or its output ("max_tokens or model output limit was reached") is the
				// request's, not a window that reopens
				unlessRe(reShapeOrOutputCap),
			pat("request-rate", "rate", `\brequest rate\b~\b(increased|too high|exceeded|too quickly|limit)`),
			pat("slow-down", "slow", `\bslow (down|your rate)\b`),
			pat("cooldown", "cool", `\bmodel[ _]cooldown\b|\bcooling down\b`),
			// An abuse guard's block of a network's traffic, lifted when the burst
			// stops: Google's "sorry" page ("Our systems have detected unusual
			// traffic from your computer network", "your computer or network may be
			// sending automated queries").
			pat("traffic-block", "traffic|automated", reTrafficBlock.String()),
			lit("frequent-zh", "请求过于频繁", "频繁", "频率", "限流", "并发", "速率", "配额", "请求过多", "太多请求", "限速", "超过限制"),
			lit("frequent-ja-ko", "リクエストが多すぎ", "リクエスト数が多すぎ", "レート制限", "レートリミット", "リクエスト制限", "リクエスト数の上限", "요청이 너무 많", "요청 한도", "호출 한도", "속도 제한", "요청 제한", "요청 수 제한"),
			lit("frequent-intl", "demasiadas solicitudes", "demasiadas peticiones", "límite de solicitudes", "límite de velocidad",
				"muitas requisições", "muitas solicitações", "limite de requisições", "limite de taxa", "trop de requêtes", "limite de débit",
				"limite de requêtes", "zu viele anfragen", "anfragelimit", "ratenlimit", "troppe richieste", "limite di richieste",
				"слишком много запросов", "превышен лимит запросов", "лимит запросов", "çok fazla istek", "istek sınırı", "quá nhiều yêu cầu",
				"giới hạn tốc độ", "terlalu banyak permintaan", "batas permintaan", "za dużo żądań", "te veel verzoeken"),
			// A quota exceeded (C4), in other languages.
			lit("quota-intl", "cota excedida", "cuota excedida", "quota excedida", "quota dépassé", "kontingent überschritten",
				"превышена квота", "квота превышена", "kota aşıldı", "sınırı aşıldı", "limiti aşıldı", "vượt quá hạn mức", "kuota terlampaui"),
		}},
		{name: "billing-remedy", rank: rankBillingRemedy, reason: ReasonBilling, rules: []rule{
			pat("buy-credits", "credit", `\b(purchase|buy|add|top up)\b~\bcredits?\b`).when(notHypothetical),
			pat("top-up", "top", `\btop[ -]?up\b`).when(notHypothetical),
			pat("upgrade-plan", "upgrade", `\bupgrade\b~\b(plan|tier|account|subscription)\b`).when(notHypothetical),
			word("recharge", "recharge"),
			lit("recharge-zh", "充值"),
			// Replicate's "You need to enter your credit card to continue using the API".
			pat("add-card", "card", `\b(enter|add|set up|provide|update|attach|link|register|verify) (a |your )?(valid )?(credit|debit|payment) card\b~\bto (continue|keep|resume|start|use|access)\b~\b(api|service|platform|model|using|requests?|access)\b|\bno (valid )?(credit card|payment card) on file\b`),
			rule{name: "billing-link", keys: []string{}, check: billingLink},
		}},
		{name: "model-not-found", rank: rankModelNotFound, reason: ReasonModelNotFound, rules: []rule{
			// A model this credential may not use: the key is good for its other
			// models, so the chain falls back at once and the key keeps no cooldown
			// (an auth verdict would cool it down for every model and skip the provider).
			pat("model-access", "model", `\baccess (to|the) (the |this |that )?model\b|\bmodel access (is )?(denied|not granted)\b|\bnot (allowed|permitted|authori[sz]ed|entitled) to (access|use|sample from|call) (this |the |that )?(publisher )?model\b|\bnot (agreed|accepted)\b~\bterms\b|\b(unable|cannot|can't|could not) (to )?access (the |this )?model\b|\b(does not|doesn't|do not|don't) have access to (the |this |that )?model\b|\bcan only access models\b|\bnot eligible (for|to use) (this |the |that )?model\b`).unlessRe(reIAM),
			// The model (or this deployment of it) cannot do what the request needs:
			// another candidate can serve the same request (model_not_found, not format).
			pat("model-capability", "support|not enabled for|provisioned|implement|not available for", `\b(backend|model|runtime)s? (does not|doesn't|do not|don't) implement\b|\bdesc = unimplemented\b|\b(does not|doesn't|do not|don't) support\b~\b(tools?|tool use|tool[ _]calling|tool calls|tool_choice|function[ _]calling|functions|images?|image input|vision|audio|video|thinking|reasoning\w*|system (prompts?|messages?|instructions?|role)|developer (instructions?|messages?|role)|json mode|structured outputs?|generate|chat|completions?|embeddings?|insert|multimodal|pdfs?)\b|\b(tools?|tool use|tool[ _]calling|tool calls|function[ _]calling|functions|images?|image_url|image input|vision|audio|video|thinking|reasoning\w*|json mode|json_object|response_format|structured outputs?|system (prompts?|messages?|instructions?)|streaming|multimodal|pdfs?)\W{0,3} (is |are )?not (supported|enabled|available) (with|for|by|on|in) (this|the|that) model\b|\bonly supported by (certain|some|specific|selected|other) models\b|\b(doesn't|does not) support the model\b|\brequires provisioned throughput\b|\bmode '[^'|]{1,40}' is not (available|supported) for (this|the) model\b|\b(doesn't|does not) support on-demand throughput\b|\bon-demand throughput (isn't|is not) supported\b|\bno endpoints? found that support\b|\bnot enabled for (models/|this model\b|the model\b)|\b(image|audio|video|file|pdf|document)s? (input|inputs|modality) (is |are )?not (supported|enabled)\b`),
			// vLLM's "facebook/opt-125m is not a multimodal model": an image sent to
			// a text model, which a vision model can take.
			pat("not-that-kind", "not a", `\bis not a (multimodal|multi-modal|vision|vision-language|chat|generative|text generation) model\b`),
			pat("tools-unsupported", "tool", `\btools? (param|parameter)s? (requires|is not|are not)\b|\bunsupported param(eter)?\W{0,3}(tools?|tool_choice|functions?)\b|\btool choice requires\b|\btool[ _]use[ _]not[ _]supported\b`),
			pat("chat-template", "template", `\b(error|failed|unable|cannot|can't) (rendering|to render|render|applying|to apply|apply)\b~\btemplate\b|\bjinja template\b|\bchat[ _]template\b~\b(error|not (found|set|defined|supported)|missing|no longer allowed|must provide|requires?)\b|\bmust provide a chat template\b|\btemplate error\b`),
			pat("organization-unverified", "verif", `\borgani[sz]ation (must|needs to) be verified\b|\bmust be verified to (use|stream|access|generate)\b|\bverify (your )?organi[sz]ation\b`),
			pat("operation-unsupported", "operation|chat model|only supported|please use", `\boperation (does not|doesn't|did not) work with the (specified )?model\b|\b(operation|method|call(ing)? (mode|method)) (is )?not supported (for|by|with|on) (this|the)( specified| current)? model\b|\bnot a chat model\b|\bonly supported (in|on|by|via) (the )?/?(v1/)?(responses|completions)\b|\bplease use (the )?/?(v1/)?(completions|responses) (api|endpoint)\b`),
			pat("load-failed", "load", `\b(failed|unable) to load (the )?model\b|\btoo large to be loaded\b|\bcould not load (the )?model\b|\bmodel could not be loaded\b|\berror loading model\b|\bmodel (failed to load|load failed)\b|\bfailed:? loading (the )?model\b`),
			// A model the account's region does not serve (Snowflake Cortex: "enable
			// cross region inference"): another model, or another region, answers. A
			// provider that refuses the caller's country is auth (reLocation).
			pat("model-region", "region", reModelRegion),
			// A gateway or router that will not (or cannot) reach this provider: its
			// organisation policy refuses the upstream, or it has no route for it. The
			// router's key is good for its other providers.
			pat("provider-unusable", "provider", `\bproviders?\b~\b(is |are )?not (allowed|permitted|enabled) (for|by|in) (this |your |the )?(organi[sz]ation|org|team|workspace|account|data polic(y|ies))\b|\bfailed to (get|find|load|resolve) (the )?(config(uration)?|route|credentials) for (the )?provider\b|\bno (config(uration)?|route|routes) (found )?for (the )?provider\b|\bprovider\b~\bis not configured\b`),
			pat("no-such-model", "no such model", `\bno such model\b`),
			pat("model-missing", "model", `\bmodels?\b~\b(not found|does not exist|doesn't exist|do not exist|not exists?|could not be found|cannot be found|can't be found|is not available|not available|is not supported|not supported|isn't supported|isn't available|deprecated|decommissioned|retired|deactivated|no longer (available|supported|exists?|served)|not enabled|not loaded|not served|(does not|doesn't|do not|will not|won't|cannot|can't) serve|not accessible|disabled|is invalid|is not a valid|not a valid|legacy|unavailable|blocked at the (organi[sz]ation|org|project|team|workspace) level)\b|\b(does not|doesn't|do not|will not|won't|cannot|can't) serve (the |this |that |your )?(requested |selected |specified )?models?\b`).
				// one of the phrases must be there: "not" alone let "not authorized"
				// start the gap at every "model" of a body
				and("blocked at the|not found|exist|be found|available|supported|deprecated|decommissioned|retired|deactivated|no longer|not enabled|not loaded|serve|not accessible|disabled|is invalid|not a valid|legacy|unavailable").
				// "this model is not supported MaxTokens, please use MaxCompletionTokens"
				// (go-openai) names a parameter: the request must change (format);
				// IAM's "Permission 'aiplatform.endpoints.predict' denied on resource
				// '.../models/gemini-1.5-pro' (or it may not exist)" is the
				// credential's (auth), its resource path only names the model
				unlessRe(rx(reParamNotSupported.String() + `|` + reIAMDenial + `|\b(temporarily|currently) unavailable\b|\b(web ?site|site|page|url|path|route|host) (does not|doesn't) exist\b`)), // "for now": C6; a site that does not exist is no model
			pat("unknown-model", "model|llm", `\bllms?(\([^)|]{1,80}\))? (is |was )?(not found|does not exist|doesn't exist)\b|\b(unknown|unsupported|invalid|nonexistent)[ _]model([ _](uri|url|name|id))?\b|\bnot supported model\b|\bis not a valid model( id| name)?\b|\bnot in the list of (supported|available|known|valid) models\b|\bonly [^|.]{1,40} (is |are )?allowed( now)?, your model\b|\bat '(modelid|model_id|model)' failed to satisfy constraint\b|\bmodel[ _](not[ _]found|is[ _]deactivated|decommissioned)\b`).unlessRe(rx(`invalid model (reference|key)`)),
			pat("no-endpoints", "endpoint|provider|router|channel", `\bno endpoints? found\b|\bno allowed providers\b|\brouter not found\b|\bno (available )?(model )?providers? (available|that|can)\b|\bno available model provider\b|\bno[ _](valid|available)[ _]channels?(_|\b)|\bno channels? (available|found) for\b|\b(llm |model )?provider (not|was not|wasn't) (provided|specified|given)\b|\b(could not|cannot|can't|unable to) (infer|determine|resolve) (the )?(llm |model )?provider\b`),
			pat("nothing-loaded", "loaded", `\bno models? (is |are )?loaded\b|(?:^|\| )(?:\w*error:\s*)?(the )?model (has been |was |is |got )?unloaded\W{0,3}(\||$)`),
			// Replicate: "Invalid version or not permitted", "The specified version
			// does not exist". A version is the model there.
			pat("version-missing", "version", `\b(specified|model|requested) version\b~\b(does not exist|not found|is not available)\b|\binvalid version or not permitted\b`),
			// A region refusal inside a router's raw upstream body (see routedRegion).
			pat("routed-region", "location|country|region|territory", reLocation).when(func(c *textCtx, _ string) bool { return c.ev.hasRaw }),
			pat("deployment-missing", "deployment|engine|endpoint", `\b(deployment|engine|endpoint)s?\b~\b(not found|does not exist|not exist|not running|not deployed|not started)\b`).and("not found|not exist|not running|not deployed|not started").unlessRe(rx(reIAMDenial)),
			// SAP AI Core's SDKs: "No deployment found with: deployment.model_name ==
			// gpt-4o", "No deployment matched the given criteria". (LiteLLM's "No
			// deployments available for selected model" means every deployment cools
			// down: a rate limit, not this.)
			pat("no-deployment", "deployment", `\bno (matching |running |suitable )?deployments? (was |were )?(found|matched|matches|exists?)\b`),
			// Jan's "Engine is not loaded yet": said as the whole statement, so "the
			// engine is not loaded onto the truck" is prose.
			pat("engine-not-loaded", "load", `\b(engine|deployment|endpoint|backend|runtime)s? (is |are |was )?(still )?(not|not yet) loaded( yet)?\W{0,3}(\||$)|\b(could not|couldn't|cannot|can't|unable to|failed to) load (the )?engine\b`),
			pat("model-missing-zh", "模型|无可用渠道", `(没有|无)可用的? ?(provider|渠道|供应商|提供商|服务商)[^。|]{0,12}支持(该)?模型|模型不存在|模型未找到|找不到模型|不支持该模型|不支持的模型|模型已下线|模型已下架|无可用渠道|模型[^。|]{0,20}(不存在|未找到|已下线|已下架)|(当前|该|此)模型不支持|无权(访问|使用|调用)(该)?模型|没有(权限)?(访问|使用)(该)?模型的权限`),
			lit("model-missing-ja-ko", "モデルが見つかりません", "モデルは存在しません", "モデルが存在しません", "存在しないモデル", "モデルが利用できません", "모델을 찾을 수 없", "존재하지 않는 모델", "모델이 존재하지 않", "모델을 사용할 수 없"),
			lit("model-missing-intl", "modelo no encontrado", "el modelo no existe", "modelo não encontrado", "o modelo não existe",
				"modèle introuvable", "modèle non trouvé", "le modèle n'existe pas", "modell nicht gefunden", "modell existiert nicht",
				"modello non trovato", "модель не найдена", "модель не существует", "model bulunamadı", "không tìm thấy mô hình",
				"mô hình không tồn tại", "model tidak ditemukan", "nie znaleziono modelu"),
		}},
		{name: "auth", rank: rankAuth, reason: ReasonAuth, rules: []rule{
			pat("bad-credential", "invalid|incorrect|wrong|bad|missing|expired|revoked|malformed",
				`\b(invalid|incorrect|wrong|bad|missing|expired|revoked|malformed)\b~\b(api[ _-]?keys?|keys?|(access |auth |bearer |api |oauth |session )?token|credentials?|client secret|secret|x-api-key|authentication|authori[sz]ation|bearer)\b`).and("key|token|credential|secret|authenticat|authori|bearer").unlessRe(reGoJSONSyntax).when(credentialAtEnd),
			pat("no-credential", "no |identifier|only be used|invalid secrets|scope", reOnlyUsedIn.String()+`|\bno (api[ _-]?key|credentials?|auth\w*)\b|\bno such (organi[sz]ation|project|workspace)\b|\b(account|object|tenant|organi[sz]ation) identifier is invalid\b|\binvalid secrets:|\bscopes?\b[^|.]{0,30}\bnot (fully )?(includes?|granted|allowed|permitted)\b|\binsufficient scopes?\b`),
			pat("credential-bad", "key|token|credential|secret|signature",
				`\b(api[ _-]?key|key|token|credentials?|secret|signature)s?\b~\b(is |was |has |have )?(been )?(invalid|not valid|expired|revoked|incorrect|missing|not found|required|invalidated|does not match|must be (set|provided)|not set|not provided|not configured)\b`).and("invalid|not valid|expired|revoked|incorrect|missing|not found|required|does not match|must be|not set|not provided|not configured").when(credentialStated).unlessRe(rx(`/(key|token|secret|credentials?)/`)), // a JSON path's segment
			pat("auth-failed", "auth", `\bauthenticat\w*\b~\b(fail\w*|error|required|invalid|denied)\b|\bauth failure\b|\b(failed|could not|unable) to authenticate\b|\bunauthenticated\b|\bunauthori[sz]ed\b|\bnot authori[sz]ed\b|\bauthori[sz]ation (required|failed|header)\b|\bno auth available\b|\bauth[ _]unavailable\b`),
			pat("permission", "permission|access|scope", `\bpermission[ _]?denied\b|\bpermission '[^'|]{1,80}' denied\b|\bpermission_error\b|\binsufficient[ _]permissions?\b|\b(does not|do not|doesn't|don't) have (the )?(required |necessary )?permissions?\b|\bmissing (required )?scopes?\b|\baccess[ _]?denied\b|\b(gateway|api|endpoint|platform) access (failed|refused|rejected)\b|\bnot allowed to access\b|\bno permission\b|\b(do not|don't|does not|doesn't) have access to (the |this |your |that )?(organi[sz]ation|project|workspace|account|resource)`).unlessRe(reFilePermission),
			pat("forbidden", "forbidden", `^forbidden\b|\b403 forbidden\b|\bforbidden:|\brequest[ _]forbidden\b`),
			pat("not-authenticated", "authenticated", `\bnot authenticated\b`),
			pat("sign-in", "sign|log|authenticate|session", `\b(sign|log)[ -]?in again\b|\bnot (signed|logged) in\b|\bplease (sign|log) ?in\b|\blogin (fail\w*|required|expired)\b|\bre-?authenticate\b|\bsession (has )?expired\b`),
			pat("endpoint-or-credentials", "credentials", `\binvalid (api )?(endpoint|url) or (api )?(key|credentials)\b`),
			pat("location", "location|country|region|territory", reLocation).when(func(c *textCtx, _ string) bool { return !c.ev.hasRaw }),
			pat("ip-not-allowed", "ip", `\bip (address )?(is )?not (authori[sz]ed|allowed|whitelisted|permitted)\b|\bip_not_authorized\b`),
			pat("signature", "signature|security token|unrecognizedclient", `\bsignature does not match\b|\bsecurity token\b~\binvalid\b|\bunrecognizedclient\b`),
			lit("auth-zh", "鉴权失败", "认证失败", "身份验证失败", "无权访问", "未授权", "密钥无效", "令牌无效", "无效的令牌", "令牌已过期", "令牌验证失败", "没有权限", "权限不足", "禁止访问", "签名过期", "签名错误", "签名无效", "签名验证失败"),
			lit("auth-ja-ko", "apiキーが無効", "無効なapiキー", "apiキーが正しくありません", "認証に失敗", "認証エラー", "アクセス権限がありません", "権限がありません", "유효하지 않은 api 키", "api 키가 유효하지", "잘못된 api 키", "api 키가 올바르지", "인증 실패", "인증에 실패", "인증 오류", "권한이 없습니다", "접근 권한이 없"),
			lit("auth-intl", "clave de api no es válida", "clave de api inválida", "clave api inválida", "chave de api inválida",
				"chave da api inválida", "clé api invalide", "clé d'api invalide", "clé api non valide", "ungültiger api-schlüssel",
				"api-schlüssel ist ungültig", "chiave api non valida", "неверный api-ключ", "недействительный api-ключ", "неверный токен",
				"токен недействителен", "geçersiz api anahtarı", "khóa api không hợp lệ", "kunci api tidak valid", "nieprawidłowy klucz api",
				"ongeldige api-sleutel", "acceso no autorizado", "acesso não autorizado", "accès non autorisé", "nicht autorisiert", "не авторизован"),
			pat("key-invalid-zh", "无效|过期|失效", `(api ?key|key|令牌|密钥|token)[^。|]{0,6}(无效|已过期|过期|已失效|失效)|无效的(api ?key|key|令牌|密钥)`),
		}},
		// A resource busy with another run (Assistants' thread): it passes once that run ends.
		{name: "busy-resource", rank: rankStream, reason: ReasonTimeout, rules: []rule{pat("run-active", "active|in progress", `\bwhile (a |the )?(run|request|operation|job|task) (\S+ )?is (still )?(active|in progress|running)\b|\balready has an active (run|request|operation|job|response)\b`)}},
		{name: "stream-broke", rank: rankStream, reason: ReasonTimeout, rules: []rule{
			// A stream that ended without its end event says so in words that may
			// also name a tool call or JSON: it is the transport, not the request.
			// Go's JSON decoder on a malformed chunk ("invalid character 'x' looking for
			// beginning of object key string") is the provider's broken stream too.
			// An SDK that cannot parse the finish reason "error" quotes it:
			// "choices.0.finish_reason | Input should be 'stop' or 'length'
			// [type=enum, input_value='error', ...]" (C6: a stream that stopped with
			// reason error), "unexpected finish reason \"error\"".
			pat("stop-reason-error", "input_value|finish reason|stop reason|finish_reason|stop_reason", `\binput_value='(error|abort|aborted)'|\b(unknown|unexpected|unhandled|invalid|unsupported) (finish|stop)[ _]reason\W{0,3}'?"?(error|abort|aborted)\b`).and("finish_reason|stop_reason|finishreason|stopreason|finish reason|stop reason"),
			// A client that could not read the response: an HTML page where JSON was
			// expected ("Unexpected token < in JSON at position 0", Jackson's
			// "Unexpected character ('<'", .NET's "'<' is an invalid start of a value"),
			// a response that failed the SDK's schema, a broken HTTP response. The
			// provider's answer was broken, not our request (C6); a 4xx that says so
			// is a server that could not read ours, left to the format family.
			pat("response-unreadable", "returned|type validation|expecting value|unpars|invalid api response|responded|replied|answered|json.parse|malformed http|transport connection broken|unexpected token|unexpected character|invalid start of a value|jsondecodeerror|apiresponsevalidationerror|data returned by api|error decoding response|response|completion|result|chunk|validation error|mimetype|decompressing",
				`\bmalformed http response\b|\btransport connection broken\b|\bunexpected token '?<|\bunexpected token\b~\bis not valid json\b|\bunexpected character \('<'|\bis an invalid start of a value\b|\bjsondecodeerror\b|\bapiresponsevalidationerror\b|\bdata returned by api invalid\b|\berror decoding response body\b|\b(failed|unable|could not) to (decode|parse|deserialize) (the )?(server'?s? )?(json )?(response|response body)\b|\binvalid json response\b|\b(responded|replied|answered) with (an )?invalid json\b|\bjson\.parse: unexpected (character|end of data|non-whitespace character)\b|\b(empty or )?unpars(e)?able (api )?response\b|\binvalid api response\b|\btype validation failed: value:|\b(server|model|api|provider|endpoint) returned (an? )?(invalid|malformed|unexpected) (response|output)\b|^expecting value: line 1 column 1 \(char 0\)|`+reResponseSchema).
				when(notClientStatus),
			// A body cut short of its stated length or its last chunk: aiohttp's
			// "ClientPayloadError: Response payload is not completed:
			// <TransferEncodingError: 400, message='Not enough data for satisfy
			// transfer length header.'>" (the 400 is aiohttp's own code, not the
			// server's), its ContentLengthError, Node's "Premature close" kin.
			pat("payload-incomplete", "payload|transferencoding|contentlength|not enough data",
				`\bclientpayloaderror\b|\bresponse payload is not completed\b|\btransferencodingerror\b|\bcontentlengtherror\b|\bnot enough data (for|to) satisfy (transfer|content)[ -]length\b`),
			pat("stream-broke", "receive|stream|chunks|ended|incomplete|unexpected end|unable to process|invalid character|malformed|valid",
				`\binvalid character '.{1,6}' (looking for|after|in)\b|\b(failed|unable|could not|couldn't) to (create|open|start|establish) (the |a )?(event[- ])?(stream|streaming|sse)\b|\bmalformed (upstream|sse|stream(ing)?|server|provider)( stream)? (chunk|event|frame|response|data)\b|\bstream(ing)? (response |request |connection )?(closed|was closed|aborted|ended|interrupted|disconnected|error|terminated|reset|failed)\b|\bwithout sending (any )?chunks\b|\b(request|response|stream) ended (early|prematurely|unexpectedly)\b|\bincomplete (stream|response)\b|\bunexpected end of (stream|json input|file)\b|\bis unable to process your request\b|\bstream (was |is )?(invalid|malformed|truncated)\b|\b(completed|ended|finished) without (any )?valid (content|output|response|chunks?)\b|\b(did not|didn't|never) receive[ds]? (a |any |the )?(done|success|final|end|stop|finish)( or \w+)? (response|message|event|chunk|signal)\b`).when(notClientStatus), // a 4xx came before any stream: the status says
		}},
		{name: "format", rank: rankFormat, reason: ReasonFormat, rules: []rule{
			pat("check-inputs", "check", `\bcheck (your|the) (inputs?|request parameters|request body)\b`).unlessRe(reNotPromptCount),
			// A retired feature with its replacement ("Live search is deprecated. Please switch to
			// the Agent Tools API"): the request must change (a retired model is model_not_found).
			pat("feature-retired", "deprecated|no longer supported", `\b(is|has been|was|are|have been) (deprecated|no longer supported)\b[^a-z]{0,4}(please )?(switch|migrate|move) to\b`).
				unlessRe(rx(`\bmodels?\b`)),
			pat("invalid-request", "invalid|reject|refus|policy|policies|configuration", `\b(invalid|unknown|unsupported) (content[ _-]?filter(ing)? )?(polic(y|ies)|configuration)\b|\b(rejected|refused) (the |this |your )?(request'?s? )?(schema|payload|body|json|parameters|tool (call|payload|schema))\b|\binvalid[ _](request|argument|parameter|param|value|type|json|format|body|input|schema|enum|field|role)s?\b|\binvalid '[^']{1,40}'|\binvalid `+"`"+`\w+`+"`"),
			pat("unsupported", "support|unrecognized|unknown|additional|extra", `\bunsupported[ _](parameter|value|type|format|media|field|role|content|image|file|audio|video|document)\b|\b(unrecognized|unknown) (request )?(argument|field|parameter|key|propert(y|ies))s?\b|\badditional properties are not allowed\b|\bextra[ _](inputs are not permitted|forbidden)\b|\b(does not|doesn't|do not) support\b|\bis not supported\b|\bnot supported (with|for|by|when|in)\b`),
			pat("validation", "validation|value_error|required|must|should match|cannot be|mandatory|provided", `\bfailed validation\b|\bno messages? (were |was )?(provided|given|specified)\b|\bvalidation (error|failed|exception)\b|\bvalidationexception\b|\bvalue_error\b|\bfield required\b|\bmissing required\b|\bis required\b|\bmust (be|have|contain|end|start|not)\b|\bshould match pattern\b|\bcannot be (modified|disabled|empty)\b|\bis mandatory\b`),
			pat("malformed", "malformed|json|parse|unexpected|field `|variant `|invalid type: ", `\b(missing|unknown|duplicate) field \x60|\bunknown variant \x60|\binvalid type: [^|]{1,40}, expected\b|\bmalformed\b|\bnot valid json\b|\binvalid json\b|\bexpected value in json\b|\bparse error\b|\b(failed|unable) to parse\b|\bcould not parse\b|\bunexpected (token|character)\b`),
			word("conversation-shape", "roles must alternate", "prefill", "tool_use", "tool_call", "thinking block", "thinking blocks",
				"image dimension", "image dimensions", "parameter error"), // "Bad Request" is the status's phrase (textStatus), no cause
			// A stored item the request points at is gone (Responses API previous_response_id, a
			// runtime's chat history node, an item not persisted with store=false): the same request fails again.
			pat("unknown-reference", "with id|previous_response|not persisted|not issued", `\bwas not issued to (this|the) (caller|client|key|user|organi[sz]ation|project)\b|\b(previous response|(prediction )?history node|conversation( item)?|item|message|thread|(tool |function )?call)s? with id ['"][^'"|]{1,80}['"] (was )?not found\b|\bprevious_response_not_found\b|\bitems are not persisted\b`),
			// A count the request may not pass: "only supports a single image per message",
			// "A maximum of 4 blocks with cache_control may be provided" (not a rate: no window).
			pat("count-limit", "only support|supports only|only accept|accepts only|maximum of|at most|no more than|too many", `\btoo many (images|files|documents|attachments|pages|tools|blocks)( and \w+)?( in (the |this |your )?(request|message|conversation|prompt|document|input))?\s*[:(>]|\b(only supports?|supports only|only accepts?|accepts only) (a single|one|\d+|up to \d+) (images?|files?|audios?|videos?|documents?|attachments?|tools?|blocks?) (per|in (a|one|each|the)) (message|request|prompt|turn|call|input)\b|\b(a maximum of|at most|no more than) \d+ [\w ]{1,40}? (may|can) be (provided|sent|attached|included|specified|used)\b`).unlessRe(reWindowWords),
			pat("model-unnamed", "model", `\b(must|have to|need to) specify a (valid )?model\b|\bno model (was |is )?(specified|provided|given)\b`),
			pat("bad-header", "header", `\bheader\b~\b(is |was )?(invalid|malformed|not valid|not supported|unrecognized)\b`),
			lit("format-zh", "参数非法", "非法参数", "参数错误", "参数无效", "参数不合法", "无效的参数", "请求参数", "格式错误", "不合法", "不支持", "参数有误"),
		}},
		{name: "not-a-signal", rank: rankNotASignal, reason: ReasonUnclassified, rules: []rule{
			// C7: a generic "failed with an unknown error" says nothing, and a local
			// runtime out of memory is neither transient nor fixed by another key.
			lit("unknown-failure", "failed with an unknown error"),
			pat("out-of-memory", "memory", `\b(requires|needs|need) more (system |gpu |video |host )?memory\b|\bout of (gpu |video |host |device )?memory\b|\binsufficient (system |gpu )?(memory|resources)\b|\brequires approximately [\d.]+ ?[gmt]i?b of memory\b`),
		}},
		{name: "server-or-network", rank: rankGeneric, reason: ReasonTimeout, rules: []rule{
			// Rust's io::ErrorKind as a client prints it ("Io(Kind(ConnectionReset))").
			word("io-kind", "connectionreset", "connectionaborted", "connectionrefused", "brokenpipe", "unexpectedeof"),
			pat("timed-out", "time|deadline", `\btime[ds]? ?out\b|\btimeout\b|\btimed out\b|\bdeadline[ _]exceeded\b|\bdeadline of [\d.]+ ?m?s exceeded\b|timeouterror\b`).when(notTimeoutSetting),
			pat("server-error", "server|error|internal", `\binternal[ _]?(server[ _]?)?(error|exception|failure)\b|\bserver[ _]error\b|\bserver had an error\b|\berror occurred while processing\b|\bunexpected error (has )?occurred\b|\bunexpected error (during|while|when) (processing|handling)\b|\binternal error\b`),
			pat("gateway", "threw|duration|lifetime|gateway|unavailable|upstream|backend|origin|web server|timeout|unknown error|handshake|invalid response|is down|no response|response from|request failed",
				`\bbad gateway\b|\b(failed|unable|could not|couldn't) to (get|receive|obtain|read) (a |any |the )?response from (the )?(provider|upstream|model|server|backend|origin|api|endpoint)\b|\bno response (was )?(received )?from (the )?(provider|upstream|model|backend|origin)\b|\b(gateway|proxy|relay|router) request failed\b|\bgateway time-?out\b|\bservice[ _]?unavailable\b|`+reUpstream+`|\bbackend error\b|\borigin is unreachable\b|\bweb server is (down|returning)\b|\ba timeout occurred\b|\bunknown error, 52\d\b|\bssl handshake failed\b|\binvalid response from (it|the upstream|the provider|the model)\b|\bmodel is down\b|\b(worker|server|handler|function|script|backend) threw (an? )?(uncaught )?exception\b|\b(session|connection|stream) (hit|reached|exceeded) (the |its )?(maximum|max) (duration|lifetime)\b`),
			pat("connection", "connection|empty reply|network|host|eof|net::err_|ns_error_|pipe|socket|closed|fetch|econn|etimedout|epipe|ehost|enet|eai_again|enotfound|und_err|tls|dns|tcp|udp|premature|stream_read|chunked|protocol|disconnected|goaway|incompleteread|sending the request|sending request|nsurlerror|offline|connect to",
				`\bconnection (reset|refused|error|closed|aborted|lost|was closed|timed out|terminated|dropped|failed)\b|\bnetwork (error|is unreachable|request failed|failure)\b|\bno such host\b|\bunexpected eof\b|\bbroken pipe\b|\bsocket hang up\b|\bother side closed\b|\bfetch failed\b|\b(econnreset|econnrefused|econnaborted|etimedout|esockettimedout|epipe|ehostunreach|enetunreach|ehostdown|enetreset|eai_again|enotfound)\b|\bund_err\w*|\btls handshake (timeout|timed out|failed|failure|error|eof|aborted|interrupted)\b|\b(during|in|mid-?) ?(the )?tls handshake\b|\bdns (failure|error|lookup)\b|\b(dial|read|write) (tcp|udp)\b|\bpremature close\b|\bstream_read_error\b|\bpeer closed (the )?connection\b|\b(closed|reset|dropped|lost) (the )?connection\b|\bgoaway\b|(?:^|: |\| )eof(?: \||$)|\bincomplete chunked read\b|\bremote ?protocol ?error\b|\bserver disconnected\b|\bconnection broken\b|\bincompleteread\b|\bchunkedencodingerror\b|\bsocket disconnected before\b|\bforcibly closed by the remote host\b|\bunable to read data from the transport connection\b|\ban error occurred while sending the request\b|\beofexception\b|\berror sending request for url\b|\bnsurlerrordomain code=-10(0[1-9]|1\d|20)\b|\bempty reply from server\b|\bthe network connection was lost\b|\binternet connection appears to be offline\b|\ba server with the specified hostname could not be found\b|\bcould not connect to the server\b|\bnet::err_(connection_\w+|name_not_resolved|internet_disconnected|address_unreachable|network_changed|empty_response|timed_out|http2_\w+|quic_protocol_error|incomplete_chunked_encoding|proxy_connection_failed|tunnel_connection_failed|ssl_protocol_error)\b|\bns_error_(connection_refused|net_\w+|unknown_host|proxy_connection_refused)\b`),
			pat("terminated", "terminated", `(?:^|\| )(?:\w*error:\s*)?terminated(?: \||$)|\b(process|runner|connection|stream|socket|request) (has |was )?terminated\b`),
			// A server that reports its own bug or sends the reader to its console: vLLM's
			// "Task finished unexpectedly. This should never happen! Please open an issue".
			pat("server-bug", "never happen|an issue|a bug|console|log|stack", `\bthis should never happen\b|\bplease (open|file|report|submit) (an? |this )?(issue|bug)\b|\b(check|see|consult) the (server|backend|worker|engine)('s)? (console|logs?|output)\b|\bsee (the )?stack ?trace above\b`),
			pat("operation-aborted", "aborted|interrupted", `\boperation was aborted\b|\b(prediction|generation|inference|completion|job|task|run) (was |has been )?interrupted\b`),
			// C6: unavailable for now says nothing of load (C5 is a server unable to handle the requests).
			pat("temporarily-unavailable", "temporarily|currently", `\b(temporarily|currently) unavailable\b`).unlessRe(reEAGAIN).when(notExample),
			pat("unknown-occurred", "unknown error", `\ban unknown error (has )?occurred\b`),
			pat("retry", "retr|try again", `\bplease retry or report\b|\b(please|you can|kindly|you may) (retry|try again)(\s*(\||$)| (later|shortly|soon|in a|after|your request|the request|or|if|when))|\b(retry|try) your request( again)?\b|\bfailed after repeated internal retries\b`).when(notClientStatus), // a 4xx's "please try again" is boilerplate: the status says
			lit("openrouter-provider-error", "provider returned error").only("openrouter").when(func(c *textCtx, _ string) bool { return !c.ev.hasRaw }),
			// Python (httpx, httpcore, aiohttp, requests/urllib3), Windows and curl
			// wording of DNS, refused and broken connections.
			pat("dns", "name|resolv|getaddrinfo|servname|dns",
				`\btemporary failure in name resolution\b|\bname or service not known\b|\bnodename nor servname provided\b|\bgetaddrinfo( failed|\b)|\bno address associated with hostname\b|\bcould not resolve (host|hostname|proxy)\b|\bfailed to resolve\b|\bnameresolutionerror\b|\bclientconnectordnserror\b`),
			pat("refused", "refused|connect|winerror|errno|route|unreachable|remote end|connection aborted|timeout|error|disconnect|exception",
				`\bactively refused\b|\b(unable|failed|could not|couldn't|can't|cannot) (to )?connect\b|\bwinerror 100(61|60|54|53|51)\b|\bconnectex\b|\[errno (111|104|110|113|101|61|54|60|65)\]|\ball connection attempts failed\b|\bcannot connect to host\b|\bfailed to establish a new connection\b|\b(newconnectionerror|connecterror|connecttimeout|connecttimeouterror|readtimeout|readerror|writeerror|remoteprotocolerror|pooltimeout|connectionreseterror|connectionrefusederror|serverdisconnectederror|clientconnectorerror|clientoserror|apiconnectionerror)\b|\bremote end closed connection\b|\bconnection aborted\b|\bno route to host\b|\b(network|host) is unreachable\b|\b(unknownhostexception|sockettimeoutexception|sslhandshakeexception|connecttimeoutexception|httpconnecttimeoutexception)\b`),
			// TLS: a certificate the client will not trust, or a broken handshake. No
			// provider answered; another endpoint may (a proxy on this path is the
			// usual cause, and is not fixed by waiting, but the next candidate is
			// often reached another way).
			pat("tls", "cert|ssl|tls|x509|handshake|eof occurred|wrong_version|fatal alert|unknown_ca",
				`\bcertificate[_ ]verify[_ ]failed\b|\bself[- _]signed[ _](cert|certificate)\b|\bself_signed_cert_in_chain\b|\bdepth_zero_self_signed_cert\b|\bunable to (get|verify) (the )?(local issuer|first|issuer) certificate\b|\bunable_to_(get_issuer_cert_locally|verify_leaf_signature)\b|\bcert_has_expired\b|\bcertificate has expired\b|\bx509:|\berr_tls_cert_altname_invalid\b|\bdoes not match certificate'?s altnames\b|\b(sslerror|ssleoferror|sslcertverificationerror|sslzeroreturnerror)\b|\[ssl[:\]]|\beof occurred in violation of protocol\b|\bwrong[_ ]version[_ ]number\b|\bssl connection could not be established\b|\bssl routines\b|\bhandshake[_ ]failure\b|\bssl_error_\w+|\bssl_connect\b|\btlsfatalalert\b|\breceived fatal alert\b|\bcertificate_unknown\b|\bunknown_ca\b|\bbad_certificate\b`),
			lit("server-zh", "内部错误", "服务器错误", "服务器内部错误", "系统错误", "系统异常", "网络错误", "网络异常", "服务不可用", "请求超时", "连接超时", "连接错误", "超时"),
			lit("server-ja-ko", "内部エラー", "サーバーエラー", "タイムアウト", "接続エラー", "接続がタイムアウト", "내부 오류", "서버 오류", "시간 초과", "연결 오류", "시간이 초과"),
			// The operating system's own words for a refused, reset or timed-out
			// connection, as a localized Windows (the WSAECONNREFUSED,
			// WSAECONNRESET, WSAETIMEDOUT and WSAHOST_NOT_FOUND message table) or a
			// glibc strerror in another locale prints them: a client on such a
			// machine quotes them with or without "[WinError 10061]".
			lit("socket-localized",
				// Windows 10061 (refused)
				"积极拒绝", "拒否されたため、接続できませんでした", "연결을 거부했으므로", "verbindung verweigerte",
				"expresamente dicha conexión", "l’a expressément refusée", "l'a expressément refusée", "recusou ativamente",
				"rifiuto persistente del computer di destinazione", "отверг запрос на подключение", "etkin olarak reddettiğinden",
				"chủ động từ chối", "secara aktif menolaknya",
				// Windows 10054 (reset)
				"远程主机强迫关闭了一个现有的连接", "遠端主機已強制關閉一個現存的連線", "リモート ホストに強制的に切断されました", "원격 호스트에 의해 강제로 끊겼습니다",
				"vom remotehost geschlossen", "interrupción de una conexión existente por el host remoto", "fermée par l’hôte distant",
				"fermée par l'hôte distant", "cancelamento de uma conexão existente pelo host remoto", "chiusura forzata di una connessione esistente",
				"принудительно разорвал существующее подключение", "zorla kapatıldı",
				// Windows 10060 (timed out)
				"连接尝试失败", "一定の時間を過ぎても正しく応答しなかった", "연결된 구성원으로부터 응답이 없어", "nicht richtig reagiert hat",
				"no respondió adecuadamente tras un periodo de tiempo", "n’a pas répondu convenablement", "n'a pas répondu convenablement",
				"não respondeu corretamente após um período", "за требуемое время не получен нужный отклик", "belli bir süre içinde yanıt vermediğinden",
				// glibc ECONNREFUSED, ECONNRESET, ETIMEDOUT, EHOSTUNREACH in other locales
				"拒绝连接", "连接被对方重设", "接続を拒否されました", "接続が相手からリセットされました", "接続がタイムアウトしました",
				"connexion refusée", "connexion ré-initialisée par le correspondant", "connexion terminée par expiration du délai d'attente",
				"aucun chemin d'accès pour atteindre l'hôte cible", "verbindungsaufbau abgelehnt", "verbindung vom kommunikationspartner zurückgesetzt",
				"die wartezeit für die verbindung ist abgelaufen", "keine route zum zielrechner", "conexión rehusada", "conexión rechazada",
				"conexión reinicializada por la máquina remota", "expiró el tiempo de conexión", "conexão recusada",
				"conexão reinicializada pelo par", "tempo esgotado para conexão", "connessione rifiutata", "connessione interrotta dal corrispondente",
				"в соединении отказано", "соединение разорвано другой стороной", "время ожидания соединения истекло", "bağlantı reddedildi",
				"kết nối bị từ chối", "koneksi ditolak",
				// Windows 10061 in Traditional Chinese, Polish and Dutch; 11001 (no such host)
				"目標電腦拒絕連線", "aktywnie go odmawia", "actief heeft geweigerd", "der angegebene host ist unbekannt",
				"no se conoce ningún host con ese nombre", "不知道这样的主机", "そのようなホストは不明です", "этот хост неизвестен", "알려진 호스트가 없습니다",
				// glibc's name resolution and unreachable networks in other locales
				"der name oder der dienst ist nicht bekannt", "nom ou service inconnu", "nombre o servicio desconocido", "未知的名称或服务",
				"名前またはサービスが不明です", "имя или служба не известны", "nome ou serviço desconhecido", "temporärer fehler bei der namensauflösung",
				"échec temporaire dans la résolution du nom", "fallo temporal en la resolución del nombre", "域名解析暂时失败",
				"временный сбой в разрешении имен", "das netzwerk ist nicht erreichbar", "le réseau n'est pas accessible", "la red es inaccesible",
				"网络不可达", "сеть недоступна"),
			// Timed out, in the European and other languages (glibc, .NET and relays).
			lit("timeout-intl", "tiempo de espera agotado", "se agotó el tiempo de espera", "se excedió el tiempo de espera", "tempo limite esgotado",
				"o tempo limite da operação", "a operação expirou", "délai d'attente dépassé", "délai d'attente expiré", "l'opération a expiré",
				"l’opération a expiré", "zeitüberschreitung", "zeitlimit überschritten", "tempo scaduto", "время ожидания истекло",
				"время ожидания операции истекло", "превышено время ожидания", "zaman aşımı", "hết thời gian chờ", "batas waktu habis",
				"przekroczono limit czasu", "tempo limite da solicitação esgotado", "tempo limite excedido", "tempo limite atingido"),
			// Client stacks' words for a connection that closed or a fetch that
			// failed with no response: Firefox's and Safari's fetch ("NetworkError
			// when attempting to fetch resource.", "TypeError: Load failed"),
			// Chrome's ("Failed to fetch") as the whole message, gRPC's and Mint's
			// "socket closed".
			// Java's "Premature EOF", Ruby's Net::OpenTimeout ("execution expired"
			// is Ruby's Timeout::Error), Go's "http2: client connection lost".
			pat("client-closed", "fetch|load failed|socket closed|premature eof|opentimeout|execution expired|connection lost",
				`\bnetworkerror when attempting to fetch\b|(?:^|\| )(?:typeerror:\s*)?(failed to fetch|load failed)\W{0,3}(\||$)|(?:^|\| |: |\) |["'])socket closed\b|\bpremature eof\b|\b(net::)?opentimeout\b|\bexecution expired\b|\bhttp2: client connection lost\b`),
		}},
	}
	guardIntl(fs)
	return fs
}

// reUpstream is a proxy's word for the service behind it, said of a failure
// ("upstream error", "upstream connect error", "no healthy upstream", "failed
// to reach the upstream", "upstream returned 502"), not the word alone: a git
// branch or a river has an upstream too.
const reUpstream = `\bupstream[ _-]?(error|errors|connect|connection|request|server|service|provider|api|model|failure|failed|fail|unavailable|timed|timeout|returned|responded|closed|prematurely|reset|response|status|overloaded|busy|exception|http|is (down|unavailable|unreachable|not responding|overloaded|busy))\b|\bupstream\W{1,3}(status\W{1,3})?[45]\d\d\b|\bno healthy upstream\b|\b(from|by|reach|reaching|contact|contacting|calling|connect to|connecting to|with) (the |an |your )?upstream\b`

// reResponseSchema is a client library that could not fit the provider's
// answer into its response type: pydantic's "validation error for
// ChatCompletion", Jackson's "Cannot deserialize value of type ...Response" and
// "Unrecognized field ... (class ...Result)", System.Text.Json's "could not be
// converted to ...ChatCompletion", Go's "cannot unmarshal ... of type
// ...Response", Rust's "failed to deserialize api response", aiohttp's
// unexpected mimetype, httpx's failed decompression. (Python's bare
// "KeyError: 'choices'" stays unclassified: code that indexed an error body it
// never read says nothing of what the error was.) The type named is a response's, never a request's (a request
// that failed validation is format), nor an error's (an undecodable error says
// nothing of who must change: one-api's "Error.Response.Error.Code").
const reResponseSchema = `\bvalidation errors? for (\w*response|chatcompletion(chunk)?|completion|message|generatecontentresponse)\b` +
	`|\bcannot deserialize value of type [\x60'"]?[\w.$]*(response|result|completion|chunk)\b` +
	`|\bunrecognized field "[^"]{1,40}" \(class [\w.$]*(response|result|completion|chunk)\)` +
	`|\bcould not be converted to [\w.$]*(response|result|completion|chunk)\b` +
	`|\bcannot unmarshal \w+ into go (value|struct field) of type [\w.*\[\]]*(response|completion|chunk)\b` +
	`|\bfailed to deseriali[sz]e (the )?(api |server |http )?response\b` +
	`|\battempt to decode json with unexpected mimetype\b` +
	`|\berror -?\d+ while decompressing data\b`

// A file the process may not open, and a disk over its quota, are this
// machine's errors, not a provider's: Go's "open /etc/x: permission denied",
// Python's "[Errno 13] Permission denied", Node's "EACCES: permission denied,
// open", the kernel's "disk quota exceeded" (EDQUOT).
var (
	reFilePermission = rx(`\b(open|read|write|stat|lstat|mkdir|remove|rename|chmod|unlink|exec|fork/exec)\s+\S*/\S*:\s*permission denied\b|\[errno 13\]|\beacces: permission denied, \w+ '`)
	reDiskQuota      = rx(`\bdisk quota\b|\bedquot\b`)
	// EAGAIN from a system call ("fork/exec /usr/bin/ollama: resource
	// temporarily unavailable"): this machine is short of processes or
	// descriptors, no provider is busy.
	reEAGAIN = rx(`\b(fork/exec|exec|read|write|accept|open|pipe|clone)\b[^|]{0,80}: resource temporarily unavailable\b`)
	// The stock texts proxies send with their own 503: nginx's reason phrase
	// "503 Service Temporarily Unavailable" (a Kubernetes ingress with no ready
	// endpoint), HAProxy's "No server is available to handle this request."
	// (every backend down). They state the status, not a busy server (C6).
	reStockStatus = rx(`\bservice temporarily unavailable\b|\bno server is available to handle this request\b`)
)
