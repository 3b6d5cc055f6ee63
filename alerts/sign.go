package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery (docs/operations.md "Alerts"). Receivers verify
// SignatureHeader and drop an IDHeader they have seen.
const (
	SignatureHeader = "Detour-Signature"        // "t=<unix seconds>,v1=<hex HMAC-SHA256>"
	IDHeader        = "Detour-Event-Id"         // the body's id
	TypeHeader      = "Detour-Event-Type"       // the body's type
	AttemptHeader   = "Detour-Delivery-Attempt" // 1 for the first try, 2 for the first retry, ...
	userAgent       = "detour-webhooks/1"
)

// Sign returns the SignatureHeader value of body sent at ts: the hex
// HMAC-SHA256, keyed by secret, of "<unix seconds>.<body>" (as Stripe signs).
// The timestamp is signed so a captured request cannot be replayed later
// than the receiver's tolerance.
func Sign(secret []byte, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + mac(secret, t, body)
}

func mac(secret []byte, t string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("alerts: signature does not match")
	ErrStale        = errors.New("alerts: signature timestamp outside the tolerance")
	ErrMalformed    = errors.New("alerts: malformed signature header")
)

// Verify checks a SignatureHeader value against body, as a receiver written
// in Go would: the HMAC must match (compared in constant time) and the
// timestamp be within tolerance of now (0 = not checked).
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var t string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			t = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(t, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrMalformed
	}
	want := mac(secret, t, body)
	ok := false
	for _, s := range sigs {
		ok = ok || hmac.Equal([]byte(s), []byte(want))
	}
	if !ok {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); tolerance > 0 && (d > tolerance || d < -tolerance) {
		return ErrStale
	}
	return nil
}
