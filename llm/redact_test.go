package llm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/testkit/syncbuf"
)

// covers P4: classify returns the provider's message unredacted (it knows no
// key); the client hides its own key and every secret-shaped token before the
// message reaches the Failure, the logs or anything built on them.
func TestChat_P4_ClassifiedMessageRedacted(t *testing.T) {
	other := []string{"sk-ant-api03-CANARYxyz0123456789abcdef", "AIzaSyCANARY0123456789abcdefghijklmnopq", "CANARYtoken0123456789abcdef0123456789"}
	bodies := []string{
		`{"error":{"message":"Incorrect API key provided: ` + canary + `. You can find your API key at https://platform.openai.com/account/api-keys.","code":"invalid_api_key"}}`,
		`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key ` + other[0] + `"}}`,
		`{"error":{"code":400,"message":"API key not valid: https://generativelanguage.googleapis.com/v1/models?key=` + other[1] + `","status":"INVALID_ARGUMENT"}}`,
		`{"error":{"message":"Authorization: Bearer ` + other[2] + ` was rejected"}}`,
	}
	for i, body := range bodies {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, body)
		}))
		r := &rig{logs: &syncbuf.Buffer{}}
		c := r.newClient(t, srv.URL+"/v1", time.Second, nil)
		var raw classify.Verdict
		c.classify = func(resp classify.Response, now time.Time) classify.Verdict {
			raw = classify.Classify(resp, now)
			// classify keeps the provider's words; put the key back to prove the
			// client redacts what classify returns, not only what it sends in.
			raw.Message += " " + canary
			return raw
		}
		_, err := c.Chat(context.Background(), userReq("m", "x"), nil)
		f := asFailure(t, err)
		dump := fmt.Sprintf("%v %+v", err, *f) + r.logs.String()
		for _, s := range append(other, canary) {
			if strings.Contains(dump, s) {
				t.Errorf("body %d: secret %q leaked: %s", i, s, dump)
			}
		}
		if !strings.Contains(f.Message, "[redacted]") || len([]rune(f.Message)) > previewRunes {
			t.Errorf("body %d: message %q not redacted or too long", i, f.Message)
		}
		if raw.Reason != classify.ReasonAuth && raw.Reason != classify.ReasonFormat {
			t.Errorf("body %d: classified %s", i, raw.Reason)
		}
		c.CloseIdleConnections()
		srv.Close()
	}
}
