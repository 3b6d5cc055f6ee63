package llm

import "slices"

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
