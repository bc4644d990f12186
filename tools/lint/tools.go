//go:build tools

// Package lint pins golangci-lint's version for `make lint`, which builds it
// from source through the Go toolchain into .bin/.
package lint

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
