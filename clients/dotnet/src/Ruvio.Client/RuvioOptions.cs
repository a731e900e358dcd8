using System.Globalization;
using System.Net;
using Microsoft.Extensions.Logging;

namespace Ruvio;

/// <summary>The RESP protocol version a connection asks for.</summary>
public enum RuvioProtocol
{
    /// <summary>RESP2.</summary>
    Resp2 = 2,
    /// <summary>RESP3 (the default); a server that refuses <c>HELLO 3</c> is spoken to in RESP2.</summary>
    Resp3 = 3,
}

/// <summary>
/// How to connect. Build one in code, or parse a StackExchange.Redis-style connection string with <see cref="Parse"/>:
/// <c>"host:port,user=...,password=...,ssl=false,name=...,defaultDatabase=0,connectTimeout=5000,asyncTimeout=5000"</c>,
/// or its Sentinel form <c>"h1:26379,h2:26379,serviceName=mymaster"</c> (the endpoints are then <c>ruvio coordinator</c>s).
/// </summary>
public sealed class RuvioOptions
{
    /// <summary>
    /// The server's endpoint (the first one answering is used), or with <see cref="ServiceName"/> the coordinators'
    /// endpoints. Default: 127.0.0.1:6379 when empty.
    /// </summary>
    public IList<EndPoint> EndPoints => _endPoints;
    private List<EndPoint> _endPoints = new();

    /// <summary>ACL user name (Ruvio's only user is <c>default</c>).</summary>
    public string? User { get; set; }

    /// <summary>Password: sent with <c>HELLO 3 AUTH</c>, or <c>AUTH</c> on RESP2.</summary>
    public string? Password { get; set; }

    /// <summary>Connect with TLS.</summary>
    public bool Ssl { get; set; }

    /// <summary>The host name the TLS certificate must match (default: the endpoint's host).</summary>
    public string? SslHost { get; set; }

    /// <summary>Connection name (<c>CLIENT SETNAME</c>), shown by <c>CLIENT LIST</c>.</summary>
    public string? ClientName { get; set; }

    /// <summary>Database selected on every connection (<c>SELECT</c>), and the one <see cref="RuvioConnection.GetDefaultDatabaseAsync"/> returns.</summary>
    public int DefaultDatabase { get; set; }

    /// <summary>Time to open a connection and finish its handshake. Default 5 s.</summary>
    public TimeSpan ConnectTimeout { get; set; } = TimeSpan.FromSeconds(5);

    /// <summary>
    /// Time a command may take from the call to its reply (waiting for a reconnect included). Default 5 s.
    /// <c>LEASE</c>/<c>SEMAPHORE</c> with a wait get the wait on top.
    /// </summary>
    public TimeSpan AsyncTimeout { get; set; } = TimeSpan.FromSeconds(5);

    /// <summary>RESP version. Default <see cref="RuvioProtocol.Resp3"/>.</summary>
    public RuvioProtocol Protocol { get; set; } = RuvioProtocol.Resp3;

    /// <summary>
    /// Failover discovery: the service (master) name known to the coordinators in <see cref="EndPoints"/>. The
    /// client asks them <c>SENTINEL get-master-addr-by-name</c>, checks the answer with <c>ROLE</c>, follows
    /// <c>+switch-master</c>, and rediscovers after a lost connection or a <c>-READONLY</c> reply.
    /// </summary>
    public string? ServiceName { get; set; }

    /// <summary>User for the coordinators (when they require one).</summary>
    public string? SentinelUser { get; set; }

    /// <summary>Password for the coordinators (when they require one).</summary>
    public string? SentinelPassword { get; set; }

    /// <summary>
    /// Durable grants: sends <c>CLIENT DURABILITY REPLICAS n</c> on every connection the client opens (dedicated
    /// ones and reconnects included), so the server answers a write only once n replicas hold it on disk. A refusal
    /// fails the connect. Null (default): asynchronous replication.
    /// </summary>
    public int? DurabilityReplicas { get; set; }

    /// <summary>How long a command answered <c>-NOREPLICAS</c> (nothing ran) is sent again. Default 3 s; zero: never.</summary>
    public TimeSpan NoReplicasRetry { get; set; } = TimeSpan.FromSeconds(3);

    /// <summary>Most dedicated connections for blocking commands (<c>LEASE ... WAIT</c>) open at once. Default 64.</summary>
    public int MaxBlockingConnections { get; set; } = 64;

    /// <summary>Idle dedicated connections kept open for reuse. Default 4.</summary>
    public int IdleBlockingConnections { get; set; } = 4;

    /// <summary>Longest pause between reconnect attempts (the pause doubles from 50 ms up to this). Default 2 s.</summary>
    public TimeSpan ReconnectMaxDelay { get; set; } = TimeSpan.FromSeconds(2);

    /// <summary>Throw from ConnectAsync when no server answers (default true, as StackExchange.Redis's <c>abortConnect</c>); false: connect in the background.</summary>
    public bool AbortOnConnectFail { get; set; } = true;

    /// <summary>Optional logging (connects, losses, failovers, lock losses).</summary>
    public ILoggerFactory? LoggerFactory { get; set; }

    /// <summary>A copy (endpoints included).</summary>
    public RuvioOptions Clone()
    {
        var c = (RuvioOptions)MemberwiseClone();
        c._endPoints = new List<EndPoint>(EndPoints);
        return c;
    }

    /// <summary>Parses <c>host:port</c> (IPv6 as <c>[::1]:6379</c>); the port defaults to 6379, or 26379 for a coordinator.</summary>
    public static EndPoint ParseEndPoint(string text, int defaultPort = 6379)
    {
        text = text.Trim();
        string host;
        var port = defaultPort;
        if (text.StartsWith('['))
        {
            var close = text.IndexOf(']');
            if (close < 0) throw new ArgumentException($"invalid endpoint '{text}'");
            host = text[1..close];
            if (close + 1 < text.Length)
            {
                if (text[close + 1] != ':') throw new ArgumentException($"invalid endpoint '{text}'");
                port = ParsePort(text[(close + 2)..], text);
            }
        }
        else
        {
            var colon = text.LastIndexOf(':');
            if (colon >= 0 && text.IndexOf(':') == colon)
            {
                host = text[..colon];
                port = ParsePort(text[(colon + 1)..], text);
            }
            else host = text;
        }
        if (host.Length == 0) throw new ArgumentException($"invalid endpoint '{text}': no host");
        return IPAddress.TryParse(host, out var ip) ? new IPEndPoint(ip, port) : new DnsEndPoint(host, port);
    }

    private static int ParsePort(string s, string whole) =>
        int.TryParse(s, NumberStyles.None, CultureInfo.InvariantCulture, out var p) && p is > 0 and < 65536
            ? p
            : throw new ArgumentException($"invalid port in endpoint '{whole}'");

    /// <summary>
    /// Parses a StackExchange.Redis-style connection string. Known keys (case-insensitive): <c>user</c>,
    /// <c>password</c>, <c>ssl</c>, <c>sslHost</c>, <c>name</c>, <c>defaultDatabase</c>, <c>connectTimeout</c>,
    /// <c>asyncTimeout</c>, <c>syncTimeout</c> (same as asyncTimeout: this client is async only), <c>serviceName</c>,
    /// <c>protocol</c> (<c>resp2</c>/<c>resp3</c>), <c>abortConnect</c>, <c>durabilityReplicas</c>; StackExchange.Redis
    /// keys with no meaning here (<c>allowAdmin</c>, <c>connectRetry</c>, <c>keepAlive</c>, ...) are accepted and
    /// ignored. An unknown key throws <see cref="ArgumentException"/>.
    /// </summary>
    public static RuvioOptions Parse(string connectionString)
    {
        ArgumentNullException.ThrowIfNull(connectionString);
        var o = new RuvioOptions();
        var hosts = new List<string>();
        foreach (var raw in connectionString.Split(','))
        {
            var part = raw.Trim();
            if (part.Length == 0) continue;
            var eq = part.IndexOf('=');
            if (eq < 0)
            {
                hosts.Add(part);
                continue;
            }
            var key = part[..eq].Trim();
            var value = part[(eq + 1)..].Trim();
            switch (key.ToLowerInvariant())
            {
                case "user": o.User = value; break;
                case "password": o.Password = value; break;
                case "ssl": o.Ssl = ParseBool(key, value); break;
                case "sslhost": o.SslHost = value; break;
                case "name": o.ClientName = value; break;
                case "defaultdatabase": o.DefaultDatabase = ParseInt(key, value); break;
                case "connecttimeout": o.ConnectTimeout = TimeSpan.FromMilliseconds(ParseInt(key, value)); break;
                case "asynctimeout":
                case "synctimeout": o.AsyncTimeout = TimeSpan.FromMilliseconds(ParseInt(key, value)); break;
                case "servicename": o.ServiceName = value; break;
                case "abortconnect": o.AbortOnConnectFail = ParseBool(key, value); break;
                case "durabilityreplicas": o.DurabilityReplicas = ParseInt(key, value); break;
                case "protocol":
                    o.Protocol = value.ToLowerInvariant() switch
                    {
                        "resp2" or "2" => RuvioProtocol.Resp2,
                        "resp3" or "3" => RuvioProtocol.Resp3,
                        _ => throw new ArgumentException($"invalid protocol '{value}' (resp2 or resp3)"),
                    };
                    break;
                case "allowadmin": case "connectretry": case "keepalive": case "tiebreaker": case "configchannel":
                case "version": case "resolvedns": case "channelprefix": case "checkcertificaterevocation":
                case "configcheckseconds": case "responsetimeout": case "highprioritysocketthreads": case "setlib":
                case "sslprotocols": case "proxy": case "heartbeatinterval":
                    break;
                default:
                    throw new ArgumentException($"unknown connection string key '{key}'");
            }
        }
        var defaultPort = o.ServiceName is null ? 6379 : 26379;
        foreach (var h in hosts) o.EndPoints.Add(ParseEndPoint(h, defaultPort));
        return o;
    }

    private static int ParseInt(string key, string value) =>
        int.TryParse(value, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out var n) && n >= 0
            ? n
            : throw new ArgumentException($"invalid value '{value}' for '{key}': a non-negative integer is expected");

    private static bool ParseBool(string key, string value) =>
        bool.TryParse(value, out var b) ? b : throw new ArgumentException($"invalid value '{value}' for '{key}': true or false is expected");

    internal void Validate()
    {
        if (ConnectTimeout <= TimeSpan.Zero) throw new ArgumentException("ConnectTimeout must be positive");
        if (AsyncTimeout <= TimeSpan.Zero) throw new ArgumentException("AsyncTimeout must be positive");
        if (DurabilityReplicas is < 0) throw new ArgumentException("DurabilityReplicas must be 0 or more");
        if (MaxBlockingConnections < 1) throw new ArgumentException("MaxBlockingConnections must be at least 1");
        if (ServiceName is not null && EndPoints.Count == 0) throw new ArgumentException("serviceName needs the coordinators' endpoints");
    }
}
