package classify

import "strings"

// Finish maps a provider's stop reason to the known set (R14): "stop",
// "length", "tool_calls" and "function_call". A stop that is a failure (a
// filter, an error stop, or one detour does not know) keeps its words and
// says why in bad: content_filter, timeout (C6),
// context_overflow or unclassified; bad is ""
// for the known set. It is the one list of stop reasons: the LLM client reads
// every protocol's through it. An empty reason is "stop" here; a streaming
// client that saw none has a truncated stream and says so before.
func Finish(fr string) (norm string, bad Reason) {
	switch fr {
	case "", "stop", "end_turn", "stop_sequence", "eos":
		return "stop", ""
	case "length", "max_tokens":
		return "length", ""
	case "tool_calls", "tool_use":
		return "tool_calls", ""
	case "function_call":
		return "function_call", ""
	}
	// A stop the field step reads in a body's stop fields reads the same when a
	// stream ends with it: filters (Gemini's PROHIBITED_CONTENT, Bedrock's
	// guardrail_intervened, Cohere's ERROR_TOXIC, ...) and C6's error stops
	// ("error", "aborted", Gemini's MALFORMED_FUNCTION_CALL, network_error).
	if e, ok := stopReasons[strings.ToLower(fr)]; ok {
		return fr, e.reason
	}
	return fr, ReasonUnclassified
}
