package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/fakeprovider"
)

// covers I1: an image reaches the model in every protocol's own shape
// (go-openai's multi-part content, Anthropic's image block), and the fake's
// answer proves the bytes arrived unchanged.
func TestKinds_I1_ImagesReachTheModel(t *testing.T) {
	png, err := os.ReadFile("testdata/red.png")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(png)
	digest := hex.EncodeToString(sum[:])
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, 5*time.Second)
			req := Request{Model: "gpt-test", Messages: []Message{
				{Role: "system", Content: "be brief"},
				{Role: "user", Content: "what is this?", Images: []Image{{MIME: "image/png", Data: png}}},
			}}
			out, err := r.client.Chat(context.Background(), req, nil)
			if err != nil {
				t.Fatalf("chat: %v", err)
			}
			if want := "[saw image 1: image/png, " + strconv.Itoa(len(png)) + " bytes, sha256 " + digest[:8] + "]"; !strings.Contains(out.Text, want) {
				t.Fatalf("answer %q does not prove the image arrived (%s)", out.Text, want)
			}
			c := r.fake.Calls()[0]
			last := c.Messages[len(c.Messages)-1]
			if last.Text != "what is this?" || len(last.Images) != 1 || last.Images[0].SHA256 != digest {
				t.Fatalf("the fake logged %+v", last)
			}
		})
	}
}

// covers I5: a model without vision refuses an image as the protocol does,
// a deterministic 400 (so the chain must never send one there).
func TestKinds_I5_TextOnlyModelRefusesImages(t *testing.T) {
	png, _ := os.ReadFile("testdata/red.png")
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, 5*time.Second)
			r.fake.TextOnly("gpt-test")
			req := Request{Model: "gpt-test", Messages: []Message{{Role: "user", Content: "look", Images: []Image{{MIME: "image/png", Data: png}}}}}
			_, err := r.client.Chat(context.Background(), req, nil)
			if f := asFailure(t, err); f.Class != classify.ClassDeterministic || f.Status != 400 {
				t.Fatalf("want a deterministic 400 failure, got %+v", f)
			}
			// Text still works.
			if _, err := r.client.Chat(context.Background(), userReq("gpt-test", "hello"), nil); err != nil {
				t.Fatalf("text: %v", err)
			}
		})
	}
}

// covers I1: the fake holds images to the protocols' rules: a PNG declared as
// JPEG is refused by Anthropic's media-type check and OpenAI's format check.
func TestKinds_I1_MislabelledImageRefused(t *testing.T) {
	png, _ := os.ReadFile("testdata/red.png")
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, 5*time.Second)
			req := Request{Model: "gpt-test", Messages: []Message{{Role: "user", Content: "look", Images: []Image{{MIME: "image/jpeg", Data: png}}}}}
			_, err := r.client.Chat(context.Background(), req, nil)
			if f := asFailure(t, err); f.Status != 400 {
				t.Fatalf("want a 400, got %+v", f)
			}
		})
	}
}

// covers U1: a provider that reports no usage leaves the tokens at zero for the
// caller to estimate.
func TestKinds_U1_NoUsage(t *testing.T) {
	for _, k := range kinds {
		t.Run(string(k.api), func(t *testing.T) {
			r := newKindRig(t, k, 5*time.Second, fakeprovider.Rule{NoUsage: true})
			out, err := r.client.Chat(context.Background(), userReq("gpt-test", "hello"), nil)
			if err != nil || out.InputTokens != 0 || out.OutputTokens != 0 {
				t.Fatalf("out %+v err %v, want no tokens", out, err)
			}
			if c := finished(t, r.fake)[0]; c.Usage != nil {
				t.Fatalf("the fake logged usage %+v for a NoUsage call", c.Usage)
			}
			r.fake.Reset()
			out, err = r.client.Chat(context.Background(), userReq("gpt-test", "hello"), nil)
			c := finished(t, r.fake)[0]
			if err != nil || c.Usage == nil || out.InputTokens != c.Usage.PromptTokens || out.OutputTokens != c.Usage.CompletionTokens {
				t.Fatalf("reported usage %+v, client read %+v (%v)", c.Usage, out, err)
			}
		})
	}
}

// finished waits until every call the fake logged has ended (its handler
// writes the call's usage after the client has read the answer).
func finished(t *testing.T, f *fakeprovider.Server) []fakeprovider.Call {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		calls := f.Calls()
		done := len(calls) > 0
		for _, c := range calls {
			done = done && c.Duration > 0
		}
		if done {
			return calls
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls did not finish: %+v", calls)
		}
		time.Sleep(time.Millisecond)
	}
}
