package classify

import "strings"

// RequestFault reports whether a failure's own words point at the request that
// was sent: its messages or roles, the JSON shape, a parameter the caller set,
// an attachment ("messages: roles must alternate", "Invalid 'max_tokens'",
// "Extra inputs are not permitted", "Invalid image"). It is false when nothing
// in the verdict names the request: a bare 400, "Bad Request", an upstream's
// internal words, text no family knows. C13 lets a format failure of the second
// kind try another provider once instead of ending the turn (C9); one of the
// first kind is the request's, and another provider would refuse it too.
//
// It reads the verdict only (Param, Code, Message, and the rule that decided),
// so it is pure and the engine can ask it of any Failure built by FailureFrom.
func RequestFault(v Verdict) bool {
	if strings.TrimSpace(v.Param) != "" {
		return true // the provider named the parameter
	}
	if reRequestRule.MatchString(v.Why.Rule) {
		return true // a format rule that is about the request's shape
	}
	return reRequestWords.MatchString(strings.ToLower(v.Code + " " + v.Message))
}

// Format rules whose match is itself about the request (format/validation
// matched "must be", format/malformed matched "malformed"...). The generic
// invalid-request rule is left to the words: "Invalid request" alone says
// nothing of what was wrong.
var reRequestRule = lazy(`^(format/(unsupported|validation|malformed|bad-header)|field/(validation_exception|validation_error|unsupported_parameter|unsupported_value|invalid_value|extra_forbidden|out_of_range))$`)

// reRequestWords names parts of a chat request and the words validators use for
// them.
var reRequestWords = lazy(`\b(messages?|roles?|content|prompt|system|user|assistant|tools?|tool_calls?|tool_use|tool_result|tool_choice|functions?|function_call|parameters?|params?|arguments?|fields?|json|schema|max_tokens|max_completion_tokens|temperature|top_p|top_k|stop|seed|stream|response_format|logprobs|images?|image_url|audio|files?|base64|utf-?8|encoding|enum|string|array|object|integer|boolean|value|values|missing|required|unexpected|unrecognized|extra inputs|malformed|parse|parsing|syntax|alternate|empty|prefill|thinking)\b|\binvalid '|\b(request|json) body\b|\bmax(imum)? (output |new )?tokens\b|\bsdk\b|\bbody of\b|\bmust (be|not|have|contain|end|start|match)\b|参数|消息|格式`)
