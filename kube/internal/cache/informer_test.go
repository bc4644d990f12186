package cache

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// errRefusedAtConnect is a dial refused as net gives it, ECONNREFUSED
// wrapped in a syscall error and an *OpError.
var errRefusedAtConnect = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// TestOnlyARefusedWatchListIsHandedBackAsAnotherError: the reflector sleeps
// without looking at its context only after a watch-list request refused
// at connect or throttled; every other error, and those of any other
// request, are kept as they are.
func TestOnlyARefusedWatchListIsHandedBackAsAnotherError(t *testing.T) {
	watchList := metav1.ListOptions{SendInitialEvents: new(true)}
	for _, tc := range []struct {
		name string
		o    metav1.ListOptions
		err  error
		same bool
	}{
		{"a refused watch-list", watchList, errRefusedAtConnect, false},
		{"a refused watch", metav1.ListOptions{}, errRefusedAtConnect, true},
		{"a refused watch without initial events", metav1.ListOptions{SendInitialEvents: new(false)}, errRefusedAtConnect, true},
		{"a watch-list throttled", watchList, apierrors.NewTooManyRequests("busy", 1), false},
		{"a watch throttled", metav1.ListOptions{}, apierrors.NewTooManyRequests("busy", 1), true},
		{"a watch-list refused as forbidden", watchList, apierrors.NewForbidden(schema.GroupResource{Group: "cache.example.com", Resource: "memcacheds"}, "", errors.New("no")), true},
		{"no error", watchList, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refusedWatchList(tc.o, tc.err)
			if tc.same {
				if got != tc.err { //nolint:errorlint // the very error, unwrapped
					t.Errorf("refusedWatchList = %v, want %v itself", got, tc.err)
				}
				return
			}
			if got == nil || utilnet.IsConnectionRefused(got) || apierrors.IsTooManyRequests(got) || got.Error() != tc.err.Error() {
				t.Errorf("refusedWatchList = %#v, want the text %q, neither a refusal nor a 429", got, tc.err.Error())
			}
		})
	}
}
