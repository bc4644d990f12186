package webhooks

import (
	"fmt"
	"mime"
	"net/http"
	"unicode/utf8"
)

// Accept answers a request that isn't a review, as what (such as "a
// ConversionReview") says, and reports whether r is one: POSTed, as
// application/json. A refused Content-Type is named clipped.
func Accept(w http.ResponseWriter, r *http.Request, what string) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, what+" is POSTed", http.StatusMethodNotAllowed)
		return false
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		http.Error(w, fmt.Sprintf("Content-Type %q: %s is application/json", Clip(r.Header.Get("Content-Type")), what), http.StatusUnsupportedMediaType)
		return false
	}
	return true
}

// MaxShown is the most of a string a review names that a handler puts in
// a span, a record or a message: 253 bytes, the longest name the API
// server takes. A webhook's port answers anyone who reaches it, and one
// review of many megabytes could otherwise put most of itself in a span.
const MaxShown = 253

// Clip is s, or its first MaxShown bytes, cut at a character's start, and
// an ellipsis.
func Clip(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	n := MaxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
