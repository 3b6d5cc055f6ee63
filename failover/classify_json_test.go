package failover

import (
	"encoding/json"
	"reflect"
	"testing"
)

var jsonDecodeSeeds = []string{
	`{"error":{"message":"Rate limit reached","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
	`[{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}]`,
	`{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":{\"message\":\"quota\\u00e9 \\/ \\\\ \\n\"}}","provider_name":"X"}}}`,
	`{"a":"\ud83d\ude00","b":"\ud800","c":"\u00e9\u4e2d","d":"é中😀"}`,
	"{\"a\":\"\xff\"}", "{\"a\":\"\\\xff\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u+123"}`, `{"a":"\u0000"}`,
	`{"n":[0,-0,1.5,-2e10,1E+2,3e-4,1e999,-1e999,01,1.,.5,-,+1,0x10]}`, `[]`, `{}`, `[[],{}]`, ` {"a" : [ 1 , 2 ] } `,
	`{"a":1,"a":2}`, `{"b":1,"a":2,"b":3,"c":{"z":1,"y":2}}`, `{"k1":1,"k9":9,"k2":2,"k8":8,"k3":3,"k7":7,"k4":4,"k6":6,"k5":5,"k0":0}`,
	`{"e":"\x","d":1,"d":2}`, `[{"b":1,"a":2},{"c":"\ud800","a":1,"a":3}]`, `{"a":true,"b":false,"c":null}`, `{"a":tru}`, `{"a":nul}`, `{"a":1,}`, `[1,]`, `{"a"}`, `{"a":1 "b":2}`,
	`{"a":"b"}x`, `{"a":"b"}}`, `"str"`, `12`, `true`, `null`, "", " ", `{"a":"line` + "\n" + `"}`, `{"a":"tab	"}`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

// checkLeanDecode: whenever the lean decoder accepts a document, it builds the
// same tree as encoding/json, and decodeJSON always agrees with encoding/json.
func checkLeanDecode(t *testing.T, s string) {
	var want any
	wantErr := json.Unmarshal([]byte(s), &want)
	if got, ok := leanDecode(s); ok {
		if wantErr != nil {
			t.Fatalf("leanDecode(%q) accepted what encoding/json rejects: %v", s, wantErr)
		}
		if got = toStdJSON(t, got); !reflect.DeepEqual(got, want) {
			t.Fatalf("leanDecode(%q) = %#v, encoding/json = %#v", s, got, want)
		}
	}
	got, ok := decodeJSON(s)
	if ok {
		got = toStdJSON(t, got)
	}
	if ok != (wantErr == nil) || ok && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeJSON(%q) = %#v, %v; encoding/json = %#v, %v", s, got, ok, want, wantErr)
	}
}

// toStdJSON turns *jsonObject back into map[string]any, checking that members
// are sorted and unique and that get finds each of them.
func toStdJSON(t *testing.T, v any) any {
	switch x := v.(type) {
	case *jsonObject:
		m := make(map[string]any, len(x.members))
		for i, e := range x.members {
			if i > 0 && x.members[i-1].key >= e.key {
				t.Fatalf("members not sorted/unique: %q then %q", x.members[i-1].key, e.key)
			}
			if got := x.get(e.key); !reflect.DeepEqual(got, e.val) {
				t.Fatalf("get(%q) = %#v, want %#v", e.key, got, e.val)
			}
			m[e.key] = toStdJSON(t, e.val)
		}
		if x.get("\x00no such key") != nil {
			t.Fatal("get of a missing key is not nil")
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = toStdJSON(t, x[i])
		}
		return out
	case map[string]any:
		t.Fatalf("decoder left a map[string]any")
	}
	return v
}

// TestDecodeJSON_MatchesEncodingJSON: the fast JSON path never changes what
// Classify sees (C12: same results, cheaper).
func TestDecodeJSON_MatchesEncodingJSON(t *testing.T) {
	accepted := 0
	for _, s := range jsonDecodeSeeds {
		checkLeanDecode(t, s)
		if _, ok := leanDecode(s); ok {
			accepted++
		}
	}
	for _, c := range loadCorpus(t) {
		checkLeanDecode(t, c.Body)
	}
	if accepted < 10 {
		t.Fatalf("lean decoder accepted only %d seeds", accepted)
	}
	if _, ok := leanDecode(jsonDecodeSeeds[0]); !ok {
		t.Fatal("lean decoder declined a plain OpenAI body")
	}
}

// FuzzDecodeJSON: the lean decoder agrees with encoding/json on any input.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range jsonDecodeSeeds {
		f.Add(s)
	}
	f.Fuzz(checkLeanDecode)
}
