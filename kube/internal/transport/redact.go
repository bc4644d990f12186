package transport

import "strings"

// RedactURL is raw, a URL or a host:port, as an error or a record may show
// it: its userinfo's password, each value of its query (a member without
// "=" whole) and its fragment are replaced with "xxxxx". url.URL.Redacted
// hides the password alone, but a token is sometimes placed in a query or
// a fragment too. raw is read as text, so one that doesn't parse as a URL
// is redacted as well.
func RedactURL(raw string) string {
	const x = "xxxxx"
	rest, _, hasFragment := strings.Cut(raw, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	start := 0
	if i := strings.Index(rest, "://"); i >= 0 {
		start = i + len("://")
	}
	end := len(rest)
	if i := strings.IndexByte(rest[start:], '/'); i >= 0 {
		end = start + i
	}
	authority := rest[start:end]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, _, hasPassword := strings.Cut(authority[:at], ":")
		if hasPassword {
			user += ":" + x
		}
		authority = user + "@" + authority[at+1:]
	}
	var b strings.Builder
	b.WriteString(rest[:start])
	b.WriteString(authority)
	b.WriteString(rest[end:])
	if hasQuery {
		b.WriteByte('?')
		for i, member := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			if key, _, ok := strings.Cut(member, "="); ok {
				b.WriteString(key + "=" + x)
			} else if member != "" {
				b.WriteString(x)
			}
		}
	}
	if hasFragment {
		b.WriteString("#" + x)
	}
	return b.String()
}
