package config

import (
	"strings"
	"testing"
)

// covers F2, F3, F4, F5, F6: settings that parse and run, but not as meant,
// word for word; doubts fail `bot check`, warnings do not.
func TestParse_Pitfalls(t *testing.T) {
	const prov = "providers:\n  openai: {base_url: https://api.openai.com/v1}\n  anthropic: {base_url: https://api.anthropic.com/v1/}\n" +
		"auth:\n  profiles:\n    openai:main: {provider: openai, key: \"${OPENAI_API_KEY}\"}\n    anthropic:main: {provider: anthropic, key: \"${ANTHROPIC_API_KEY}\"}\n"
	env := fakeEnv(map[string]string{"OPENAI_API_KEY": "sk-CANARY-pit-1", "ANTHROPIC_API_KEY": "sk-CANARY-pit-2"})
	for _, tc := range []struct {
		name, src       string
		doubts, warning string
	}{
		{"F4 primary repeated", prov + "agents:\n  defaults:\n    model:\n      primary: openai/gpt-4o-mini\n      fallbacks: [openai/gpt-4o-mini, anthropic/claude-haiku-4-5]\n",
			"c.yaml:12: agents.defaults.model.fallbacks[0]: openai/gpt-4o-mini is the primary model itself, so it is no fallback: when it fails, trying it again as a \"fallback\" fails the same way; name another model, ideally of another provider", ""},
		{"F4 fallback twice", prov + "agents:\n  defaults:\n    model:\n      primary: openai/gpt-4o-mini\n      fallbacks:\n        - anthropic/claude-haiku-4-5\n        - anthropic/claude-haiku-4-5\n",
			"c.yaml:14: agents.defaults.model.fallbacks[1]: anthropic/claude-haiku-4-5 is already agents.defaults.model.fallbacks[0]: a model is tried once per turn, so this entry adds nothing; remove it or name another model", ""},
		{"F5 no fallback", prov + "agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini}\n",
			"", "c.yaml:10: agents.defaults.model.fallbacks: none is configured: when openai/gpt-4o-mini fails, people get an error instead of another model's answer; add one, ideally of another provider (fallbacks: [provider/model])"},
		{"F6 endpoint in base_url", strings.Replace(prov, "https://api.openai.com/v1}", "https://api.openai.com/v1/chat/completions}", 1) + "agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini, fallbacks: [anthropic/claude-haiku-4-5]}\n",
			"c.yaml:2: providers.openai.base_url: ends in /chat/completions, which the bot adds itself: every call would go to .../chat/completions/chat/completions and fail (usually 404); set base_url: https://api.openai.com/v1", ""},
		{"F3 literal key", strings.Replace(prov, "\"${ANTHROPIC_API_KEY}\"", "sk-ant-CANARY-literal", 1) + "agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini, fallbacks: [anthropic/claude-haiku-4-5]}\n",
			"c.yaml:7: auth.profiles.anthropic:main.key: the secret is written in the file: whoever reads config.yaml (a backup, a repository, a screen share) has it; put it in the environment or in detour.env as ANTHROPIC_API_KEY=... and write ${ANTHROPIC_API_KEY} here", ""},
		{"F3 a local model server's key is no secret", "providers:\n  ollama: {base_url: http://127.0.0.1:11434/v1}\nauth:\n  profiles:\n    ollama:main: {provider: ollama, key: ollama}\n" +
			"agents:\n  defaults:\n    model: {primary: ollama/llama3, fallbacks: [ollama/mistral]}\n", "", ""},
		{"F2 dollar cap without prices", prov + "agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini, fallbacks: [anthropic/claude-haiku-4-5]}\n    budget: {max_turn_cost_usd: 0.5}\n",
			"c.yaml:11: agents.defaults.budget.max_turn_cost_usd: the cap of $0.5 per turn can never act: no model has a price, so every call counts as $0; add prices under models (models: {openai/gpt-4o-mini: {usd_per_mtok_in: 0.15, usd_per_mtok_out: 0.6}}), or cap calls instead (max_paid_attempts_per_turn, per_user_daily_paid_calls)", ""},
		{"F2 some prices", prov + "agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini, fallbacks: [anthropic/claude-haiku-4-5]}\nmodels:\n  openai/gpt-4o-mini: {usd_per_mtok_in: 0.15, usd_per_mtok_out: 0.6}\nlimits: {per_user_daily_usd: 2}\n",
			"", "c.yaml:13: limits.per_user_daily_usd: calls to anthropic/claude-haiku-4-5 count as $0 (no price under models), so the cap of $2 per user and day sees only part of the cost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("c.yaml", []byte(tc.src), env)
			if err != nil {
				t.Fatal(err)
			}
			var doubts, warnings []string
			for _, e := range cfg.Doubts {
				doubts = append(doubts, e.Error())
			}
			for _, e := range cfg.Warnings {
				warnings = append(warnings, e.Error())
			}
			if got := strings.Join(doubts, "\n"); got != tc.doubts {
				t.Errorf("doubts\n%s\nwant\n%s", got, tc.doubts)
			}
			if got := strings.Join(warnings, "\n"); got != tc.warning {
				t.Errorf("warnings\n%s\nwant\n%s", got, tc.warning)
			}
			if strings.Contains(strings.Join(append(doubts, warnings...), ""), "CANARY") {
				t.Error("P4: a secret is quoted")
			}
		})
	}
}

// covers F6: the endpoint part of a base_url is cut off, the rest is kept.
func TestTrimEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.openai.com/v1/chat/completions":      "https://api.openai.com/v1",
		"https://api.openai.com/v1/chat/completions/":     "https://api.openai.com/v1",
		"http://127.0.0.1:8089/openai/v1/completions":     "http://127.0.0.1:8089/openai/v1",
		"https://openrouter.ai/api/v1/chat/completions?x": "https://openrouter.ai/api/v1?x",
	} {
		if got, ok := TrimEndpoint(in); !ok || got != want {
			t.Errorf("TrimEndpoint(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got, ok := TrimEndpoint("https://api.openai.com/v1"); ok || got != "https://api.openai.com/v1" {
		t.Errorf("a good base_url changed: %q %v", got, ok)
	}
}

// covers F7: an unclosed quote is reported as one, on its own line, wherever
// it stands (a flow mapping would otherwise look unclosed); a quoted value that
// YAML lets span lines is not mistaken for one.
func TestParse_F7_UnclosedQuote(t *testing.T) {
	const rest = "agents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini}\n"
	for _, tc := range []struct{ name, src, want string }{
		{"in a flow mapping", "providers:\n  openai: {base_url: \"https://api.openai.com/v1}\n" + rest,
			"c.yaml:2: a value opened with \" on this line is never closed: add the closing \" at the end of the value (or remove the opening one)"},
		{"a block value", "providers:\n  openai:\n    base_url: 'https://api.openai.com/v1\n" + rest,
			"c.yaml:3: a value opened with ' on this line is never closed: add the closing ' at the end of the value (or remove the opening one)"},
		{"a secret", "providers:\n  openai: {base_url: https://api.openai.com/v1}\nauth:\n  profiles:\n    openai:main: {provider: openai, key: \"${OPENAI_API_KEY}}\n" + rest,
			"c.yaml:5: a value opened with \" on this line is never closed: add the closing \" at the end of the value (or remove the opening one)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.src), fakeEnv(map[string]string{"OPENAI_API_KEY": "sk-CANARY-q"}))
			if err == nil || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
	// Quotes inside plain text, and a quoted value over two lines, are fine.
	ok := "providers:\n  openai: {base_url: https://api.openai.com/v1}\nagents:\n  defaults:\n    model: {primary: openai/gpt-4o-mini}\n" +
		"    system_prompt: \"You are terse and\n      helpful\"\n"
	if _, err := Parse("c.yaml", []byte(ok), nil); err != nil {
		t.Errorf("a two-line quoted value: %v", err)
	}
	if q, open := openQuote("system_prompt: it's fine, isn't it"); open {
		t.Errorf("an apostrophe in plain text taken for a quote %c", q)
	}
}

// covers T9: access.channel_model is admins unless set to everyone.
func TestParse_T9_ChannelModel(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(base), nil)
	if err != nil || cfg.Access.ChannelModel != "admins" {
		t.Fatalf("default: %v %q", err, cfg.Access.ChannelModel)
	}
	cfg, err = Parse("c.yaml", []byte("access: {channel_model: everyone}\n"+base), nil)
	if err != nil || cfg.Access.ChannelModel != "everyone" {
		t.Fatalf("everyone: %v %+v", err, cfg.Access)
	}
	_, err = Parse("c.yaml", []byte("access: {channel_model: anyone}\n"+base), nil)
	if err == nil || err.Error() != `c.yaml:1: access.channel_model: bad value "anyone": want admins or everyone` {
		t.Fatalf("bad value: %v", err)
	}
}
