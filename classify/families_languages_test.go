package classify

import (
	"testing"
	"time"
)

// TestClassify_FamiliesLanguagesShapesStacks: other wordings of the families
// that errors-unseen5 (testdata/corpus/README.md) found missing, none of them in
// a corpus, each as another provider, proxy, runtime, client library or
// language words it, with negative controls beside them. The set itself is not
// tuned against; this table is (C1-C11, A4):
//
//   - the operating system's words for a refused, reset or timed-out
//     connection in other languages (Windows' message table, glibc's strerror),
//     with no "[WinError]" or "[Errno]" code beside them: timeout;
//   - client stacks' closed sockets and failed fetches (Chrome, Mint, gRPC) as
//     the whole message, and bodies cut short of their stated length
//     (aiohttp): timeout, while prose with the same words stays unclassified;
//   - client libraries' own cancel (axios, asyncio, OkHttp, Kotlin) with no
//     response: aborted, while a server that reports one is a server error;
//   - gRPC status names printed by its clients ("code = Unavailable desc",
//     "StatusCode.UNAUTHENTICATED"), read through the code table;
//   - stop reasons that are filters (Bedrock's content_filtered, Cohere's
//     ERROR_TOXIC in a stream): content_filter;
//   - a server shedding load (a full request queue, too many pending
//     requests) and busy or overloaded in other languages: overloaded (C5);
//   - proxies' stock 503 texts (nginx's "Service Temporarily Unavailable",
//     HAProxy's "No server is available ...") state the status, not a busy
//     server: timeout (C6), while a 503 that says overloaded stays overloaded;
//   - an abuse guard's block of a network's traffic: rate_limit, not a content
//     filter, while content that breaks a policy stays content_filter;
//   - a quota replenished or refilled after a stated wait, also as hh:mm:ss:
//     rate_limit with its recovery (C3, C11);
//   - Google IAM's denial "(or it may not exist)": auth, while a model that
//     was not found stays model_not_found;
//   - a request over a gateway's or gRPC channel's size cap: context_overflow
//     (C8), even when gRPC calls it RESOURCE_EXHAUSTED;
//   - context overflow in other languages, said with a verb of exceeding;
//   - rate limits, balances, bad keys, missing models, timeouts and content
//     policies in the European and other languages, where no status says
//     it, and the socket errors of name resolution there too;
//   - a dead vLLM engine: unclassified, as a dead runner (C7);
//   - this process out of file descriptors with no response: local (A4), while
//     a provider that says so with a status is the provider's trouble;
//   - conditions and examples around the words of other languages, a remedy
//     after its condition, a timeout named as a setting and a rate unit that
//     describes an allowance: prose, unclassified (C7).
func TestClassify_FamiliesLanguagesShapesStacks(t *testing.T) {
	checkReasons(t, []reasonCase{
		// localized socket errors, no error code beside them
		{"ollama", 0, "System.Net.Http.HttpRequestException: Aucune connexion n’a pu être établie car l’ordinateur cible l’a expressément refusée. (localhost:11434)", ReasonTimeout},
		{"openai-compatible", 0, "HttpRequestException: Impossibile stabilire la connessione. Rifiuto persistente del computer di destinazione. (127.0.0.1:8080)", ReasonTimeout},
		{"openai", 0, "Se ha forzado la interrupción de una conexión existente por el host remoto", ReasonTimeout},
		{"openai", 0, "由于连接方在一段时间后没有正确答复或连接的主机没有反应，连接尝试失败。", ReasonTimeout},
		{"vllm", 0, "curl: (28) Die Wartezeit für die Verbindung ist abgelaufen", ReasonTimeout},
		{"llama.cpp", 0, "Ошибка соединения: В соединении отказано", ReasonTimeout},
		{"any", 0, "La conexión entre las dos ideas es sutil.", ReasonUnclassified},
		// client stacks: closed sockets, failed fetches, short bodies
		{"openai-compatible", 0, "TypeError: Failed to fetch", ReasonTimeout},
		{"anthropic", 0, "** (Mint.TransportError) socket closed", ReasonTimeout},
		{"openai", 200, "ContentLengthError: 400, message='Not enough data to satisfy content length header.'", ReasonTimeout},
		{"any", 0, "Failed to fetch the list of plugins from the registry.", ReasonUnclassified},
		{"any", 0, "The page load failed twice before it rendered.", ReasonUnclassified},
		{"openai", 0, "pycurl.error: (52, 'Empty reply from server')", ReasonTimeout},
		{"huggingface", 400, `{"error":"Model bigscience/bloom is too large to be loaded on this endpoint"}`, ReasonModelNotFound},
		// client libraries' own cancel with no response; a server that says so
		{"openai", 0, "java.io.IOException: Canceled", ReasonAborted},
		{"anthropic", 0, "kotlinx.coroutines.JobCancellationException: Job was cancelled; job=StandaloneCoroutine{Cancelling}@1a2b3c", ReasonAborted},
		{"openai-compatible", 0, "CanceledError: canceled", ReasonAborted},
		{"vllm", 500, `{"detail":"asyncio.exceptions.CancelledError"}`, ReasonTimeout},
		// gRPC status names in text
		{"any", 0, "rpc error: code = Unavailable desc = transport is closing", ReasonTimeout},
		{"google-vertex", 0, "<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.UNAUTHENTICATED\n\tdetails = \"Request is missing required authentication credential.\"\n>", ReasonAuth},
		{"any", 0, "rpc error: code = ResourceExhausted desc = ", ReasonRateLimit},
		{"any", 0, "Set the status code = 200 in the handler.", ReasonUnclassified},
		// filter stop reasons
		{"aws-bedrock", 200, `{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"content_filtered","usage":{"inputTokens":20,"outputTokens":0,"totalTokens":20}}`, ReasonContentFilter},
		{"cohere", 200, `{"is_finished":true,"event_type":"stream-end","finish_reason":"ERROR_TOXIC","response":{"text":""}}`, ReasonContentFilter},
		// load shedding and busy words in other languages
		{"nvidia-nim", 503, `{"error":"Inference request queue is full, please retry later"}`, ReasonOverloaded},
		{"openai-compatible", 503, `{"detail":"too many pending requests"}`, ReasonOverloaded},
		{"any", 0, "The printer queue is full of old jobs.", ReasonUnclassified},
		{"openai-compatible", 503, "Der Server ist derzeit überlastet. Bitte versuchen Sie es später erneut.", ReasonOverloaded},
		{"openai-compatible", 503, `{"error":{"message":"O servidor está sobrecarregado no momento."}}`, ReasonOverloaded},
		{"gigachat", 503, `{"status":503,"message":"Сервер перегружен, повторите попытку позже"}`, ReasonOverloaded},
		// proxies' stock 503 texts state the status
		{"openai-compatible", 503, "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>openresty</center>\r\n</body>\r\n</html>", ReasonTimeout},
		{"ollama", 503, "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>", ReasonTimeout},
		{"openai-compatible", 503, `{"error":"Service temporarily unavailable, the model is overloaded"}`, ReasonOverloaded},
		{"openai-compatible", 503, `{"error":{"message":"The engine is temporarily unable to handle requests, please retry"}}`, ReasonOverloaded},
		// traffic blocks are windows; content that breaks a policy is a filter
		{"google-gemini", 429, "We're sorry... but your computer or network may be sending automated queries. To protect our users, we can't process your request right now.", ReasonRateLimit},
		{"google-gemini", 403, "Our systems have detected unusual traffic from your computer network. Please try your request again later.", ReasonRateLimit},
		{"openai", 400, `{"error":{"message":"This request violates our content policy.","type":"invalid_request_error"}}`, ReasonContentFilter},
		// quotas replenished or refilled after a stated wait
		{"azure-openai", 403, `{"statusCode":403,"message":"Out of bandwidth quota. Quota will be replenished in 00:12:05."}`, ReasonRateLimit},
		{"openai-compatible", 403, `{"error":{"message":"Your token quota will be refilled in 3 hours."}}`, ReasonRateLimit},
		// IAM denials name a resource, not a missing model
		{"google-vertex", 403, `{"error":{"code":403,"message":"Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/p/locations/europe-west4/endpoints/1234567890' (or it may not exist).","status":"PERMISSION_DENIED"}}`, ReasonAuth},
		{"google-vertex", 0, "Permission 'aiplatform.models.get' denied on resource '//aiplatform.googleapis.com/projects/p/locations/us-central1/models/my-tuned-model' (or it may not exist).", ReasonAuth},
		{"google-vertex", 404, `{"error":{"code":404,"message":"Publisher Model ` + "`projects/p/locations/us-central1/publishers/google/models/gemini-9`" + ` was not found or your project does not have access to it.","status":"NOT_FOUND"}}`, ReasonModelNotFound},
		// size caps of gateways and gRPC channels
		{"triton", 0, "rpc error: code = ResourceExhausted desc = trying to send message larger than max (10485760 vs. 4194304)", ReasonContextOverflow},
		{"triton", 0, "<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.RESOURCE_EXHAUSTED\n\tdetails = \"Received message larger than max (5242880 vs. 4194304)\"\n>", ReasonContextOverflow},
		{"azure-ai-inference", 413, `{"error":{"code":"tokens_limit_reached","message":"Request body too large for Phi-3-mini model. Max size: 4000 tokens."}}`, ReasonContextOverflow},
		// context overflow in other languages
		{"openai-compatible", 400, `{"error":{"message":"La solicitud excede la longitud máxima del contexto del modelo (8192 tokens)."}}`, ReasonContextOverflow},
		{"openai-compatible", 400, `{"error":{"message":"O tamanho do contexto excede o limite do modelo."}}`, ReasonContextOverflow},
		{"mistral", 400, `{"error":{"message":"La longueur du contexte dépasse la limite du modèle."}}`, ReasonContextOverflow},
		{"openai-compatible", 400, `{"error":{"message":"Die maximale Kontextlänge wurde überschritten."}}`, ReasonContextOverflow},
		{"any", 0, "El contexto de la novela es la Viena de posguerra.", ReasonUnclassified},
		// the other families in other languages, where no status says it
		{"openai-compatible", 200, `data: {"error":{"message":"Demasiadas solicitudes, inténtelo de nuevo más tarde."}}`, ReasonRateLimit},
		{"openai-compatible", 200, `data: {"error":{"message":"Trop de requêtes, réessayez plus tard."}}`, ReasonRateLimit},
		{"openai-compatible", 0, "Fehler: Ihr Guthaben ist aufgebraucht.", ReasonBilling},
		{"gigachat", 0, "Недостаточно средств на балансе", ReasonBilling},
		{"openai-compatible", 0, "Erro: chave de API inválida", ReasonAuth},
		{"openai-compatible", 0, "Erreur : modèle introuvable (gpt-9)", ReasonModelNotFound},
		{"openai-compatible", 0, "Fehler: Zeitüberschreitung beim Warten auf das Modell", ReasonTimeout},
		{"openai-compatible", 0, "El mensaje infringe la política de contenido.", ReasonContentFilter},
		{"lmstudio", 0, "System.Net.Http.HttpRequestException: Der angegebene Host ist unbekannt. (api.example.com:443)", ReasonTimeout},
		{"openai", 0, "urllib.error.URLError: <urlopen error [Errno -2] Nom ou service inconnu>", ReasonTimeout},
		{"any", 0, "Si la clave de API no es válida, la consola lo indica en rojo.", ReasonUnclassified},
		{"openai-compatible", 200, `data: {"error":"Has alcanzado tu límite mensual de solicitudes."}`, ReasonRateLimit},
		{"openai-compatible", 200, `data: {"error":"Günlük limit doldu."}`, ReasonRateLimit},
		{"openai-compatible", 200, `data: {"error":"Kontingent überschritten."}`, ReasonRateLimit},
		{"openai-compatible", 200, `data: {"error":"El servicio está temporalmente no disponible."}`, ReasonOverloaded},
		{"gigachat", 200, `data: {"error":"Сервис временно недоступен"}`, ReasonOverloaded},
		{"openai-compatible", 200, `data: {"error":{"message":"令牌已失效，请重新获取"}}`, ReasonAuth},
		{"openai-compatible", 200, `data: {"error":"Tempo limite excedido ao aguardar a resposta"}`, ReasonTimeout},
		{"any", 0, "Wenn das Tageslimit erreicht ist, wartet der Client bis Mitternacht.", ReasonUnclassified},
		// a dead vLLM engine
		{"vllm", 500, `{"object":"error","message":"AsyncEngineDeadError: Background loop has errored already.","type":"InternalServerError","param":null,"code":500}`, ReasonUnclassified},
		// this process out of file descriptors; a provider that says so
		{"openai", 0, "OSError: [Errno 24] Too many open files", ReasonLocal},
		{"openai-compatible", 500, `{"error":{"message":"accept4: too many open files"}}`, ReasonTimeout},
		// prose: conditions, a remedy after its condition, a setting, an allowance
		{"any", 0, "요청 한도를 초과하면 잠시 후 다시 시도하세요.", ReasonUnclassified},
		{"any", 0, "当余额不足时，服务将暂停。", ReasonUnclassified},
		{"any", 0, "Если модель перегружена, повторите запрос позже.", ReasonUnclassified},
		{"any", 0, "若账户欠费，请及时充值。", ReasonUnclassified},
		{"any", 0, "The default timeout is 600 seconds; set the timeout parameter to change it.", ReasonUnclassified},
		{"any", 0, "Free accounts get 3 requests per minute.", ReasonUnclassified},
		// ... while the same words reported stay failures
		{"openai-compatible", 0, "余额不足，请充值后重试", ReasonBilling},
		{"openai-compatible", 503, "系统繁忙，如有疑问请联系客服", ReasonOverloaded},
		{"openai-compatible", 0, "レート制限を超えました。しばらくしてから再試行してください。", ReasonRateLimit},
		{"openai", 0, "Request timed out (timeout=600)", ReasonTimeout},
		{"groq", 0, "You are sending too many requests per minute.", ReasonRateLimit},
	})
}

// covers C3, C11: a quota replenished "in 00:12:05" is a window with its wait,
// read as hours, minutes and seconds; a clock after "after" stays a moment of
// day, not a wait.
func TestClassify_C11_QuotaReplenishedClockWait(t *testing.T) {
	now := time.Date(2026, 3, 15, 12, 0, 0, 0, time.UTC)
	v := Classify(Response{Provider: "azure-openai", Status: 403,
		Body: `{"statusCode":403,"message":"Out of call volume quota. Quota will be replenished in 00:12:05."}`}, now)
	if v.Reason != ReasonRateLimit || v.RetryAfter != 12*time.Minute+5*time.Second {
		t.Errorf("got %s, wait %v; want rate_limit, 12m5s", v.Reason, v.RetryAfter)
	}
	if d, ok := clockDuration("10:25:13."); !ok || d != 10*time.Hour+25*time.Minute+13*time.Second {
		t.Errorf("clockDuration(10:25:13.) = %v, %v", d, ok)
	}
	for _, s := range []string{"10:25", "10:25:13:01", "1.5:00:00"} {
		if d, ok := clockDuration(s); ok {
			t.Errorf("clockDuration(%q) = %v, want no wait", s, d)
		}
	}
}

// covers C11, C12: a stated moment before 2015 (an HTTP date or an ISO time
// printed from a zero value, "Mon, 01 JAn 2001 0:00:00 GMT" as the fuzzer
// found it) is no reset, as a small epoch is not; a moment in range still is.
func TestClassify_C11_NoMomentBefore2015(t *testing.T) {
	now := time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)
	resetOf := func(s string) time.Time {
		v := Classify(Response{Provider: "any", Status: 429, Headers: map[string]string{"Retry-After": s}, Body: "limit reached, resets at " + s}, now)
		return v.RecoveryAt
	}
	for _, s := range []string{"Mon, 01 JAn 2001 0:00:00 GMT", "2001-01-01T00:00:00Z", "2001-01-01 00:00 UTC", "Sat, 01 Jan 2000 00:00:00 GMT"} {
		if got := resetOf(s); !got.IsZero() {
			t.Errorf("%q: reset %v, want no moment", s, got)
		}
	}
	if got := resetOf("Thu, 20 Aug 2026 12:00:00 GMT"); !got.Equal(time.Date(2026, 8, 20, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("an HTTP date in range: %v", got)
	}
}
