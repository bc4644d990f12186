// Package humustest tests humus Apps and their Services.
//
// What it promises:
//
//   - Host is a humus.Host whose environment and files a test sets, whose
//     stdout and stderr it reads back, and which dials and listens on
//     loopback only.
//   - Telemetry records spans, metric data and log records in memory, for a
//     test to read back, without a goroutine of its own.
//   - TestService checks any Service against humus.Service's contract,
//     including that no goroutine outlives it.
//   - Start runs a whole App through humus.Run, as the process would: a
//     test sends the signal and reads the exit code and stderr.
package humustest
