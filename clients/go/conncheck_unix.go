//go:build linux || darwin || freebsd || netbsd || openbsd

package ruvio

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

var errUnexpectedRead = errors.New("ruvio: unexpected data on an idle connection")

// connCheck peeks at an idle connection without blocking: a server that closed it (restart, idle timeout) has
// left an EOF there, and the connection must not be used for the next command.
func connCheck(nc net.Conn) error {
	// The last command's deadline may have passed while the connection sat idle; a raw read would then fail
	// with a timeout before looking at the socket. The next command sets its own deadline anyway.
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return err
	}
	isTLS := false
	if tc, ok := nc.(*tls.Conn); ok {
		nc, isTLS = tc.NetConn(), true
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var checkErr error
	err = raw.Read(func(fd uintptr) bool {
		var buf [1]byte
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case n == 0 && err == nil:
			checkErr = io.EOF
		case n > 0 && !isTLS: // (TLS may legitimately send records, such as session tickets, unasked)
			checkErr = errUnexpectedRead
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			checkErr = nil
		default:
			checkErr = err
		}
		return true
	})
	if err != nil {
		return err
	}
	return checkErr
}
