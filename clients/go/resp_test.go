package ruvio

import (
	"bufio"
	"errors"
	"io"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
)

func decodeString(s string) (any, error) {
	return readReply(bufio.NewReader(strings.NewReader(s)))
}

func TestDecodeNaturalValues(t *testing.T) {
	cases := []struct {
		in   string
		want any
	}{
		{"+OK\r\n", "OK"},
		{"$5\r\nhello\r\n", "hello"},
		{"$0\r\n\r\n", ""},
		{"$-1\r\n", nil},
		{"*-1\r\n", nil},
		{"_\r\n", nil},
		{":-42\r\n", int64(-42)},
		{":9223372036854775807\r\n", int64(math.MaxInt64)},
		{",1.5\r\n", 1.5},
		{"#t\r\n", true},
		{"#f\r\n", false},
		{"=15\r\ntxt:Some string\r\n", "Some string"},
		{"*3\r\n:1\r\n$1\r\na\r\n_\r\n", []any{int64(1), "a", nil}},
		{"~2\r\n+a\r\n+b\r\n", []any{"a", "b"}},
		{"%2\r\n+kind\r\n$5\r\nlease\r\n:7\r\n:1\r\n", map[string]any{"kind": "lease", "7": int64(1)}},
		{">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\np\r\n", Push{"message", "c", "p"}},
		{"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n", "v"},
		{"-WRONGTYPE Operation against a key\r\n", &Error{Code: "WRONGTYPE", Message: "WRONGTYPE Operation against a key"}},
		{"!9\r\nERR nope!\r\n", &Error{Code: "ERR", Message: "ERR nope!"}},
	}
	for _, c := range cases {
		got, err := decodeString(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %#v, %v; want %#v", c.in, got, err, c.want)
		}
	}
	if v, _ := decodeString("(3492890328409238509324850943850943825024385\r\n"); v.(*big.Int).String() != "3492890328409238509324850943850943825024385" {
		t.Error("big number")
	}
	if v, _ := decodeString(",inf\r\n"); !math.IsInf(v.(float64), 1) {
		t.Error("inf")
	}
	if v, _ := decodeString(",nan\r\n"); !math.IsNaN(v.(float64)) {
		t.Error("nan")
	}
}

func TestDecodeRejectsAndWaits(t *testing.T) {
	for _, in := range []string{"@x\r\n", ":12a\r\n", "$x\r\n", "#x\r\n", ",abc\r\n", "+OK\n", "$3\r\nabcde\r\n", "*-2\r\n",
		"$-5\r\n", "=3\r\nabc\r\n", "_x\r\n", "%-1\r\n", "\r\n", strings.Repeat("*1\r\n", 100) + ":1\r\n"} {
		_, err := decodeString(in)
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Errorf("%q: %v, want a protocol error", in, err)
		}
	}
	for _, in := range []string{"+OK", "$5\r\nhel", "*2\r\n:1\r\n", "%1\r\n+a\r\n", ""} {
		_, err := decodeString(in)
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v, want a request for more bytes", in, err)
		}
	}
}

func TestEncodeCommands(t *testing.T) {
	got, err := appendCommand(nil, []any{"LEASE", "job:1", 30 * time.Second})
	if err != nil || string(got) != "*3\r\n$5\r\nLEASE\r\n$5\r\njob:1\r\n$5\r\n30000\r\n" {
		t.Fatalf("%q %v", got, err)
	}
	got, _ = appendCommand(nil, []any{"SET", "bin", []byte{0, 0xff, '\r', '\n'}})
	if string(got) != "*3\r\n$3\r\nSET\r\n$3\r\nbin\r\n$4\r\n\x00\xff\r\n\r\n" {
		t.Fatalf("%q", got)
	}
	if _, err := appendCommand(nil, []any{"X", map[int]int{}}); err == nil {
		t.Fatal("a map argument must fail")
	}
	if ErrWrongType.Error() == "" || (&ProtocolError{Msg: "x"}).Error() == "" {
		t.Fatal("error texts")
	}
}
