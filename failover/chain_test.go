package failover

import (
	"reflect"
	"testing"
)

func TestBuildChain_S1_S5_K1_K5(t *testing.T) {
	const (
		p  ModelRef = "openai/gpt-4o"
		f1 ModelRef = "anthropic/claude-haiku"
		f2 ModelRef = "openrouter/meta-llama/llama-3-70b"
		x  ModelRef = "ollama/qwen"
	)
	cfg := []ModelRef{f1, f2}
	tests := []struct {
		name string
		in   ChainInput
		want []ModelRef
	}{
		{"S1 default uses configured fallbacks", ChainInput{Requested: p, Source: SourceDefault, Primary: p, Configured: cfg}, []ModelRef{p, f1, f2}},
		{"S1 empty requested means primary", ChainInput{Source: SourceDefault, Primary: p, Configured: cfg}, []ModelRef{p, f1, f2}},
		{"S2 agent primary strict", ChainInput{Requested: x, Source: SourceAgent, Primary: p, Configured: cfg}, []ModelRef{x}},
		{"S2 agent with own fallbacks", ChainInput{Requested: x, Source: SourceAgent, Primary: p, Configured: cfg, Override: []ModelRef{f2}}, []ModelRef{x, f2}},
		{"S2 agent fallbacks [] strict", ChainInput{Requested: x, Source: SourceAgent, Primary: p, Configured: cfg, Override: []ModelRef{}}, []ModelRef{x}},
		{"S3/K3 auto on first fallback keeps rest and primary", ChainInput{Requested: f1, Source: SourceAuto, Primary: p, Configured: cfg}, []ModelRef{f1, f2, p}},
		{"S3/K3 auto on last fallback lands on primary (K4)", ChainInput{Requested: f2, Source: SourceAuto, Primary: p, Configured: cfg}, []ModelRef{f2, p}},
		{"S4 user override strict", ChainInput{Requested: x, Source: SourceUser, Primary: p, Configured: cfg}, []ModelRef{x}},
		{"S4 user override ignores override list", ChainInput{Requested: x, Source: SourceUser, Primary: p, Configured: cfg, Override: []ModelRef{f1}}, []ModelRef{x}},
		{"S5 legacy is user", ChainInput{Requested: x, Source: SourceLegacy, Primary: p, Configured: cfg}, []ModelRef{x}},
		{"S5 empty source on a non-primary model is legacy", ChainInput{Requested: x, Primary: p, Configured: cfg}, []ModelRef{x}},
		{"K1 requested first, K4 primary appended", ChainInput{Requested: x, Source: SourceAuto, Primary: p, Configured: cfg}, []ModelRef{x, f1, f2, p}},
		{"K2 explicit fallbacks deduplicated, not filtered", ChainInput{Requested: p, Source: SourceDefault, Primary: p, Override: []ModelRef{f1, f1, p, "weird/unlisted"}}, []ModelRef{p, f1, "weird/unlisted"}},
		{"K2 configured deduplicated", ChainInput{Requested: p, Source: SourceDefault, Primary: p, Configured: []ModelRef{f1, f1, p, f2}}, []ModelRef{p, f1, f2}},
		{"K5 override: requested + list only, no primary", ChainInput{Requested: x, Source: SourceAuto, Primary: p, Configured: cfg, Override: []ModelRef{f2}}, []ModelRef{x, f2}},
		{"K5 empty override disables fallback", ChainInput{Requested: p, Source: SourceDefault, Primary: p, Configured: cfg, Override: []ModelRef{}}, []ModelRef{p}},
		{"cron uses configured fallbacks", ChainInput{Requested: x, Source: SourceCron, Primary: p, Configured: cfg}, []ModelRef{x, f1, f2, p}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := BuildChain(tc.in)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("BuildChain = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestModelRefSplit_FirstSlash(t *testing.T) {
	prov, model := ModelRef("openrouter/meta-llama/llama-3-70b").Split()
	if prov != "openrouter" || model != "meta-llama/llama-3-70b" {
		t.Fatalf("Split = %q %q", prov, model)
	}
}
