package main

// A minimal RESP2 client: enough for the workloads and the nemesis probes. Every call has a deadline.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// RedisErr is an error reply (-ERR ...): the server answered, so the outcome is known.
type RedisErr string

func (e RedisErr) Error() string { return string(e) }

func Dial(addr string, timeout time.Duration) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReader(c)}, nil
}

func (c *Conn) Close() { c.c.Close() }

// Do sends one command and reads one reply. A network error or timeout means the outcome is unknown.
func (c *Conn) Do(timeout time.Duration, args ...string) (interface{}, error) {
	c.c.SetDeadline(time.Now().Add(timeout))
	buf := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		buf = append(buf, "$"+strconv.Itoa(len(a))+"\r\n"...)
		buf = append(buf, a...)
		buf = append(buf, "\r\n"...)
	}
	if _, err := c.c.Write(buf); err != nil {
		return nil, err
	}
	return c.read()
}

func (c *Conn) line() (string, error) {
	l, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(l) < 3 {
		return "", errors.New("short line")
	}
	return l[:len(l)-2], nil
}

func (c *Conn) read() (interface{}, error) {
	l, err := c.line()
	if err != nil {
		return nil, err
	}
	switch l[0] {
	case '+':
		return l[1:], nil
	case '-':
		return nil, RedisErr(l[1:])
	case ':':
		return strconv.ParseInt(l[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := readFull(c.r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return nil, nil
		}
		out := make([]interface{}, n)
		for i := range out {
			v, err := c.read()
			if err != nil {
				if re, ok := err.(RedisErr); ok {
					out[i] = re
					continue
				}
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("bad reply %q", l)
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := r.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// oneShot runs a single command on a fresh connection.
func oneShot(addr string, timeout time.Duration, args ...string) (interface{}, error) {
	c, err := Dial(addr, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(timeout, args...)
}

func infoField(info, name string) string {
	for _, l := range splitLines(info) {
		if len(l) > len(name) && l[:len(name)] == name && l[len(name)] == ':' {
			return l[len(name)+1:]
		}
	}
	return ""
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			l := s[start:i]
			if len(l) > 0 && l[len(l)-1] == '\r' {
				l = l[:len(l)-1]
			}
			out = append(out, l)
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
