package ruvio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"time"
)

// Limits on what the reader accepts from a server, so a broken or hostile peer cannot make the client allocate
// without bound.
const (
	maxBulkLen   = 512 << 20 // the server's own proto-max-bulk-len default
	maxAggregate = 1 << 24   // elements of one array, map, set or push
	maxDepth     = 64        // nesting of aggregates
)

// ProtocolError reports bytes from the server that are not valid RESP. The connection they arrived on is closed.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "ruvio: protocol error: " + e.Msg }

// Push is a RESP3 out-of-band push reply (`>`): pub/sub messages and subscription confirmations on a RESP3
// connection. Do never returns one; pub/sub delivers them as [Message] values.
type Push []any

// appendCommand encodes one command as a RESP array of bulk strings. Arguments may be string, []byte, any
// integer type, float32/float64, bool (1/0), time.Duration (milliseconds), nil (an empty string) or a
// fmt.Stringer; anything else is an error.
func appendCommand(b []byte, args []any) ([]byte, error) {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		var err error
		b, err = appendArg(b, a)
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendBulkBytes(b []byte, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendArg(b []byte, a any) ([]byte, error) {
	var num [32]byte
	switch v := a.(type) {
	case string:
		return appendBulk(b, v), nil
	case []byte:
		return appendBulkBytes(b, v), nil
	case int:
		return appendBulkBytes(b, strconv.AppendInt(num[:0], int64(v), 10)), nil
	case int64:
		return appendBulkBytes(b, strconv.AppendInt(num[:0], v, 10)), nil
	case int32:
		return appendBulkBytes(b, strconv.AppendInt(num[:0], int64(v), 10)), nil
	case int16:
		return appendBulkBytes(b, strconv.AppendInt(num[:0], int64(v), 10)), nil
	case int8:
		return appendBulkBytes(b, strconv.AppendInt(num[:0], int64(v), 10)), nil
	case uint:
		return appendBulkBytes(b, strconv.AppendUint(num[:0], uint64(v), 10)), nil
	case uint64:
		return appendBulkBytes(b, strconv.AppendUint(num[:0], v, 10)), nil
	case uint32:
		return appendBulkBytes(b, strconv.AppendUint(num[:0], uint64(v), 10)), nil
	case uint16:
		return appendBulkBytes(b, strconv.AppendUint(num[:0], uint64(v), 10)), nil
	case uint8:
		return appendBulkBytes(b, strconv.AppendUint(num[:0], uint64(v), 10)), nil
	case float64:
		return appendBulkBytes(b, strconv.AppendFloat(num[:0], v, 'f', -1, 64)), nil
	case float32:
		return appendBulkBytes(b, strconv.AppendFloat(num[:0], float64(v), 'f', -1, 32)), nil
	case bool:
		if v {
			return appendBulk(b, "1"), nil
		}
		return appendBulk(b, "0"), nil
	case time.Duration:
		return appendBulkBytes(b, strconv.AppendInt(num[:0], v.Milliseconds(), 10)), nil
	case nil:
		return appendBulk(b, ""), nil
	case fmt.Stringer:
		return appendBulk(b, v.String()), nil
	default:
		return nil, fmt.Errorf("ruvio: cannot send an argument of type %T (use string, []byte, a number or bool)", a)
	}
}

// readReply reads one complete reply. Values come back as natural Go types:
//
//	simple string, bulk string, verbatim string  string
//	integer                                     int64
//	double                                      float64
//	boolean                                     bool
//	big number                                  *big.Int
//	null, null bulk, null array                 nil
//	array, set                                  []any
//	map, attribute-free                         map[string]any (non-string keys formatted with fmt)
//	push                                        Push
//	error reply                                 *Error (returned as the value, not as the error)
//
// The error result is only for I/O and protocol failures.
func readReply(r *bufio.Reader) (any, error) {
	return readValue(r, 0, false)
}

// The decoder's exact view, kept apart when readValue is asked to (readExact): the public API folds these into
// string, []any and map[string]any; the conformance runner checks that the decoder told them apart.
type (
	simpleString string
	verbatim     struct{ format, text string }
	setValue     []any
	mapValue     [][2]any // in wire order, keys as decoded
)

// readExact reads one reply keeping every RESP type distinct (simpleString, verbatim, setValue, mapValue).
func readExact(r *bufio.Reader) (any, error) {
	return readValue(r, 0, true)
}

func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, &ProtocolError{Msg: "line too long"}
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, &ProtocolError{Msg: fmt.Sprintf("line not ended by CRLF: %q", line)}
	}
	return line[:len(line)-2], nil
}

func parseInt(b []byte) (int64, error) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, &ProtocolError{Msg: fmt.Sprintf("bad integer %q", b)}
	}
	return n, nil
}

func readValue(r *bufio.Reader, depth int, exact bool) (any, error) {
	if depth > maxDepth {
		return nil, &ProtocolError{Msg: "reply nested too deeply"}
	}
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, &ProtocolError{Msg: "empty line"}
	}
	kind, rest := line[0], line[1:]
	switch kind {
	case '+':
		if exact {
			return simpleString(rest), nil
		}
		return string(rest), nil
	case '-':
		return parseError(string(rest)), nil
	case ':':
		return parseInt(rest)
	case '$', '=', '!':
		n, err := parseInt(rest)
		if err != nil {
			return nil, err
		}
		if n == -1 && kind == '$' {
			return nil, nil
		}
		if n < 0 || n > maxBulkLen {
			return nil, &ProtocolError{Msg: fmt.Sprintf("bad length %d", n)}
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, noEOF(err)
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, &ProtocolError{Msg: "bulk string not ended by CRLF"}
		}
		s := string(buf[:n])
		switch kind {
		case '!':
			return parseError(s), nil
		case '=':
			if len(s) < 4 || s[3] != ':' {
				return nil, &ProtocolError{Msg: "verbatim string without a format"}
			}
			if exact {
				return verbatim{format: s[:3], text: s[4:]}, nil
			}
			return s[4:], nil
		}
		return s, nil
	case '_':
		if len(rest) != 0 {
			return nil, &ProtocolError{Msg: "null with a payload"}
		}
		return nil, nil
	case '#':
		switch string(rest) {
		case "t":
			return true, nil
		case "f":
			return false, nil
		}
		return nil, &ProtocolError{Msg: fmt.Sprintf("bad boolean %q", rest)}
	case ',':
		switch string(rest) {
		case "inf":
			return math.Inf(1), nil
		case "-inf":
			return math.Inf(-1), nil
		case "nan":
			return math.NaN(), nil
		}
		f, err := strconv.ParseFloat(string(rest), 64)
		if err != nil {
			return nil, &ProtocolError{Msg: fmt.Sprintf("bad double %q", rest)}
		}
		return f, nil
	case '(':
		n, ok := new(big.Int).SetString(string(rest), 10)
		if !ok {
			return nil, &ProtocolError{Msg: fmt.Sprintf("bad big number %q", rest)}
		}
		return n, nil
	case '*', '~', '>':
		n, err := parseInt(rest)
		if err != nil {
			return nil, err
		}
		if n == -1 && kind == '*' {
			return nil, nil
		}
		if n < 0 || n > maxAggregate {
			return nil, &ProtocolError{Msg: fmt.Sprintf("bad aggregate length %d", n)}
		}
		items := make([]any, n)
		for i := range items {
			if items[i], err = readValue(r, depth+1, exact); err != nil {
				return nil, noEOF(err)
			}
		}
		if kind == '>' {
			return Push(items), nil
		}
		if kind == '~' && exact {
			return setValue(items), nil
		}
		return items, nil
	case '%':
		n, err := parseInt(rest)
		if err != nil {
			return nil, err
		}
		if n < 0 || n > maxAggregate {
			return nil, &ProtocolError{Msg: fmt.Sprintf("bad map length %d", n)}
		}
		if exact {
			mv := make(mapValue, 0, n)
			for i := int64(0); i < n; i++ {
				k, err := readValue(r, depth+1, exact)
				if err != nil {
					return nil, noEOF(err)
				}
				v, err := readValue(r, depth+1, exact)
				if err != nil {
					return nil, noEOF(err)
				}
				mv = append(mv, [2]any{k, v})
			}
			return mv, nil
		}
		m := make(map[string]any, n)
		for i := int64(0); i < n; i++ {
			k, err := readValue(r, depth+1, exact)
			if err != nil {
				return nil, noEOF(err)
			}
			v, err := readValue(r, depth+1, exact)
			if err != nil {
				return nil, noEOF(err)
			}
			ks, ok := k.(string)
			if !ok {
				ks = fmt.Sprint(k)
			}
			m[ks] = v
		}
		return m, nil
	case '|':
		// An attribute: read and drop it, then return the value it annotates.
		n, err := parseInt(rest)
		if err != nil {
			return nil, err
		}
		if n < 0 || n > maxAggregate {
			return nil, &ProtocolError{Msg: fmt.Sprintf("bad attribute length %d", n)}
		}
		for i := int64(0); i < 2*n; i++ {
			if _, err := readValue(r, depth+1, exact); err != nil {
				return nil, noEOF(err)
			}
		}
		return readValue(r, depth, exact)
	}
	return nil, &ProtocolError{Msg: fmt.Sprintf("unknown reply type %q", kind)}
}

// noEOF turns an EOF in the middle of a reply into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
