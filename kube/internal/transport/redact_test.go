package transport

import "testing"

// A URL an error shows has no credential left in it: not its userinfo's
// password, nor its query's values, nor its fragment, where a token is
// sometimes placed (issue 35: a server URL's query string was printed
// whole).
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"https://127.0.0.1:6443", "https://127.0.0.1:6443"},
		{"https://rancher.example.com/k8s/clusters/c-m-1", "https://rancher.example.com/k8s/clusters/c-m-1"},
		{"https://me:hunter2@example.com:6443/", "https://me:xxxxx@example.com:6443/"},
		{"https://me@example.com:6443", "https://me@example.com:6443"},
		{"https://example.com/?token=s3cret", "https://example.com/?token=xxxxx"},
		{"https://example.com?token=s3cret&x=1&bare", "https://example.com?token=xxxxx&x=xxxxx&xxxxx"},
		{"https://example.com/#s3cret", "https://example.com/#xxxxx"},
		{"https://me:pw@example.com:port?token=s3cret#frag", "https://me:xxxxx@example.com:port?token=xxxxx#xxxxx"},
		{"https://a:b@c@example.com", "https://a:xxxxx@example.com"},
		{"me:pw@example.com:6443", "me:xxxxx@example.com:6443"},
		{"example.com:6443?token=s3cret", "example.com:6443?token=xxxxx"},
		{"https://example.com/p@th?q", "https://example.com/p@th?xxxxx"},
		{"https://", "https://"},
		{"", ""},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			if got := RedactURL(tc.raw); got != tc.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}
