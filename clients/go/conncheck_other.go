//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package ruvio

import "net"

// connCheck is a no-op where a non-blocking peek is not available: a closed idle connection then shows up as
// ErrConnectionLost on the next command.
func connCheck(net.Conn) error { return nil }
