package config

import (
	"strings"
	"testing"
)

// covers I2, I5, H2, R16: the keys of files, images, thread context and
// compaction parse with their defaults and are validated.
func TestParse_ConversationKeys(t *testing.T) {
	base := "providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents:\n  defaults:\n    model: {primary: o/m, fallbacks: [o/v], image_fallbacks: [o/eye]}\n"
	ok := base + "    thread_context: {max_messages: 12}\n    compaction: {summary: false, summary_max_tokens: 200, target_ratio: 0.4}\n" +
		"models:\n  o/v: {input: [text, image]}\n  o/eye: {input: [image, text]}\n  o/m: {input: [text]}\n" +
		"limits: {max_file_bytes: 1000, max_files: 2, max_text_file_bytes: 10}\n"
	cfg, err := Parse("c.yaml", []byte(ok), nil)
	if err != nil {
		t.Fatal(err)
	}
	df := cfg.Agents.Defaults
	if df.ThreadContext.MaxMessages != 12 || df.Compaction.Summary || df.Compaction.SummaryMaxTokens != 200 || df.Compaction.TargetRatio != 0.4 {
		t.Fatalf("thread context %+v, compaction %+v", df.ThreadContext, df.Compaction)
	}
	if len(df.Model.ImageFallbacks) != 1 || df.Model.ImageFallbacks[0] != "o/eye" {
		t.Fatalf("image fallbacks %v", df.Model.ImageFallbacks)
	}
	if !cfg.Models["o/v"].TakesImages() || cfg.Models["o/m"].TakesImages() {
		t.Fatalf("inputs: %+v", cfg.Models)
	}
	if l := cfg.Limits; l.MaxFileBytes != 1000 || l.MaxFiles != 2 || l.MaxTextFileBytes != 10 {
		t.Fatalf("limits %+v", l)
	}

	// Defaults: text only, 20 earlier messages, summaries of 400 tokens.
	cfg, err = Parse("c.yaml", []byte("providers:\n  o: {base_url: http://127.0.0.1:1/v1}\nagents: {defaults: {model: {primary: o/m}}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if df := cfg.Agents.Defaults; df.ThreadContext.MaxMessages != 20 || !df.Compaction.Summary || df.Compaction.SummaryMaxTokens != 400 || df.Compaction.TargetRatio != 0.5 || cfg.Models["o/m"].TakesImages() {
		t.Fatalf("defaults: %+v %+v", df.ThreadContext, df.Compaction)
	}

	bad := []struct{ yaml, want string }{
		{base + "    compaction: {target_ratio: 0.95}\n", "target_ratio"},
		{base + "models:\n  o/v: {input: [text, video]}\n  o/eye: {input: [text, image]}\n", "models.o/v.input[1]: unknown input \"video\": want text or image"},
		{base + "models:\n  o/v: {input: [image]}\n  o/eye: {input: [text, image]}\n", "models.o/v.input: must include text"},
		{base + "models:\n  o/v: {input: [text, image]}\n", "agents.defaults.model.image_fallbacks[0]: o/eye does not take images"},
		{strings.Replace(base, "o/eye", "x/eye", 1), "agents.defaults.model.image_fallbacks[0]: model \"x/eye\" uses provider \"x\""},
		{base + "models:\n  o/eye: {input: [text, image]}\nlimits: {max_file_bytes: 0}\n", "limits.max_file_bytes: bad number 0"},
	}
	for _, tt := range bad {
		if _, err := Parse("c.yaml", []byte(tt.yaml), nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("got %v, want %q", err, tt.want)
		}
	}
}
