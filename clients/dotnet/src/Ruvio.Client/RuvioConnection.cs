using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Net;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Logging.Abstractions;

namespace Ruvio;

/// <summary>Arguments of <see cref="RuvioConnection.ConnectionFailed"/> and <see cref="RuvioConnection.ConnectionRestored"/>.</summary>
public sealed class RuvioConnectionEventArgs : EventArgs
{
    internal RuvioConnectionEventArgs(EndPoint endPoint, Exception? exception)
    {
        EndPoint = endPoint;
        Exception = exception;
    }

    /// <summary>The server's endpoint.</summary>
    public EndPoint EndPoint { get; }

    /// <summary>Why the connection failed (null for a restore).</summary>
    public Exception? Exception { get; }
}

/// <summary>Arguments of <see cref="RuvioConnection.PrimaryChanged"/>.</summary>
public sealed class RuvioPrimaryChangedEventArgs : EventArgs
{
    internal RuvioPrimaryChangedEventArgs(EndPoint? oldPrimary, EndPoint newPrimary)
    {
        OldPrimary = oldPrimary;
        NewPrimary = newPrimary;
    }

    /// <summary>The previous primary (null if none was known).</summary>
    public EndPoint? OldPrimary { get; }

    /// <summary>The primary the client now talks to.</summary>
    public EndPoint NewPrimary { get; }
}

/// <summary>
/// A connection to Ruvio, thread-safe and meant to be shared by the whole application (as StackExchange.Redis's
/// <c>ConnectionMultiplexer</c>): one multiplexed, pipelined connection carries every ordinary command, and a small
/// pool of dedicated connections carries blocking ones (<c>LEASE ... WAIT</c>, <c>SEMAPHORE ... WAIT</c>) so they
/// never hold up other callers. Reconnects by itself after a loss, and with <see cref="RuvioOptions.ServiceName"/>
/// follows failovers announced by <c>ruvio coordinator</c>. Dispose it with <c>await using</c>.
/// </summary>
public sealed class RuvioConnection : IAsyncDisposable
{
    private readonly RuvioOptions _options;
    private readonly ILogger _log;
    private readonly CancellationTokenSource _shutdown = new();
    private readonly object _stateLock = new();
    private PhysicalConnection? _current;
    private TaskCompletionSource<PhysicalConnection> _ready = NewReady();
    private bool _reconnecting;
    private EndPoint? _primary;
    private int _primaryGeneration;
    private Exception? _lastError;
    private readonly RuvioDatabase _db;
    private readonly SemaphoreSlim _blockingSlots;
    private readonly ConcurrentBag<(PhysicalConnection conn, int generation)> _idleBlocking = new();
    private int _idleCount;
    private readonly SentinelWatcher? _sentinel;
    private int _disposed;

    /// <summary>Raised when the connection to the server is lost (commands wait for the reconnect, up to their timeout).</summary>
    public event EventHandler<RuvioConnectionEventArgs>? ConnectionFailed;

    /// <summary>Raised when the connection is restored after a loss.</summary>
    public event EventHandler<RuvioConnectionEventArgs>? ConnectionRestored;

    /// <summary>Raised when the client starts talking to another primary (after a failover found through the coordinators).</summary>
    public event EventHandler<RuvioPrimaryChangedEventArgs>? PrimaryChanged;

    private RuvioConnection(RuvioOptions options)
    {
        _options = options;
        _log = (options.LoggerFactory ?? NullLoggerFactory.Instance).CreateLogger("Ruvio.Client");
        _db = new RuvioDatabase(this, options.DefaultDatabase);
        _blockingSlots = new SemaphoreSlim(options.MaxBlockingConnections, options.MaxBlockingConnections);
        if (options.ServiceName is not null) _sentinel = new SentinelWatcher(this, options, _log);
    }

    private static TaskCompletionSource<PhysicalConnection> NewReady() => new(TaskCreationOptions.RunContinuationsAsynchronously);

    /// <summary>The options in use (a copy of those given).</summary>
    public RuvioOptions Options => _options;

    /// <summary>The endpoint of the server the client talks to now (null while none is connected).</summary>
    public EndPoint? CurrentEndPoint => Volatile.Read(ref _current) is { IsClosed: false } c ? c.EndPoint : null;

    /// <summary>True while the multiplexed connection is open.</summary>
    public bool IsConnected => Volatile.Read(ref _current) is { IsClosed: false };

    /// <summary>The RESP version of the multiplexed connection (3, or 2 after a fallback).</summary>
    public int Protocol => Volatile.Read(ref _current)?.Protocol ?? (int)_options.Protocol;

    internal ILogger Logger => _log;

    /// <summary>Connects to <paramref name="host"/>:<paramref name="port"/> with default options.</summary>
    public static Task<RuvioConnection> ConnectAsync(string host, int port, CancellationToken cancellationToken = default)
    {
        var o = new RuvioOptions();
        o.EndPoints.Add(RuvioOptions.ParseEndPoint(host.Contains(':') && !host.StartsWith('[') ? $"[{host}]" : host, port));
        return ConnectAsync(o, cancellationToken);
    }

    /// <summary>Connects with a StackExchange.Redis-style connection string (see <see cref="RuvioOptions.Parse"/>).</summary>
    public static Task<RuvioConnection> ConnectAsync(string connectionString, CancellationToken cancellationToken = default) =>
        ConnectAsync(RuvioOptions.Parse(connectionString), cancellationToken);

    /// <summary>Connects with <paramref name="options"/> (copied: later changes have no effect).</summary>
    public static async Task<RuvioConnection> ConnectAsync(RuvioOptions options, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(options);
        var o = options.Clone();
        if (o.EndPoints.Count == 0) o.EndPoints.Add(new IPEndPoint(IPAddress.Loopback, 6379));
        o.Validate();
        var c = new RuvioConnection(o);
        try
        {
            var (conn, ep) = await c.OpenPrimaryAsync(cancellationToken).ConfigureAwait(false);
            c.Install(conn, ep, restored: false);
        }
        catch (Exception e) when (!o.AbortOnConnectFail && e is RuvioException)
        {
            c._lastError = e;
            c.StartReconnect(null);
        }
        catch
        {
            await c.DisposeAsync().ConfigureAwait(false);
            throw;
        }
        c._sentinel?.Start();
        return c;
    }

    /// <summary>The database of <see cref="RuvioOptions.DefaultDatabase"/> (cheap; the same object every time).</summary>
    public Task<RuvioDatabase> GetDefaultDatabaseAsync() => Task.FromResult(_db);

    /// <summary>The database of <see cref="RuvioOptions.DefaultDatabase"/>.</summary>
    public RuvioDatabase GetDatabase() => _db;

    // ---- the multiplexed connection ----------------------------------------------------------------------------

    private async Task<(PhysicalConnection, EndPoint)> OpenPrimaryAsync(CancellationToken ct)
    {
        if (_sentinel is not null)
        {
            var ep = await _sentinel.DiscoverAsync(ct).ConfigureAwait(false);
            var conn = await OpenServerAsync(ep, ct).ConfigureAwait(false);
            return (conn, ep);
        }
        Exception? last = null;
        foreach (var ep in _options.EndPoints)
        {
            try
            {
                return (await OpenServerAsync(ep, ct).ConfigureAwait(false), ep);
            }
            catch (RuvioException e)
            {
                last = e;
                if (e is RuvioServerException) throw; // the server answered: a wrong password will not get better elsewhere
            }
        }
        throw last ?? new RuvioConnectionException("no endpoint configured");
    }

    /// <summary>Opens a connection to a server and checks, when discovery is on, that it is a primary.</summary>
    private async Task<PhysicalConnection> OpenServerAsync(EndPoint ep, CancellationToken ct)
    {
        var conn = await PhysicalConnection.OpenAsync(ep, _options, PhysicalConnection.HandshakeKind.Server, ct).ConfigureAwait(false);
        if (_sentinel is not null)
        {
            try
            {
                var role = await conn.SendAsync("ROLE", [], _options.ConnectTimeout, ct).ConfigureAwait(false);
                var first = role.Items.Count > 0 ? role.Items[0].AsString() : null;
                if (first != "master")
                    throw new RuvioConnectionException($"{PhysicalConnection.Format(ep)} is not a primary (ROLE says {first}); the coordinators' answer is stale");
            }
            catch
            {
                await conn.DisposeAsync().ConfigureAwait(false);
                throw;
            }
        }
        return conn;
    }

    private void Install(PhysicalConnection conn, EndPoint ep, bool restored)
    {
        EndPoint? old;
        bool changed;
        lock (_stateLock)
        {
            if (_disposed != 0)
            {
                _ = conn.DisposeAsync();
                return;
            }
            old = _primary;
            changed = old is not null && !old.Equals(ep);
            _primary = ep;
            if (changed) _primaryGeneration++;
            _current = conn;
            _reconnecting = false;
            conn.Failed = OnConnectionFailed;
            _ready.TrySetResult(conn);
        }
        if (conn.IsClosed) OnConnectionFailed(conn, new RuvioConnectionException("the connection closed during setup"));
        _log.LogInformation("Ruvio: connected to {EndPoint} (RESP{Protocol})", conn.Description, conn.Protocol);
        if (changed)
        {
            DrainIdleBlocking();
            _log.LogWarning("Ruvio: the primary is now {New} (was {Old})", conn.Description, old is null ? "?" : PhysicalConnection.Format(old));
            Raise(() => PrimaryChanged?.Invoke(this, new RuvioPrimaryChangedEventArgs(old, ep)));
        }
        if (restored)
        {
            RuvioDiagnostics.Reconnects.Add(1);
            Raise(() => ConnectionRestored?.Invoke(this, new RuvioConnectionEventArgs(ep, null)));
        }
    }

    private static void Raise(Action a) => ThreadPool.UnsafeQueueUserWorkItem(static s =>
    {
        try { ((Action)s!)(); } catch { /* a throwing event handler must not break the client */ }
    }, a);

    private void OnConnectionFailed(PhysicalConnection conn, Exception reason)
    {
        lock (_stateLock)
        {
            if (!ReferenceEquals(_current, conn) || _disposed != 0) return;
            _current = null;
            _lastError = reason;
        }
        _log.LogWarning("Ruvio: lost the connection to {EndPoint}: {Reason}", conn.Description, reason.Message);
        Raise(() => ConnectionFailed?.Invoke(this, new RuvioConnectionEventArgs(conn.EndPoint, reason)));
        StartReconnect(conn.EndPoint);
    }

    private void StartReconnect(EndPoint? lost)
    {
        lock (_stateLock)
        {
            if (_reconnecting || _disposed != 0) return;
            _reconnecting = true;
            if (_ready.Task.IsCompleted) _ready = NewReady();
        }
        _ = ReconnectLoopAsync(lost);
    }

    private async Task ReconnectLoopAsync(EndPoint? lost)
    {
        var delay = TimeSpan.FromMilliseconds(50);
        var first = true;
        while (!_shutdown.IsCancellationRequested)
        {
            if (!first)
            {
                try { await Task.Delay(delay, _shutdown.Token).ConfigureAwait(false); }
                catch (OperationCanceledException) { return; }
                delay = TimeSpan.FromTicks(Math.Min(delay.Ticks * 2, _options.ReconnectMaxDelay.Ticks));
            }
            first = false;
            try
            {
                var (conn, ep) = await OpenPrimaryAsync(_shutdown.Token).ConfigureAwait(false);
                Install(conn, ep, restored: true);
                return;
            }
            catch (OperationCanceledException) when (_shutdown.IsCancellationRequested)
            {
                return;
            }
            catch (Exception e)
            {
                _lastError = e;
                _log.LogDebug("Ruvio: reconnect failed: {Reason}", e.Message);
            }
        }
    }

    /// <summary>Drops the current connection so that the next command rediscovers the primary (after <c>-READONLY</c> or <c>+switch-master</c>).</summary>
    internal void Rediscover(string why)
    {
        PhysicalConnection? c;
        lock (_stateLock) c = _current;
        if (c is null) return;
        _log.LogWarning("Ruvio: rediscovering the primary: {Why}", why);
        // Fail() of the physical connection runs OnConnectionFailed, which starts the reconnect (and discovery).
        c.Failed = null;
        _ = c.DisposeAsync();
        OnConnectionFailed(c, new RuvioConnectionException($"rediscovering the primary: {why}", true));
    }

    internal EndPoint? Primary => Volatile.Read(ref _primary);

    private async ValueTask<PhysicalConnection> GetConnectedAsync(long deadline, CancellationToken ct)
    {
        var c = Volatile.Read(ref _current);
        if (c is not null && !c.IsClosed) return c;
        if (_disposed != 0) throw new ObjectDisposedException(nameof(RuvioConnection));
        Task<PhysicalConnection> ready;
        lock (_stateLock) ready = _ready.Task;
        var remaining = RemainingOf(deadline);
        if (remaining <= TimeSpan.Zero) throw NotConnected();
        try
        {
            return await ready.WaitAsync(remaining, ct).ConfigureAwait(false);
        }
        catch (TimeoutException)
        {
            throw NotConnected();
        }
    }

    private RuvioConnectionException NotConnected() =>
        new($"not connected to Ruvio ({(_lastError?.Message ?? "connecting")}); the command was not sent", false, _lastError);

    internal static long DeadlineAfter(TimeSpan t) =>
        t == Timeout.InfiniteTimeSpan ? long.MaxValue : Stopwatch.GetTimestamp() + (long)(t.TotalSeconds * Stopwatch.Frequency);

    internal static TimeSpan RemainingOf(long deadline) =>
        deadline == long.MaxValue ? Timeout.InfiniteTimeSpan : TimeSpan.FromSeconds((double)(deadline - Stopwatch.GetTimestamp()) / Stopwatch.Frequency);

    /// <summary>What may be sent again after a failure.</summary>
    internal enum Retry
    {
        /// <summary>Resend only what never left the client (and -NOREPLICAS, -READONLY: nothing ran).</summary>
        Normal,
        /// <summary>LEASE/SEMAPHORE: never resent once written; a grant may exist.</summary>
        Grant,
        /// <summary>RENEW/RELEASE: carry the token, safe to resend after an unknown fate.</summary>
        Idempotent,
    }

    /// <summary>Sends a command on the multiplexed connection with the retry rules of <paramref name="retry"/>.</summary>
    internal async Task<RuvioResult> ExecuteAsync(string command, object?[] args, Retry retry, TimeSpan timeout, CancellationToken ct)
    {
        ObjectDisposedException.ThrowIf(_disposed != 0, this);
        using var activity = RuvioDiagnostics.ActivitySource.HasListeners() ? StartActivity(command) : null;
        var deadline = DeadlineAfter(timeout);
        var noReplicasUntil = DeadlineAfter(_options.NoReplicasRetry);
        var resent = 0;
        var rediscovered = false;
        while (true)
        {
            var conn = await GetConnectedAsync(deadline, ct).ConfigureAwait(false);
            try
            {
                RuvioDiagnostics.Commands.Add(1, new KeyValuePair<string, object?>("command", command));
                var remaining = RemainingOf(deadline);
                if (remaining != Timeout.InfiniteTimeSpan && remaining <= TimeSpan.Zero) throw new RuvioTimeoutException($"{command} timed out before it was sent", false) { Command = command };
                var reply = await conn.SendAsync(command, args, remaining, ct).ConfigureAwait(false);
                Recorder.Value?.Add((command, args, reply));
                return reply;
            }
            catch (RuvioConnectionException e) when (!e.FateUnknown && !ct.IsCancellationRequested && RemainingOf(deadline) > TimeSpan.Zero && _disposed == 0)
            {
                // Never left the client: safe to send on the next connection.
            }
            catch (RuvioConnectionException e) when (e.FateUnknown && retry == Retry.Idempotent && resent++ < 2 && RemainingOf(deadline) > TimeSpan.Zero && _disposed == 0)
            {
                // RENEW/RELEASE carry the token: running twice changes nothing.
            }
            catch (RuvioServerException e) when (e.Code == "NOREPLICAS" && Stopwatch.GetTimestamp() < noReplicasUntil && RemainingOf(deadline) > TimeSpan.Zero)
            {
                // Refused before it ran: a replica may be reconnecting. Try again shortly.
                await Task.Delay(100, ct).ConfigureAwait(false);
            }
            catch (RuvioServerException e) when (e.Code == "READONLY" && _sentinel is not null && !rediscovered && RemainingOf(deadline) > TimeSpan.Zero)
            {
                // Nothing ran: the node we talk to is a replica now. Find the primary and send it there.
                rediscovered = true;
                if (ReferenceEquals(Volatile.Read(ref _current), conn)) Rediscover("-READONLY reply");
            }
            catch (Exception e) when (activity is not null)
            {
                activity.SetStatus(ActivityStatusCode.Error, e.Message);
                throw;
            }
        }
    }

    private static Activity? StartActivity(string command)
    {
        var a = RuvioDiagnostics.ActivitySource.StartActivity(command, ActivityKind.Client);
        a?.SetTag("db.system", "redis");
        a?.SetTag("db.operation.name", command);
        return a;
    }

    // ---- dedicated connections for blocking commands --------------------------------------------------------------

    /// <summary>
    /// Sends a blocking command on a dedicated connection (opened or taken from the idle pool). Such a command is never
    /// sent twice: it is a grant. The connection is closed after any failure or cancellation (the server then drops the
    /// waiter), and kept for reuse after a reply.
    /// </summary>
    internal async Task<RuvioResult> ExecuteBlockingAsync(string command, object?[] args, TimeSpan timeout, CancellationToken ct)
    {
        ObjectDisposedException.ThrowIf(_disposed != 0, this);
        using var activity = RuvioDiagnostics.ActivitySource.HasListeners() ? StartActivity(command) : null;
        var deadline = DeadlineAfter(timeout);
        if (!await _blockingSlots.WaitAsync(RemainingOf(deadline), ct).ConfigureAwait(false))
            throw new RuvioTimeoutException($"{command} waited for a free dedicated connection (MaxBlockingConnections = {_options.MaxBlockingConnections}) longer than its timeout; it was not sent", false) { Command = command };
        PhysicalConnection? conn = null;
        var keep = false;
        try
        {
            int generation;
            (conn, generation) = await TakeBlockingAsync(deadline, ct).ConfigureAwait(false);
            RuvioDiagnostics.Commands.Add(1, new KeyValuePair<string, object?>("command", command));
            var result = await conn.SendAsync(command, args, RemainingOf(deadline), ct).ConfigureAwait(false);
            keep = true;
            ReturnBlocking(conn, generation);
            Recorder.Value?.Add((command, args, result));
            return result;
        }
        catch (RuvioServerException e) when (e.Code == "READONLY" && _sentinel is not null)
        {
            // Nothing ran. Rediscover for the next call; this one reports the error (its wait would start over).
            Rediscover("-READONLY reply on a dedicated connection");
            throw;
        }
        finally
        {
            if (!keep && conn is not null) await conn.DisposeAsync().ConfigureAwait(false);
            _blockingSlots.Release();
        }
    }

    private async Task<(PhysicalConnection, int)> TakeBlockingAsync(long deadline, CancellationToken ct)
    {
        var generation = Volatile.Read(ref _primaryGeneration);
        while (_idleBlocking.TryTake(out var idle))
        {
            Interlocked.Decrement(ref _idleCount);
            if (!idle.conn.IsClosed && idle.generation == generation) return idle;
            await idle.conn.DisposeAsync().ConfigureAwait(false);
        }
        // Open to the primary the multiplexed connection uses (waiting for a reconnect if there is none).
        var main = await GetConnectedAsync(deadline, ct).ConfigureAwait(false);
        using var cts = CancellationTokenSource.CreateLinkedTokenSource(ct);
        var remaining = RemainingOf(deadline);
        if (remaining != Timeout.InfiniteTimeSpan) cts.CancelAfter(remaining > TimeSpan.Zero ? remaining : TimeSpan.Zero);
        try
        {
            return (await OpenServerAsync(main.EndPoint, cts.Token).ConfigureAwait(false), generation);
        }
        catch (OperationCanceledException) when (!ct.IsCancellationRequested)
        {
            throw new RuvioTimeoutException("could not open a dedicated connection within the command's timeout; the command was not sent", false);
        }
    }

    private void ReturnBlocking(PhysicalConnection conn, int generation)
    {
        if (_disposed == 0 && !conn.IsClosed && generation == Volatile.Read(ref _primaryGeneration)
            && Interlocked.Increment(ref _idleCount) <= _options.IdleBlockingConnections)
        {
            _idleBlocking.Add((conn, generation));
            return;
        }
        if (!conn.IsClosed) Interlocked.Decrement(ref _idleCount);
        _ = conn.DisposeAsync();
    }

    private void DrainIdleBlocking()
    {
        while (_idleBlocking.TryTake(out var idle))
        {
            Interlocked.Decrement(ref _idleCount);
            _ = idle.conn.DisposeAsync();
        }
    }

    /// <summary>
    /// Closes every connection. Commands in flight fail with <see cref="RuvioConnectionException"/>; held locks are
    /// not released (they expire at their TTL; release them first).
    /// </summary>
    public async ValueTask DisposeAsync()
    {
        if (Interlocked.Exchange(ref _disposed, 1) != 0) return;
        _shutdown.Cancel();
        PhysicalConnection? c;
        lock (_stateLock)
        {
            c = _current;
            _current = null;
            _ready.TrySetException(new ObjectDisposedException(nameof(RuvioConnection)));
        }
        if (c is not null)
        {
            c.Failed = null;
            await c.DisposeAsync().ConfigureAwait(false);
        }
        DrainIdleBlocking();
        if (_sentinel is not null) await _sentinel.DisposeAsync().ConfigureAwait(false);
    }

    /// <summary>
    /// Test seam (internal): the snippet tests run the product post's code verbatim and check the replies it got
    /// through this recorder, which follows the test's async flow only.
    /// </summary>
    internal static readonly AsyncLocal<List<(string Command, object?[] Args, RuvioResult Reply)>?> Recorder = new();

    internal static string FormatMs(TimeSpan t) => ((long)t.TotalMilliseconds).ToString(CultureInfo.InvariantCulture);
}
