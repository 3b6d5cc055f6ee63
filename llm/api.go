package llm

import (
	"fmt"
	"regexp"
	"slices"
	"unicode/utf8"
)

// API is the protocol a provider speaks (config providers.<id>.api).
type API string

// The protocols a Client speaks.
const (
	// APIOpenAI is OpenAI's chat completions at BaseURL (OpenAI, OpenRouter,
	// Ollama, vLLM, ...): go-openai, Authorization: Bearer.
	APIOpenAI API = "openai"
	// APIAzure is Azure OpenAI: go-openai's Azure mode, one deployment per
	// model in the path (/openai/deployments/{d}/chat/completions), the
	// api-version query parameter and the api-key header.
	APIAzure API = "azure"
	// APIAnthropic is Anthropic's Messages API (POST {BaseURL}/messages,
	// x-api-key, anthropic-version), spoken by this package's own client.
	APIAnthropic API = "anthropic"
	// APIGemini is Gemini's OpenAI-compatible endpoint
	// (…/v1beta/openai/chat/completions) through go-openai; its errors come as
	// a JSON list holding {"error": {...}}, which classify reads as it is.
	APIGemini API = "gemini"
)

// APIs lists every protocol, the default first.
var APIs = []API{APIOpenAI, APIAzure, APIAnthropic, APIGemini}

// Valid reports whether a is a known protocol.
func (a API) Valid() bool { return slices.Contains(APIs, a) }

// DefaultAnthropicVersion is the anthropic-version header sent when
// Config.APIVersion is empty: the Messages API's stable version.
const DefaultAnthropicVersion = "2023-06-01"

// DefaultAnthropicMaxTokens is the max_tokens sent to Anthropic when a request
// gives none: the Messages API requires one, and every current model can write
// this much.
const DefaultAnthropicMaxTokens = 4096

// deploymentName is Azure's rule for a deployment name (letters, digits, '.',
// '_' and '-'), starting with a letter or digit (so never "." or "..") and at
// most 64 long.
var deploymentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidDeployment checks an Azure deployment name, which becomes one segment
// of the request's path (/openai/deployments/{name}/chat/completions): 1-64
// letters, digits, '.', '_' or '-', starting with a letter or digit. It is the
// one rule for every name, wherever it comes from: the configuration
// (models.<ref>.deployment, or a model that is its own deployment), a model a
// person chose through an allow pattern, go-openai's mapper (issue 37). No name it
// accepts can change the path or the query.
func ValidDeployment(name string) error {
	if deploymentName.MatchString(name) {
		return nil
	}
	shown := name
	if utf8.RuneCountInString(shown) > 80 {
		shown = string([]rune(shown)[:80]) + "…"
	}
	return fmt.Errorf("bad Azure deployment name %q: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", shown)
}
