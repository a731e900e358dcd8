package ruvio

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Options configure a [Client]. The zero value connects to 127.0.0.1:6379 with RESP3 (falling back to RESP2),
// database 0, a 5 s dial timeout and a 5 s command timeout.
type Options struct {
	// Addr is host:port of the server. Default "127.0.0.1:6379". Ignored when SentinelAddrs is set.
	Addr string

	// Username and Password authenticate each connection (HELLO ... AUTH, or AUTH with RESP2). An empty
	// Username with a Password sends the one-argument AUTH.
	Username string
	Password string

	// DB is the database each connection SELECTs (when not 0).
	DB int

	// ClientName names each connection (CLIENT SETNAME), as shown by CLIENT LIST.
	ClientName string

	// Protocol is the RESP version: 0 (default) asks for RESP3 and falls back to RESP2 when the server
	// refuses HELLO 3; 2 speaks RESP2 only; 3 requires RESP3.
	Protocol int

	// DialTimeout bounds connecting, the TLS handshake and the connection's set-up commands. Default 5 s.
	DialTimeout time.Duration

	// CommandTimeout bounds each command (or pipeline) from send to answer, on top of the context's deadline,
	// whichever comes first. Default 5 s; negative means no timeout beyond the context's. Lock commands with a
	// wait get the wait added.
	CommandTimeout time.Duration

	// PoolSize is the most connections the client keeps open at once; callers beyond it wait (bounded by their
	// context). Default 10 per GOMAXPROCS.
	PoolSize int

	// TLSConfig, when set, makes every connection TLS (a rediss:// URL sets it).
	TLSConfig *tls.Config

	// DurableReplicas, when above 0, sends CLIENT DURABILITY REPLICAS n on every connection the client opens, so
	// a lock grant is only answered once that many replicas hold it. A server that refuses the command fails the
	// connection with its error (servers without replication refuse it today).
	DurableReplicas int

	// SentinelAddrs, when set, makes the client find the primary through the Sentinel protocol: it asks each
	// address in turn for SENTINEL get-master-addr-by-name MasterName, confirms with ROLE, and rediscovers on
	// -READONLY, on a lost connection and on +switch-master.
	SentinelAddrs []string
	// MasterName is the service name the sentinels (coordinators) know the primary by.
	MasterName string
	// SentinelUsername and SentinelPassword authenticate to the sentinels (not to the data servers).
	SentinelUsername string
	SentinelPassword string

	// Dialer, when set, opens the TCP connections (for tests, proxies, unix sockets).
	Dialer func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:6379"
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.CommandTimeout == 0 {
		o.CommandTimeout = 5 * time.Second
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 10 * runtime.GOMAXPROCS(0)
	}
	return o
}

func (o Options) validate() error {
	if o.Protocol != 0 && o.Protocol != 2 && o.Protocol != 3 {
		return fmt.Errorf("ruvio: Protocol must be 0, 2 or 3, not %d", o.Protocol)
	}
	if o.DB < 0 {
		return fmt.Errorf("ruvio: DB must not be negative")
	}
	if len(o.SentinelAddrs) > 0 && o.MasterName == "" {
		return fmt.Errorf("ruvio: SentinelAddrs needs MasterName")
	}
	return nil
}

// ParseURL reads a redis:// or rediss:// URL into Options:
//
//	redis://[[username]:password@]host[:port][/db][?protocol=2|3&client_name=n&dial_timeout=5s&command_timeout=1s&pool_size=20&durable_replicas=1]
//	rediss://... (TLS, verifying the server's name)
//
// The port defaults to 6379 and the database to 0.
func ParseURL(raw string) (Options, error) {
	var o Options
	u, err := url.Parse(raw)
	if err != nil {
		return o, fmt.Errorf("ruvio: bad URL: %w", err)
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		o.TLSConfig = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	default:
		return o, fmt.Errorf("ruvio: URL scheme must be redis or rediss, not %q", u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "6379"
	}
	o.Addr = net.JoinHostPort(host, port)
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if o.DB, err = strconv.Atoi(p); err != nil || o.DB < 0 {
			return o, fmt.Errorf("ruvio: bad database %q in URL", p)
		}
	}
	q := u.Query()
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "protocol":
			o.Protocol, err = strconv.Atoi(v)
		case "client_name":
			o.ClientName = v
		case "dial_timeout":
			o.DialTimeout, err = time.ParseDuration(v)
		case "command_timeout":
			o.CommandTimeout, err = time.ParseDuration(v)
		case "pool_size":
			o.PoolSize, err = strconv.Atoi(v)
		case "durable_replicas":
			o.DurableReplicas, err = strconv.Atoi(v)
		case "db":
			o.DB, err = strconv.Atoi(v)
		default:
			return o, fmt.Errorf("ruvio: unknown URL parameter %q", k)
		}
		if err != nil {
			return o, fmt.Errorf("ruvio: bad URL parameter %s=%q: %w", k, v, err)
		}
	}
	return o, o.validate()
}
