package fakeprovider

// Gemini's OpenAI-compatible endpoint
// (https://ai.google.dev/gemini-api/docs/openai): POST
// /v1beta/openai/chat/completions with the key as Authorization: Bearer, and
// OpenAI's chunks when it answers. When it fails it does not answer in
// OpenAI's shape but with Google's error envelope inside a JSON list:
//
//	[{
//	  "error": {"code": 429, "message": "...", "status": "RESOURCE_EXHAUSTED"}
//	}
//	]
//
// with Google's canonical status strings (RESOURCE_EXHAUSTED, UNAVAILABLE,
// INVALID_ARGUMENT, PERMISSION_DENIED, NOT_FOUND, INTERNAL) and details
// (RetryInfo, ErrorInfo) as Google's APIs send them
// (https://ai.google.dev/gemini-api/docs/troubleshooting).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// writeGoogleError writes Google's envelope as the compatible endpoint does: a
// list of one, pretty-printed, with a newline before the closing bracket.
func writeGoogleError(w http.ResponseWriter, status int, gstatus, msg string, details []any) int {
	e := map[string]any{"code": status, "message": msg, "status": gstatus}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.MarshalIndent(map[string]any{"error": e}, "", "  ")
	return writeRaw(w, status, "application/json; charset=UTF-8", "["+string(b)+"\n]\n")
}

// errorInfo is a google.rpc.ErrorInfo detail.
func errorInfo(reason string) map[string]any {
	return map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com",
		"metadata": map[string]string{"service": "generativelanguage.googleapis.com"}}
}

// refuseGemini: the endpoint takes the key only as a bearer token; without one
// Google refuses the caller as unregistered.
func refuseGemini(w http.ResponseWriter, r *http.Request) (Mode, int) {
	if _, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && bearerKey(r) != "" {
		return "", 0
	}
	return ModeUnauthorized401, writeGoogleError(w, http.StatusForbidden, "PERMISSION_DENIED",
		"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", nil)
}

// geminiFailure answers the error modes as Gemini does.
func (a *answer) geminiFailure(mode Mode) (status int, ok bool) {
	w := a.w
	switch mode {
	case ModeRateLimit:
		secs := retrySeconds(a.rateWait())
		retry := map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": fmt.Sprintf("%ds", secs)}
		return writeGoogleError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
			fmt.Sprintf("Resource has been exhausted (e.g. check quota). Please retry in %ds.", secs), []any{retry}), true
	case ModeInsufficientQuota:
		return writeGoogleError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
			"Your prepayment credits are depleted. Please go to AI Studio at https://ai.studio/projects to manage your project and billing.", nil), true
	case ModeBilling402:
		return writeGoogleError(w, http.StatusForbidden, "PERMISSION_DENIED",
			"This API method requires billing to be enabled. Please enable billing on project #1234567890 by visiting https://console.developers.google.com/billing/enable?project=1234567890 then retry.",
			[]any{errorInfo("BILLING_DISABLED")}), true
	case ModeUnauthorized401:
		// Google answers a bad key with 400, not 401.
		return writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
			[]any{errorInfo("API_KEY_INVALID")}), true
	case ModeRevoked403:
		return writeGoogleError(w, http.StatusForbidden, "PERMISSION_DENIED",
			fmt.Sprintf("Permission denied: Consumer 'api_key:%s' has been suspended.", maskKey(a.key)), nil), true
	case ModeModelNotFound404:
		return writeGoogleError(w, http.StatusNotFound, "NOT_FOUND",
			fmt.Sprintf("models/%s is not found for API version v1main, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.", a.req.Model), nil), true
	case ModeContextOverflow400:
		return writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT",
			fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (1048576).", 1048576+a.req.promptChars()), nil), true
	case ModeFormat400:
		return writeGoogleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", `Invalid value at 'messages[0].role' (TYPE_ENUM), "robot"`, nil), true
	case ModeServer500:
		return writeGoogleError(w, http.StatusInternalServerError, "INTERNAL", geminiInternal, nil), true
	case ModeOverloaded529:
		// Gemini says it is busy with 503 UNAVAILABLE.
		return writeGoogleError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil), true
	case ModeQuotaResetText:
		return writeGoogleError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", a.quotaText(), nil), true
	}
	return a.openaiFailure(mode) // the proxy-level ones: 502 HTML, 503 text
}

const geminiInternal = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"

// geminiStreamError is the error event the endpoint sends inside a stream: an
// OpenAI-style data line holding Google's error object.
func geminiStreamError() []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 500, "message": geminiInternal, "status": "INTERNAL"}})
	return b
}
