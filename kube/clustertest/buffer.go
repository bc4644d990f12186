package clustertest

import "github.com/z5labs/humus/kube/internal/procutil"

// SyncBuffer is a bytes.Buffer safe for concurrent use.
//
// Deprecated: it was kube's own tests' helper, and is going away; keep a
// bytes.Buffer behind a sync.Mutex of your own.
type SyncBuffer = procutil.SyncBuffer
