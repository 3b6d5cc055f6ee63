package fakeprovider

// Azure OpenAI (https://learn.microsoft.com/azure/ai-services/openai/reference):
// POST {endpoint}/openai/deployments/{deployment}/chat/completions
// ?api-version=YYYY-MM-DD[-preview], the key in the api-key header (an
// Authorization header carries a Microsoft Entra token, never a key). It answers
// with OpenAI's chunks, and fails with {"error": {"code", "message"}} in its own
// words: codes as strings ("401", "429", "DeploymentNotFound").

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
)

// azureVersion is the form of an api-version: a date, maybe "-preview".
var azureVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)

// writeAzureError writes Azure's error body.
func writeAzureError(w http.ResponseWriter, status int, headers map[string]string, code, msg string) int {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return writeRaw(w, status, "application/json", string(b))
}

// refuseAzure: without a valid api-version the route does not exist; without
// the api-key header the request is not authenticated (a bearer token is read
// as an Entra token, which an API key is not).
func refuseAzure(w http.ResponseWriter, r *http.Request) (Mode, int) {
	if v := r.URL.Query().Get("api-version"); !azureVersion.MatchString(v) {
		return ModeFormat400, writeAzureError(w, http.StatusNotFound, nil, "404", "Resource not found")
	}
	if r.Header.Get("api-key") != "" {
		return "", 0
	}
	if r.Header.Get("Authorization") != "" {
		return ModeUnauthorized401, writeAzureError(w, http.StatusUnauthorized, nil, "401",
			"Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired.")
	}
	return ModeUnauthorized401, writeAzureError(w, http.StatusUnauthorized, nil, "401",
		"Access denied due to missing subscription key. Make sure to include subscription key when making requests to an API.")
}

// azureErrors are Azure's fixed answers where its words differ from OpenAI's.
var azureErrors = map[Mode]protoError{
	ModeUnauthorized401:  {http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."},
	ModeModelNotFound404: {http.StatusNotFound, "DeploymentNotFound", "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."},
	ModeServer500:        {http.StatusInternalServerError, "InternalServerError", "The server had an error processing your request. Sorry about that! You can retry your request, or contact us through an Azure support request at: https://go.microsoft.com/fwlink/?linkid=2213926 if you keep seeing this error."},
	// Azure says it is busy with 503, never 529.
	ModeOverloaded529: {http.StatusServiceUnavailable, "ServiceUnavailable", "The service is temporarily unable to process your request. Please try again later."},
}

// azureFailure answers the modes where Azure's words differ from OpenAI's;
// ok is false for the others, which Azure passes on in OpenAI's shape.
func (a *answer) azureFailure(mode Mode) (status int, ok bool) {
	w := a.w
	if mode == ModeRateLimit {
		wait := a.rateWait()
		h := openaiWaitHeaders(wait, map[string]string{
			"x-ratelimit-remaining-requests": "0",
			"x-ratelimit-remaining-tokens":   "0",
		})
		msg := fmt.Sprintf("Requests to the ChatCompletions_Create Operation under Azure OpenAI API version %s have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after %d seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.",
			a.r.URL.Query().Get("api-version"), retrySeconds(wait))
		return writeAzureError(w, http.StatusTooManyRequests, h, "429", msg), true
	}
	if e, ok := azureErrors[mode]; ok {
		return writeAzureError(w, e.status, nil, e.code, e.msg), true
	}
	return 0, false
}
