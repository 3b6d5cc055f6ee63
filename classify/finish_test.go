package classify

import "testing"

// covers R14, C6: a stop reason outside the known set keeps its words and says
// why it failed; the filters the field step knows in a body (Gemini's, Bedrock's
// guardrail, Cohere's toxicity filter) are filters in a stream too, whatever
// their case, and an unknown stop stays unclassified.
func TestFinish_R14_StopReasons(t *testing.T) {
	for _, c := range []struct {
		in, norm string
		bad      Reason
	}{
		{"", "stop", ""}, {"end_turn", "stop", ""}, {"max_tokens", "length", ""}, {"tool_use", "tool_calls", ""},
		{"content_filter", "content_filter", ReasonContentFilter}, {"error", "error", ReasonTimeout},
		{"guardrail_intervened", "guardrail_intervened", ReasonContentFilter},
		{"content_filtered", "content_filtered", ReasonContentFilter},
		{"ERROR_TOXIC", "ERROR_TOXIC", ReasonContentFilter},
		{"PROHIBITED_CONTENT", "PROHIBITED_CONTENT", ReasonContentFilter},
		{"SPII", "SPII", ReasonContentFilter},
		{"MALFORMED_FUNCTION_CALL", "MALFORMED_FUNCTION_CALL", ReasonTimeout},
		{"malformed_function_call", "malformed_function_call", ReasonTimeout},
		{"network_error", "network_error", ReasonTimeout}, {"aborted", "aborted", ReasonTimeout},
		{"context_length_exceeded", "context_length_exceeded", ReasonContextOverflow},
		{"weird_stop", "weird_stop", ReasonUnclassified},
	} {
		norm, bad := Finish(c.in)
		if norm != c.norm || bad != c.bad {
			t.Errorf("Finish(%q) = %q, %q; want %q, %q", c.in, norm, bad, c.norm, c.bad)
		}
	}
}
