package fakeprovider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/detourbot/detour/internal/suggest"
)

// A "#fail:" marker that does nothing would leave a person in the demo guessing,
// so the fake says why in its answer, where the chat shows it: a mode it does
// not know (named, with the valid ones), or a marker that reached a model the
// markers do not act on, without the primary having been tried this turn.

// markerMemory is how long the fake remembers that a marker acted on a prompt:
// the fallback attempts of that same turn follow within the run timeout.
const markerMemory = 30 * time.Minute

// maxActed bounds the prompts remembered.
const maxActed = 4096

// promptKey identifies one request's conversation (every message's role and
// text), so the fallback attempts of a turn match the primary attempt that
// failed on the marker, whatever protocol each speaks (a string in one, text
// blocks in another).
func promptKey(req *chatRequest) string {
	h := sha256.New()
	for _, m := range req.Messages {
		t := m.text()
		fmt.Fprintf(h, "%s\x00%d\x00", m.Role, len(t))
		h.Write([]byte(t))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// rememberActed records that a marker made the call on this prompt fail.
func (s *Server) rememberActed(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.acted == nil {
		s.acted = map[string]time.Time{}
	}
	if len(s.acted) >= maxActed {
		for k, at := range s.acted {
			if now.Sub(at) > markerMemory || len(s.acted) >= maxActed {
				delete(s.acted, k)
			}
		}
	}
	s.acted[key] = now
}

// actedOn reports whether a marker acted on this prompt recently.
func (s *Server) actedOn(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.acted[key]
	return ok && s.now().Sub(at) <= markerMemory
}

// unknownModeNote is the answer's note for "#fail:<raw>" when raw is no mode.
func unknownModeNote(raw string) string {
	names := make([]string, len(AllModes))
	for i, m := range AllModes {
		names[i] = string(m)
	}
	var b strings.Builder
	if raw == "" {
		b.WriteString("(fake provider) #fail: needs a failure mode after the colon, so nothing failed.")
	} else {
		fmt.Fprintf(&b, "(fake provider) unknown failure mode %q in #fail:%s, so nothing failed.", raw, raw)
		if s, ok := suggest.Closest(raw, names); ok {
			fmt.Fprintf(&b, " Did you mean #fail:%s?", s)
		}
	}
	fmt.Fprintf(&b, " Valid modes: %s.", strings.Join(names, ", "))
	return b.String()
}

// notPrimaryNote is the answer's note for a valid marker that reached provider/model,
// a model markers do not act on, in a turn that did not try the primary.
func (s *Server) notPrimaryNote(m Mode, provider, model string) string {
	p := s.primaries()
	if len(p) == 0 {
		// No model here has "primary" in its name (a copy of a real
		// configuration): saying the conversation is on a fallback would mislead.
		return fmt.Sprintf("(fake provider) #fail:%s was not applied: markers act only on models whose name contains \"primary\", "+
			"and no model this fake has served has one (this call went to %s/%s). To make a model fail, script a rule for it "+
			"(POST /_fake/script, or --script) or give it \"honour_markers\": true.", m, provider, model)
	}
	back := "/recover " + strings.Join(p, " or /recover ")
	return fmt.Sprintf("(fake provider) #fail:%s was not applied: markers act only on models whose name contains \"primary\", "+
		"and this turn went straight to %s/%s (the conversation is on a fallback, or the primary is cooling down). "+
		"To go back to the primary: /model default, /reset, or %s.", m, provider, model, back)
}

// primaries lists the provider/model names containing "primary" that the fake
// knows: from its catalogue, else from the calls it has seen.
func (s *Server) primaries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	add := func(provider, model string) {
		if provider == "" || !strings.Contains(model, "primary") {
			return
		}
		if ref := provider + "/" + model; !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	for _, p := range sortedKeys(s.models) {
		for _, m := range s.models[p] {
			add(p, m)
		}
	}
	if len(out) == 0 {
		for _, c := range s.calls {
			add(c.Provider, c.Model)
		}
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
