using System.Globalization;
using System.Net;
using Microsoft.Extensions.Logging;

namespace Ruvio;

/// <summary>
/// Failover discovery through <c>ruvio coordinator</c> (the Sentinel protocol): asks the coordinators for the
/// primary's address (<c>SENTINEL get-master-addr-by-name</c>), the coordinator that answered first is asked first
/// next time, and one subscription to <c>+switch-master</c> moves the client to a new primary as soon as one is
/// announced (without waiting for the old connection to time out).
/// </summary>
internal sealed class SentinelWatcher : IAsyncDisposable
{
    private readonly RuvioConnection _owner;
    private readonly RuvioOptions _options;
    private readonly ILogger _log;
    private readonly List<EndPoint> _coordinators;
    private readonly CancellationTokenSource _stop = new();
    private PhysicalConnection? _subscription;
    private readonly object _sync = new();

    public SentinelWatcher(RuvioConnection owner, RuvioOptions options, ILogger log)
    {
        _owner = owner;
        _options = options;
        _log = log;
        _coordinators = new List<EndPoint>(options.EndPoints);
    }

    private EndPoint[] Snapshot()
    {
        lock (_sync) return _coordinators.ToArray();
    }

    private void Prefer(EndPoint ep)
    {
        lock (_sync)
        {
            _coordinators.Remove(ep);
            _coordinators.Insert(0, ep);
        }
    }

    /// <summary>Asks the coordinators in turn; the first that knows the service gives the primary.</summary>
    public async Task<EndPoint> DiscoverAsync(CancellationToken ct)
    {
        var errors = new List<string>();
        foreach (var coordinator in Snapshot())
        {
            try
            {
                await using var conn = await PhysicalConnection.OpenAsync(coordinator, _options, PhysicalConnection.HandshakeKind.Coordinator, ct).ConfigureAwait(false);
                var reply = await conn.SendAsync("SENTINEL", ["get-master-addr-by-name", _options.ServiceName!], _options.ConnectTimeout, ct).ConfigureAwait(false);
                if (reply.IsNull || reply.Items.Count != 2)
                {
                    errors.Add($"{PhysicalConnection.Format(coordinator)}: does not know '{_options.ServiceName}'");
                    continue;
                }
                var host = reply.Items[0].AsString()!;
                var port = int.Parse(reply.Items[1].AsString()!, CultureInfo.InvariantCulture);
                Prefer(coordinator);
                return RuvioOptions.ParseEndPoint(host.Contains(':') ? $"[{host}]" : host, port);
            }
            catch (Exception e) when (e is RuvioException or FormatException or OverflowException)
            {
                errors.Add($"{PhysicalConnection.Format(coordinator)}: {e.Message}");
            }
        }
        throw new RuvioConnectionException($"no coordinator gave the primary of '{_options.ServiceName}': {string.Join("; ", errors)}");
    }

    public void Start() => _ = WatchAsync();

    // Keeps one subscription to +switch-master open (moving to the next coordinator when one fails).
    private async Task WatchAsync()
    {
        var delay = TimeSpan.FromMilliseconds(100);
        while (!_stop.IsCancellationRequested)
        {
            foreach (var coordinator in Snapshot())
            {
                if (_stop.IsCancellationRequested) return;
                PhysicalConnection? conn = null;
                try
                {
                    conn = await PhysicalConnection.OpenAsync(coordinator, _options, PhysicalConnection.HandshakeKind.Coordinator, _stop.Token).ConfigureAwait(false);
                    conn.SubscriberMode = true;
                    conn.OnPush = OnMessage;
                    lock (_sync) _subscription = conn;
                    await conn.SendAsync("SUBSCRIBE", ["+switch-master"], _options.ConnectTimeout, _stop.Token).ConfigureAwait(false);
                    delay = TimeSpan.FromMilliseconds(100);
                    // A switch may have happened while no subscription was open: check once now that one is.
                    var now = await DiscoverAsync(_stop.Token).ConfigureAwait(false);
                    var primary = _owner.Primary;
                    if (primary is not null && !SameEndPoint(primary, now)) _owner.Rediscover($"the coordinators name {PhysicalConnection.Format(now)} as primary");
                    await conn.Closed.WaitAsync(_stop.Token).ConfigureAwait(false);
                }
                catch (OperationCanceledException) when (_stop.IsCancellationRequested)
                {
                    if (conn is not null) await conn.DisposeAsync().ConfigureAwait(false);
                    return;
                }
                catch (Exception e)
                {
                    _log.LogDebug("Ruvio: +switch-master subscription to {Coordinator} failed: {Reason}", PhysicalConnection.Format(coordinator), e.Message);
                }
                if (conn is not null) await conn.DisposeAsync().ConfigureAwait(false);
            }
            try { await Task.Delay(delay, _stop.Token).ConfigureAwait(false); }
            catch (OperationCanceledException) { return; }
            delay = TimeSpan.FromTicks(Math.Min(delay.Ticks * 2, _options.ReconnectMaxDelay.Ticks));
        }
    }

    // "message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>" (RESP2 array or RESP3 push)
    private void OnMessage(RuvioResult msg)
    {
        var items = msg.Items;
        if (items.Count < 3 || items[0].AsString() != "message" || items[1].AsString() != "+switch-master") return;
        var parts = (items[2].AsString() ?? "").Split(' ');
        if (parts.Length != 5 || parts[0] != _options.ServiceName) return;
        if (!int.TryParse(parts[4], NumberStyles.None, CultureInfo.InvariantCulture, out var port)) return;
        EndPoint ep;
        try { ep = RuvioOptions.ParseEndPoint(parts[3].Contains(':') ? $"[{parts[3]}]" : parts[3], port); }
        catch (ArgumentException) { return; }
        var primary = _owner.Primary;
        if (primary is null || !SameEndPoint(primary, ep))
            _owner.Rediscover($"+switch-master to {PhysicalConnection.Format(ep)}");
    }

    internal static bool SameEndPoint(EndPoint a, EndPoint b) =>
        string.Equals(PhysicalConnection.Format(a), PhysicalConnection.Format(b), StringComparison.OrdinalIgnoreCase);

    public async ValueTask DisposeAsync()
    {
        _stop.Cancel();
        PhysicalConnection? s;
        lock (_sync) s = _subscription;
        if (s is not null) await s.DisposeAsync().ConfigureAwait(false);
    }
}
