package llm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/failover"
	"github.com/detourbot/detour/internal/fakeprovider"
)

// sentURLs records the path and query of every request that leaves a client.
type sentURLs struct {
	mu   sync.Mutex
	base http.RoundTripper
	urls []string // escaped path, "?", raw query
}

func (s *sentURLs) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.urls = append(s.urls, r.URL.EscapedPath()+"?"+r.URL.RawQuery)
	s.mu.Unlock()
	return s.base.RoundTrip(r)
}

func (s *sentURLs) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.urls
	s.urls = nil
	return out
}

// covers M5 (issue 37): an Azure deployment name, configured or a model a
// person chose through an allow pattern (it reaches the client as
// Request.Model), goes into the path as one segment that passes
// ValidDeployment; any other name is refused before a request is sent, so no
// key goes to a path or a query the name altered. Chat and Check alike.
func TestAzure_M5_DeploymentNamesCannotAlterThePathOrTheQuery(t *testing.T) {
	fake := fakeprovider.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	sent := &sentURLs{base: http.DefaultTransport}
	cfg := Config{Provider: "az", API: APIAzure, BaseURL: fake.BaseURLFor("az", fakeprovider.APIAzure),
		APIVersion: "2024-10-21", ProfileID: "az:main", APIKey: canary,
		Deployments: map[string]string{"gpt-test": testDeployment},
		HTTPClient:  &http.Client{Transport: sent}}
	r := clientRig(t, &rig{fake: fake}, cfg, 3*time.Second, fake.Close)
	ctx := context.Background()
	const query = "?api-version=2024-10-21"

	for model, dep := range map[string]string{
		"gpt-test":        testDeployment,    // configured
		"gpt-4o.mini_2-x": "gpt-4o.mini_2-x", // its own deployment (an allow pattern)
	} {
		want := "/az/openai/deployments/" + dep + "/chat/completions" + query
		if _, err := r.client.Chat(ctx, userReq(model, "hello"), nil); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		if _, err := r.client.Check(ctx, model); err != nil {
			t.Fatalf("check %s: %v", model, err)
		}
		if got := sent.take(); len(got) != 2 || got[0] != want || got[1] != want {
			t.Errorf("%s: requests went to %q, want %q twice", model, got, want)
		}
	}
	deps := map[string]int{}
	for _, c := range fake.Calls() {
		deps[c.Deployment]++
	}
	if deps[testDeployment] != 2 || deps["gpt-4o.mini_2-x"] != 2 || len(deps) != 2 {
		t.Fatalf("the fake saw the deployments %v", deps)
	}

	for _, model := range []string{
		"x?api-version=evil&",
		"../../b/v1/chat/completions?x=",
		"x/../../y",
		"..", ".", "", "x y", "x#f", "x%2F..", "x\r\nHost: evil", "déploiement",
		strings.Repeat("a", 65),
	} {
		_, chatErr := r.client.Chat(ctx, userReq(model, "hello"), nil)
		_, checkErr := r.client.Check(ctx, model)
		for _, err := range []error{chatErr, checkErr} {
			var f *failover.Failure
			if !errors.As(err, &f) || f.Reason != classify.ReasonModelNotFound || f.Class != classify.ClassDeterministic ||
				!strings.Contains(f.Message, "bad Azure deployment name") || f.Model != model || f.Profile != "az:main" {
				t.Errorf("%q: %v, want a model_not_found failure naming the deployment rule", model, err)
			}
		}
		if got := sent.take(); len(got) != 0 {
			t.Errorf("%q: requests were sent: %q", model, got)
		}
	}
	if n := len(fake.Calls()); n != 4 {
		t.Errorf("the fake saw %d calls, want the 4 of the good names", n)
	}
	if strings.Contains(r.logs.String(), "CANARY") {
		t.Error("T8: the key is in the logs")
	}

	// A configured deployment is held to the same rule: no client is made.
	for _, dep := range []string{"x?api-version=evil&", "../b", "a/b"} {
		bad := cfg
		bad.Deployments = map[string]string{"m": dep}
		if _, err := New(bad); err == nil || !strings.Contains(err.Error(), "bad Azure deployment name") {
			t.Errorf("deployment %q: New gave %v", dep, err)
		}
	}
}

// covers M5 (issue 37): the rule is Azure's (letters, digits, '.', '_', '-';
// here also a letter or digit first and at most 64, as config checked before).
func TestValidDeployment_M5(t *testing.T) {
	for _, ok := range []string{"a", "gpt-4o", "Dep_1.2-x", "0", strings.Repeat("a", 64)} {
		if err := ValidDeployment(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "-a", "_a", ".a", "a/b", "a?b", "a&b=c", "a%2F", "a b", "a\n", "ä", strings.Repeat("a", 65)} {
		if err := ValidDeployment(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
