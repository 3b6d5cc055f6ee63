package config

import (
	"strings"
	"testing"
)

// Every provider kind parses: api defaults to openai, anthropic and gemini get
// their service's base URL, azure keeps its api_version and its deployments.
func TestParse_ProviderKinds(t *testing.T) {
	cfg, err := parseFile(t, "kinds.yaml", map[string]string{"ANTHROPIC_API_KEY": "sk-ant-CANARY", "AZURE_OPENAI_API_KEY": "az-CANARY",
		"GEMINI_API_KEY": "AIza-CANARY", "OPENAI_API_KEY": "sk-CANARY"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Provider{
		"claude": {ID: "claude", API: APIAnthropic, BaseURL: "https://api.anthropic.com/v1"},
		"azure":  {ID: "azure", API: APIAzure, BaseURL: "https://example-resource.openai.azure.com", APIVersion: "2024-10-21"},
		"gemini": {ID: "gemini", API: APIGemini, BaseURL: "https://generativelanguage.googleapis.com/v1beta/openai"},
		"openai": {ID: "openai", API: APIOpenAI, BaseURL: "https://api.openai.com/v1"},
	}
	for id, w := range want {
		if got := cfg.Providers[id]; got != w {
			t.Errorf("%s: %+v, want %+v", id, got, w)
		}
	}
	if d := cfg.Deployments("azure"); len(d) != 1 || d["gpt-4o"] != "prod-gpt-4o" {
		t.Errorf("deployments %v", d)
	}
	if d := cfg.Deployments("openai"); len(d) != 0 {
		t.Errorf("openai deployments %v", d)
	}
}

// Each kind's keys are checked, and every error names the file, the line and
// the key.
func TestParse_ProviderKindErrors(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"providers:\n  p: {api: bedrock, base_url: http://x}\nagents: {defaults: {model: {primary: p/m}}}\n",
			`c.yaml:2: providers.p.api: unknown api "bedrock": want openai, azure, anthropic or gemini`},
		{"providers:\n  p: {api: azure, base_url: https://r.openai.azure.com}\nagents: {defaults: {model: {primary: p/m}}}\n",
			"c.yaml:2: providers.p.api_version: is required for api: azure"},
		{"providers:\n  p:\n    api: azure\n    base_url: https://r.openai.azure.com\n    api_version: latest\nagents: {defaults: {model: {primary: p/m}}}\n",
			`c.yaml:5: providers.p.api_version: bad api-version "latest": want a date such as 2024-10-21`},
		{"providers:\n  p:\n    api: azure\n    base_url: https://r.openai.azure.com/openai/deployments/gpt4\n    api_version: 2024-10-21\nagents: {defaults: {model: {primary: p/m}}}\n",
			"c.yaml:4: providers.p.base_url: give the resource endpoint only"},
		{"providers:\n  p: {api: azure}\nagents: {defaults: {model: {primary: p/m}}}\n",
			"c.yaml:2: providers.p.base_url: is required"},
		{"providers:\n  p:\n    base_url: http://x\n    api_version: 2024-10-21\nagents: {defaults: {model: {primary: p/m}}}\n",
			"c.yaml:4: providers.p.api_version: applies to api: azure (its api-version) and api: anthropic (its anthropic-version), not to api: openai"},
		{"providers:\n  p:\n    api: anthropic\n    api_version: v1\nagents: {defaults: {model: {primary: p/m}}}\n",
			`c.yaml:4: providers.p.api_version: bad anthropic-version "v1"`},
		{"providers:\n  p:\n    api: anthropic\n    base_url: https://api.anthropic.com/v1/messages\nagents: {defaults: {model: {primary: p/m}}}\n",
			"c.yaml:4: providers.p.base_url: give the API's base, e.g. https://api.anthropic.com/v1"},
		{"providers:\n  p: {base_url: http://x}\nagents: {defaults: {model: {primary: p/m}}}\nmodels:\n  p/m: {deployment: d1}\n",
			`c.yaml:5: models.p/m.deployment: only a model of an azure provider has a deployment, and provider "p" speaks openai`},
		{"providers:\n  p: {api: azure, base_url: https://r.openai.azure.com, api_version: 2024-10-21}\nagents: {defaults: {model: {primary: p/m}}}\nmodels:\n  p/m: {deployment: 'a/b'}\n",
			`c.yaml:5: models.p/m.deployment: bad deployment name "a/b"`},
		{"providers:\n  p: {api: azure, base_url: https://r.openai.azure.com, api_version: 2024-10-21}\nagents: {defaults: {model: {primary: p/meta/llama}}}\n",
			`c.yaml:3: agents.defaults.model.primary: model "p/meta/llama" of azure provider "p" names no deployment, and "meta/llama" cannot be one`},
	}
	for _, tt := range tests {
		_, err := Parse("c.yaml", []byte(tt.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant %q", tt.yaml, err, tt.want)
		}
	}
	// A model with a deployment of its own passes, whatever its name.
	ok := "providers:\n  p: {api: azure, base_url: https://r.openai.azure.com, api_version: 2025-04-01-preview}\nagents: {defaults: {model: {primary: p/meta/llama}}}\nmodels:\n  p/meta/llama: {deployment: llama-prod}\n"
	if _, err := Parse("c.yaml", []byte(ok), nil); err != nil {
		t.Errorf("deployment given: %v", err)
	}
}
