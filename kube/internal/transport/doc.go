// Package transport is the HTTP transport a kube Client sends every request
// to the API server through: its connections, its bearer token, its
// telemetry, its 401s, and the recording of a reconcile's writes. It knows
// nothing of controllers; kube.Client builds one with New and hands it to
// client-go's clients as their rest.Config's Transport. A Transport
// promises:
//
//   - Every connection is dialled with Config.Dial (the Host's), never
//     through a proxy, whatever the process's environment says, and spoken
//     over TLS with a clone of Config.TLS, whose ServerName defaults to
//     Config.Server's host; HTTP/2 when the server offers it, with a ping
//     after 30s without a frame and 15s for its answer, as client-go's own
//     transports do.
//   - Every answer is asked for uncompressed: a request carries no
//     Accept-Encoding: gzip, which Go's transport adds by default, so
//     kube-apiserver doesn't gzip a watch-list's stream a flush at a time
//     for each watcher, nor a long list: CPU on both sides for bandwidth a
//     cluster's network doesn't lack.
//   - AbortConnections closes every open connection at once, in use or
//     idle, abortively (SO_LINGER 0, a TCP reset) when the dialled
//     connection, or the one its NetConn method unwraps to, has SetLinger:
//     whatever a connection queued is dropped, not sent late. Requests in
//     flight fail; the next ones dial again. A connection that has neither
//     is closed with its own Close, and Config.Log says so once, at its
//     first dial.
//   - Config.Token is called at most once a minute, never twice at once,
//     with the context of the request that needs the token, and its last
//     token is kept while a call fails. A 401 to a request that carried
//     the last token has it called again by the next request at least a
//     second after the last call, so it is called at most once a second
//     however many requests are refused; Config.Log says so once for each
//     token refused. A request that carries its own Authorization header
//     is sent as it is, and its 401 changes nothing.
//   - Every request but a watch gets a client span, named by its method
//     and its path with the namespace and the name replaced, and
//     otelhttp's client metrics, from Config.Telemetry; a watch, which
//     lasts as long as its informer, gets neither.
//   - A 401 becomes an error naming Config.Server, which
//     apierrors.IsUnauthorized recognises.
//   - A write (POST, PUT, PATCH) whose context carries a WriteRecorder
//     (RecordingWrites), to a resource the recorder Owns, answered 2xx in
//     JSON or protobuf, is recorded: the object's namespace, name and
//     resourceVersion, whether the write created it, and which
//     managedFields entry its writer owns. Its caller reads the answer
//     whole, whether it was recorded or not.
//
// What it may import: net/http and apimachinery's error and meta types,
// otelhttp and the core's humus package, for the telemetry it is handed
// (the Host's dialer reaches it as a function); nothing of kube or of the
// rest of the engine, which it knows only through the interfaces its
// Config is given (Writes: the Client's ledger the control loop keeps).
package transport
