package ruvio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

func deadlineOf(ctx context.Context) (time.Time, bool) {
	if ctx == nil {
		return time.Time{}, false
	}
	return ctx.Deadline()
}

// Error is an error reply from the server, such as
// "WRONGTYPE Operation against a key holding the wrong kind of value". Use errors.As to get it, or errors.Is
// with one of the [ErrorCode] constants:
//
//	var se *ruvio.Error
//	if errors.As(err, &se) { fmt.Println(se.Code) }        // "WRONGTYPE"
//	if errors.Is(err, ruvio.ErrWrongType) { ... }
type Error struct {
	// Code is the error's first word, upper case: ERR, WRONGTYPE, READONLY, NOAUTH, WRONGPASS, MISCONF, ...
	Code string
	// Message is the whole text the server sent, code included.
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is the ErrorCode of this reply, so errors.Is(err, ruvio.ErrReadOnly) works.
func (e *Error) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && string(c) == e.Code
}

func parseError(text string) *Error {
	code := text
	if i := strings.IndexByte(text, ' '); i >= 0 {
		code = text[:i]
	}
	return &Error{Code: code, Message: text}
}

// ErrorCode is the code of a server error reply, for use with errors.Is. Any code works
// (errors.Is(err, ruvio.ErrorCode("LOADING"))); the common ones have names.
type ErrorCode string

func (c ErrorCode) Error() string { return "ruvio: server error " + string(c) }

// Server error codes.
const (
	ErrGeneric   ErrorCode = "ERR"
	ErrWrongType ErrorCode = "WRONGTYPE"
	ErrReadOnly  ErrorCode = "READONLY"
	ErrNoAuth    ErrorCode = "NOAUTH"
	ErrWrongPass ErrorCode = "WRONGPASS"
	ErrMisconf   ErrorCode = "MISCONF"
	ErrExecAbort ErrorCode = "EXECABORT"
	ErrNoProto   ErrorCode = "NOPROTO"
)

// Kinds of network failure, for errors.Is on a [*NetError].
var (
	// ErrTimeout: the context's deadline, the command timeout or the dial timeout passed before the answer.
	// If the command had been sent, its fate is unknown: it may or may not have run.
	ErrTimeout = errors.New("ruvio: timeout")
	// ErrConnectionLost: the connection broke (closed or reset by the server, or by the network) while the
	// command was in flight. Its fate is unknown: it may or may not have run.
	ErrConnectionLost = errors.New("ruvio: connection lost")
	// ErrUnreachable: no connection could be made (refused, no route, name not resolved, handshake failed at
	// the network level). The command was not sent.
	ErrUnreachable = errors.New("ruvio: server unreachable")
)

// Other errors.
var (
	// ErrClosed is returned by every call on a Client after Close.
	ErrClosed = errors.New("ruvio: client closed")
	// ErrNil is returned by the reply converters ([String], [Int64], ...) for a nil reply.
	ErrNil = errors.New("ruvio: nil reply")
	// ErrTxAborted is returned by [Tx.Exec] when a watched key changed and EXEC ran nothing.
	ErrTxAborted = errors.New("ruvio: transaction aborted: a watched key changed")
)

// NetError is a network-level failure of one call. errors.Is(err, k) is true for its Kind (ErrTimeout,
// ErrConnectionLost or ErrUnreachable), and errors.Is also sees the cause (context.DeadlineExceeded,
// context.Canceled, a *net.OpError, ...).
//
// When Sent is true the command (or some of a pipeline) may have reached the server: its fate is unknown.
// Do not repeat LEASE or SEMAPHORE blindly then (a grant may have happened, its token is lost and the lock stays
// taken until its TTL); RENEW and RELEASE carry the token and are safe to repeat.
type NetError struct {
	Kind error  // ErrTimeout, ErrConnectionLost or ErrUnreachable
	Addr string // the server's address
	Sent bool   // the request may have reached the server
	Err  error  // the cause
}

func (e *NetError) Error() string {
	fate := ""
	if e.Sent {
		fate = " (the command may or may not have run)"
	}
	return fmt.Sprintf("%v: %s: %v%s", e.Kind, e.Addr, e.Err, fate)
}

// Unwrap returns the kind and the cause.
func (e *NetError) Unwrap() []error { return []error{e.Kind, e.Err} }

// Timeout reports whether the kind is ErrTimeout (as net.Error does).
func (e *NetError) Timeout() bool { return e.Kind == ErrTimeout }

// FateUnknown reports whether err says a command may or may not have run: a timeout or a lost connection after
// the request was (perhaps) sent.
func FateUnknown(err error) bool {
	var ne *NetError
	return errors.As(err, &ne) && ne.Sent
}

// kindOf sorts a failure: the context's own error wins (deadline -> timeout, cancellation kept as is).
func netErr(ctx context.Context, addr string, sent bool, err error) *NetError {
	kind := ErrConnectionLost
	var te interface{ Timeout() bool }
	switch {
	case ctx != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		kind, err = ErrTimeout, fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	case ctx != nil && errors.Is(ctx.Err(), context.Canceled):
		kind, err = ErrConnectionLost, fmt.Errorf("%w (%v)", context.Canceled, err)
	case errors.As(err, &te) && te.Timeout():
		kind = ErrTimeout
		if d, ok := deadlineOf(ctx); ok && time.Until(d) < 10*time.Millisecond {
			// The context's deadline was the one the connection hit (its timer may not have fired yet).
			err = fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
		}
	}
	return &NetError{Kind: kind, Addr: addr, Sent: sent, Err: err}
}
