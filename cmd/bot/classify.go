package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/detourbot/detour/classify"
	"github.com/detourbot/detour/internal/termsafe"
	"github.com/detourbot/detour/redact"
)

// maxClassifyLine is the longest input line bot classify accepts (10 MiB).
const maxClassifyLine = 10 << 20

// classifyInput is one JSONL input line. Unknown fields (a corpus line's id,
// expected_reason, ...) are ignored.
type classifyInput struct {
	Provider   string            `json:"provider"`
	HTTPStatus *int              `json:"http_status"`
	Headers    map[string]string `json:"headers"`
	Body       string            `json:"body"`
	Stream     bool              `json:"stream"`
}

// classifyOutput is one JSONL output line. Explain is written only with
// --explain, so the plain output stays as it always was.
type classifyOutput struct {
	Reason       string           `json:"reason"`
	Class        string           `json:"class"`
	RecoveryAt   *string          `json:"recovery_at"`
	RetryAfterMS *float64         `json:"retry_after_ms"`
	Explain      *classifyExplain `json:"explain,omitempty"`
}

// classifyExplain says why a line got its reason (bot classify --explain): the
// step that decided (transport, field, status, text, default), the rule or
// family ("billing/insufficient-funds", "field/overloaded_error",
// "status/429"), the family of meaning alone and the field that decided
// ("error.code", "base_resp.status_code", "message", "http status"), the
// evidence it matched, the status the decision saw and where it came from,
// where the recovery time came from, the plain words people read in notices,
// and for a format verdict whether its words point at the request (C13).
// Evidence, code and message are redacted: the input may hold a key.
type classifyExplain struct {
	Step         string `json:"step"`
	Rule         string `json:"rule"`
	Family       string `json:"family"`
	Field        string `json:"field"`
	Evidence     string `json:"evidence"`
	Status       int    `json:"status"`
	StatusFrom   string `json:"status_from"`
	RecoveryFrom string `json:"recovery_from"`
	Code         string `json:"code"`
	Message      string `json:"message"`
	Says         string `json:"says"`
	RequestFault *bool  `json:"request_fault,omitempty"`
}

type classifyError struct {
	Error string `json:"error"`
}

// runClassify implements `bot classify`: it reads JSONL lines
// {"provider","http_status","headers","body","stream"} from stdin and writes, in
// order, one line per input line: {"reason","class","recovery_at","retry_after_ms"},
// or {"error": "..."} for a line that is blank, not JSON or has wrong types.
// Processing always goes on; lines up to 10 MiB are accepted.
func runClassify(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("classify", flag.ContinueOnError)
	nowFlag := fs.String("now", "", "reference time (RFC 3339) for year-less reset texts and waits; default: the current time")
	explain := fs.Bool("explain", false, "add \"explain\": the step and rule that decided, the evidence, the status seen, the plain words")
	setUsage(fs, `Usage: bot classify [--now RFC3339] [--explain] < errors.jsonl

Reads one JSON object per line: {"provider": "...", "http_status": 429 or null,
"headers": {"retry-after": "2"}, "body": "...", "stream": false}
and writes one line per input line, in order:
{"reason": "...", "class": "...", "recovery_at": "<RFC 3339>" or null, "retry_after_ms": <number> or null}
A line that cannot be read gets {"error": "..."} and processing goes on.
With --explain each answer also holds "explain": {"step", "rule", "family",
"field", "evidence", "status", "status_from", "recovery_from", "code", "message",
"says", and for format "request_fault"} (redacted).

`)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var fixedNow time.Time
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339Nano, *nowFlag)
		if err != nil {
			fmt.Fprintf(stderr, "bot classify: --now: %v\n", err)
			return exitUsage
		}
		fixedNow = t
	}

	in := bufio.NewReaderSize(stdin, 64<<10)
	out := bufio.NewWriterSize(termsafe.NewJSONWriter(stdout), 64<<10) // T10: evidence is a provider's text
	for {
		if err := ctx.Err(); err != nil {
			out.Flush()
			fmt.Fprintf(stderr, "bot classify: %v\n", err)
			return exitFailed
		}
		line, tooLong, err := readLimitedLine(in, maxClassifyLine)
		if err != nil && !errors.Is(err, io.EOF) {
			out.Flush()
			fmt.Fprintf(stderr, "bot classify: read: %v\n", err)
			return exitFailed
		}
		if errors.Is(err, io.EOF) && line == nil && !tooLong {
			break
		}
		now := fixedNow
		if now.IsZero() {
			now = time.Now()
		}
		var rec []byte
		if tooLong {
			rec = mustJSON(classifyError{Error: fmt.Sprintf("line longer than %d bytes", maxClassifyLine)})
		} else {
			rec = classifyLine(line, now, *explain)
		}
		out.Write(rec)
		if werr := out.WriteByte('\n'); werr != nil {
			fmt.Fprintf(stderr, "bot classify: write: %v\n", werr)
			return exitFailed
		}
		if in.Buffered() == 0 { // answer interactive use line by line
			if ferr := out.Flush(); ferr != nil {
				fmt.Fprintf(stderr, "bot classify: write: %v\n", ferr)
				return exitFailed
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "bot classify: write: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// readLimitedLine returns the next line without its line ending. A line over
// limit is consumed and reported with tooLong. At the end of input it returns the
// last unterminated line with io.EOF, or nil and io.EOF when nothing is left.
func readLimitedLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	var buf []byte
	sawAny := false
	for {
		chunk, e := r.ReadSlice('\n')
		if len(chunk) > 0 {
			sawAny = true
		}
		if !tooLong {
			if len(buf)+len(chunk) > limit+2 { // +2: room for "\r\n"
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(e, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(e, io.EOF) && !sawAny {
			return nil, false, io.EOF
		}
		if tooLong {
			return nil, true, e
		}
		line = bytes.TrimRight(buf, "\r\n")
		if len(line) > limit {
			return nil, true, e
		}
		if line == nil {
			line = []byte{}
		}
		return line, false, e
	}
}

// classifyLine turns one input line into one output record; it never panics.
func classifyLine(line []byte, now time.Time, explain bool) (out []byte) {
	defer func() {
		if p := recover(); p != nil {
			out = mustJSON(classifyError{Error: "internal error while classifying this line"})
		}
	}()
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return mustJSON(classifyError{Error: "blank line"})
	}
	if trimmed[0] != '{' {
		return mustJSON(classifyError{Error: "line is not a JSON object"})
	}
	var in classifyInput
	if err := json.Unmarshal(trimmed, &in); err != nil {
		return mustJSON(classifyError{Error: "bad input: " + describeJSONError(err)})
	}
	st := 0
	if in.HTTPStatus != nil {
		st = *in.HTTPStatus
		if st < 0 || st > 999 {
			return mustJSON(classifyError{Error: fmt.Sprintf("bad input: http_status %d out of range", st)})
		}
	}
	f := classify.Classify(classify.Response{
		Provider: in.Provider, Status: st, Headers: in.Headers, Body: in.Body, Stream: in.Stream,
	}, now)
	o := classifyOutput{Reason: string(f.Reason), Class: string(f.Class)}
	if !f.RecoveryAt.IsZero() {
		s := f.RecoveryAt.UTC().Format(time.RFC3339Nano)
		o.RecoveryAt = &s
	}
	if f.RetryAfter > 0 || !f.RecoveryAt.IsZero() {
		ms := float64(f.RetryAfter.Microseconds()) / 1000
		o.RetryAfterMS = &ms
	}
	if explain {
		w := f.Why
		o.Explain = &classifyExplain{Step: string(w.Step), Rule: w.Rule, Family: w.Family, Field: w.Field,
			Evidence: redact.Preview(w.Evidence, 120), Status: w.Status, StatusFrom: w.StatusFrom, RecoveryFrom: w.Recovery,
			Code: redact.Preview(f.Code, 80), Message: redact.Preview(f.Message, 200), Says: classify.Describe(f.Reason, w.Status)}
		if f.Reason == classify.ReasonFormat {
			rf := classify.RequestFault(f)
			o.Explain.RequestFault = &rf
		}
	}
	return mustJSON(o)
}

// describeJSONError names the problem without echoing the input (it may hold secrets).
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "line"
		}
		return fmt.Sprintf("field %q must not be a JSON %s", field, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	return "invalid JSON"
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":"cannot encode result"}`)
	}
	return b
}
