using System.Diagnostics;

namespace Ruvio;

/// <summary>One holder of a lock, as <see cref="RuvioDatabase.LockInfoAsync"/> describes it.</summary>
/// <param name="Token">The holder's fencing token.</param>
/// <param name="RemainingMs">Milliseconds until its lease ends.</param>
public sealed record RuvioLockHolder(long Token, long RemainingMs);

/// <summary>What <c>LOCKINFO</c> says about a lock.</summary>
/// <param name="Kind"><c>lease</c> or <c>semaphore</c>.</param>
/// <param name="Limit">Slots (1 for a lease).</param>
/// <param name="Holders">The holders, in grant order.</param>
/// <param name="Waiters">Clients waiting in the server's queue.</param>
public sealed record RuvioLockInfo(string Kind, long Limit, IReadOnlyList<RuvioLockHolder> Holders, long Waiters);

/// <summary>
/// Typed commands against one database of a <see cref="RuvioConnection"/>. Cheap and thread-safe: get it once with
/// <see cref="RuvioConnection.GetDefaultDatabaseAsync"/> and share it.
/// </summary>
/// <remarks>
/// Retry rules: a <c>LEASE</c>/<c>SEMAPHORE</c> that was written is never sent again (its exception has
/// <see cref="RuvioException.FateUnknown"/> set: a grant may exist and will expire at its TTL); <c>RENEW</c> and
/// <c>RELEASE</c> carry the token and are sent again after a lost connection; a <c>-NOREPLICAS</c> reply (nothing ran)
/// is retried for <see cref="RuvioOptions.NoReplicasRetry"/>; <c>-READONLY</c> makes the client rediscover the primary.
/// </remarks>
public sealed class RuvioDatabase
{
    private readonly RuvioConnection _conn;

    internal RuvioDatabase(RuvioConnection conn, int database)
    {
        _conn = conn;
        Database = database;
    }

    /// <summary>The database number.</summary>
    public int Database { get; }

    /// <summary>The connection this database belongs to.</summary>
    public RuvioConnection Connection => _conn;

    private TimeSpan Timeout => _conn.Options.AsyncTimeout;

    private static void CheckKey(string key) => ArgumentNullException.ThrowIfNull(key);

    private static long Ms(TimeSpan t, string name)
    {
        var ms = (long)Math.Ceiling(t.TotalMilliseconds);
        if (ms < 0) throw new ArgumentOutOfRangeException(name, "must not be negative");
        return ms;
    }

    // ---- LEASE ------------------------------------------------------------------------------------------------

    /// <summary><c>LEASE key ttl_ms</c>: the fencing token, or null when someone else holds the lock.</summary>
    public Task<long?> LeaseAsync(string key, long ttlMs, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        return GrantAsync("LEASE", [key, ttlMs], null, cancellationToken);
    }

    /// <summary><c>LEASE key ttl_ms</c> with a <see cref="TimeSpan"/>.</summary>
    public Task<long?> LeaseAsync(string key, TimeSpan ttl, CancellationToken cancellationToken = default) =>
        LeaseAsync(key, Ms(ttl, nameof(ttl)), cancellationToken);

    /// <summary>
    /// <c>LEASE key ttl_ms WAIT timeout_ms</c>: waits up to <paramref name="waitMs"/> in the server's fair queue (on a
    /// dedicated connection); null when the wait ended without a grant.
    /// </summary>
    public Task<long?> LeaseAsync(string key, long ttlMs, long waitMs, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        return GrantAsync("LEASE", [key, ttlMs, "WAIT", waitMs], waitMs, cancellationToken);
    }

    /// <summary><c>LEASE key ttl_ms WAIT timeout_ms</c> with <see cref="TimeSpan"/>s.</summary>
    public Task<long?> LeaseAsync(string key, TimeSpan ttl, TimeSpan wait, CancellationToken cancellationToken = default) =>
        LeaseAsync(key, Ms(ttl, nameof(ttl)), Ms(wait, nameof(wait)), cancellationToken);

    // ---- SEMAPHORE --------------------------------------------------------------------------------------------

    /// <summary><c>SEMAPHORE key limit ttl_ms</c>: the token of a slot, or null when all <paramref name="limit"/> slots are taken.</summary>
    public Task<long?> AcquireSemaphoreAsync(string key, int limit, long ttlMs, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        return GrantAsync("SEMAPHORE", [key, limit, ttlMs], null, cancellationToken);
    }

    /// <summary><c>SEMAPHORE key limit ttl_ms</c> with a <see cref="TimeSpan"/>.</summary>
    public Task<long?> AcquireSemaphoreAsync(string key, int limit, TimeSpan ttl, CancellationToken cancellationToken = default) =>
        AcquireSemaphoreAsync(key, limit, Ms(ttl, nameof(ttl)), cancellationToken);

    /// <summary><c>SEMAPHORE key limit ttl_ms WAIT timeout_ms</c> (on a dedicated connection); null when the wait ended without a slot.</summary>
    public Task<long?> AcquireSemaphoreAsync(string key, int limit, long ttlMs, long waitMs, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        return GrantAsync("SEMAPHORE", [key, limit, ttlMs, "WAIT", waitMs], waitMs, cancellationToken);
    }

    /// <summary><c>SEMAPHORE key limit ttl_ms WAIT timeout_ms</c> with <see cref="TimeSpan"/>s.</summary>
    public Task<long?> AcquireSemaphoreAsync(string key, int limit, TimeSpan ttl, TimeSpan wait, CancellationToken cancellationToken = default) =>
        AcquireSemaphoreAsync(key, limit, Ms(ttl, nameof(ttl)), Ms(wait, nameof(wait)), cancellationToken);

    private async Task<long?> GrantAsync(string command, object?[] args, long? waitMs, CancellationToken ct)
    {
        RuvioResult r;
        if (waitMs is long w)
            r = await _conn.ExecuteBlockingAsync(command, args, Timeout + TimeSpan.FromMilliseconds(w), ct).ConfigureAwait(false);
        else
            r = await _conn.ExecuteAsync(command, args, RuvioConnection.Retry.Grant, Timeout, ct).ConfigureAwait(false);
        if (r.IsNull) return null;
        RuvioDiagnostics.LockGrants.Add(1);
        return r.AsInt64();
    }

    // ---- RENEW / RELEASE / IFGT / LOCKINFO ----------------------------------------------------------------------

    /// <summary><c>RENEW key token ttl_ms</c>: 1 when <paramref name="token"/> holds the lock and its deadline moved, 0 when it no longer holds it.</summary>
    public async Task<long> RenewAsync(string key, long token, long ttlMs, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        var r = await _conn.ExecuteAsync("RENEW", [key, token, ttlMs], RuvioConnection.Retry.Idempotent, Timeout, cancellationToken).ConfigureAwait(false);
        return r.AsInt64();
    }

    /// <summary><c>RENEW key token ttl_ms</c> with a <see cref="TimeSpan"/>.</summary>
    public Task<long> RenewAsync(string key, long token, TimeSpan ttl, CancellationToken cancellationToken = default) =>
        RenewAsync(key, token, Ms(ttl, nameof(ttl)), cancellationToken);

    internal async Task<long> RenewForHelperAsync(string key, long token, long ttlMs, TimeSpan timeout, CancellationToken ct)
    {
        // The helper retries by itself, at intervals that fit what is left of the lease: no resend here.
        var r = await _conn.ExecuteAsync("RENEW", [key, token, ttlMs], RuvioConnection.Retry.Normal, timeout, ct).ConfigureAwait(false);
        return r.AsInt64();
    }

    /// <summary><c>RELEASE key token</c>: 1 when released, 0 when <paramref name="token"/> no longer held the lock (nothing changed).</summary>
    public async Task<long> ReleaseAsync(string key, long token, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        var r = await _conn.ExecuteAsync("RELEASE", [key, token], RuvioConnection.Retry.Idempotent, Timeout, cancellationToken).ConfigureAwait(false);
        return r.AsInt64();
    }

    /// <summary>
    /// <c>IFGT key token value [PX ms]</c>, the fenced write: 1 when written (the key's fence is now
    /// <paramref name="token"/>), 0 when a higher token already wrote <paramref name="key"/>.
    /// </summary>
    public Task<long> IfGtAsync(string key, long token, string value, TimeSpan? expiry = null, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(value);
        return IfGtCoreAsync(key, token, value, expiry, cancellationToken);
    }

    /// <summary><c>IFGT key token value [PX ms]</c> with a binary value.</summary>
    public Task<long> IfGtAsync(string key, long token, byte[] value, TimeSpan? expiry = null, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(value);
        return IfGtCoreAsync(key, token, value, expiry, cancellationToken);
    }

    private async Task<long> IfGtCoreAsync(string key, long token, object value, TimeSpan? expiry, CancellationToken ct)
    {
        CheckKey(key);
        object?[] args = expiry is TimeSpan px ? [key, token, value, "PX", Ms(px, nameof(expiry))] : [key, token, value];
        // The same token writing the same value twice leaves the same state: safe to resend.
        var r = await _conn.ExecuteAsync("IFGT", args, RuvioConnection.Retry.Idempotent, Timeout, ct).ConfigureAwait(false);
        return r.AsInt64();
    }

    /// <summary><c>LOCKINFO key</c>: the lock's kind, limit, holders and waiters; null when <paramref name="key"/> does not exist.</summary>
    public async Task<RuvioLockInfo?> LockInfoAsync(string key, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        var r = await _conn.ExecuteAsync("LOCKINFO", [key], RuvioConnection.Retry.Normal, Timeout, cancellationToken).ConfigureAwait(false);
        return r.IsNull ? null : ParseLockInfo(r);
    }

    internal static RuvioLockInfo ParseLockInfo(RuvioResult r)
    {
        string kind = "";
        long limit = 0, waiters = 0;
        var holders = new List<RuvioLockHolder>();
        foreach (var (k, v) in r.Entries)
        {
            switch (k.AsString())
            {
                case "kind": kind = v.AsString() ?? ""; break;
                case "limit": limit = v.AsInt64(); break;
                case "waiters": waiters = v.AsInt64(); break;
                case "holders":
                    foreach (var h in v.Items)
                    {
                        long token = 0, remaining = 0;
                        foreach (var (hk, hv) in h.Entries)
                        {
                            if (hk.AsString() == "token") token = hv.AsInt64();
                            else if (hk.AsString() == "remaining_ms") remaining = hv.AsInt64();
                        }
                        holders.Add(new RuvioLockHolder(token, remaining));
                    }
                    break;
            }
        }
        return new RuvioLockInfo(kind, limit, holders, waiters);
    }

    // ---- anything else ------------------------------------------------------------------------------------------

    /// <summary>
    /// Sends any command and returns its reply, of any RESP2/RESP3 type. An error reply throws
    /// <see cref="RuvioServerException"/>. Every command goes on the shared, multiplexed connection: for
    /// <c>LEASE ... WAIT</c> prefer <see cref="LeaseAsync(string, long, long, CancellationToken)"/>, which waits on a
    /// dedicated connection. The retry rules of the typed methods apply (a written LEASE/SEMAPHORE is never resent).
    /// </summary>
    public Task<RuvioResult> ExecuteAsync(string command, params object[] args) =>
        ExecuteAsync(command, (IReadOnlyList<object>)args, default);

    /// <summary>Sends any command (see <see cref="ExecuteAsync(string, object[])"/>), with a cancellation token.</summary>
    public Task<RuvioResult> ExecuteAsync(string command, IReadOnlyList<object> args, CancellationToken cancellationToken = default)
    {
        ArgumentNullException.ThrowIfNull(command);
        ArgumentNullException.ThrowIfNull(args);
        var array = new object?[args.Count];
        for (var i = 0; i < array.Length; i++) array[i] = args[i];
        var upper = command.ToUpperInvariant();
        var retry = upper switch
        {
            "LEASE" or "SEMAPHORE" => RuvioConnection.Retry.Grant,
            "RENEW" or "RELEASE" => RuvioConnection.Retry.Idempotent,
            _ => RuvioConnection.Retry.Normal,
        };
        // A WAIT extends the timeout by the wait (0: no limit). The command goes on the shared connection as given
        // (CLIENT ID, CLIENT KILL and WAIT then concern the same connection); use the typed methods to wait on a
        // dedicated connection without holding up other callers.
        var timeout = WaitArgument(array) switch
        {
            null => Timeout,
            0 => System.Threading.Timeout.InfiniteTimeSpan,
            long w => Timeout + TimeSpan.FromMilliseconds(w),
        };
        return _conn.ExecuteAsync(command, array, retry, timeout, cancellationToken);
    }

    private static long? WaitArgument(object?[] args)
    {
        for (var i = 0; i + 1 < args.Length; i++)
        {
            if (args[i] is string s && s.Equals("WAIT", StringComparison.OrdinalIgnoreCase))
                return long.TryParse(args[i + 1]?.ToString(), out var w) && w >= 0 ? w : 0;
        }
        return null;
    }

    /// <summary><c>PING</c>: the round-trip time.</summary>
    public async Task<TimeSpan> PingAsync(CancellationToken cancellationToken = default)
    {
        var start = Stopwatch.GetTimestamp();
        await _conn.ExecuteAsync("PING", [], RuvioConnection.Retry.Normal, Timeout, cancellationToken).ConfigureAwait(false);
        return Stopwatch.GetElapsedTime(start);
    }

    // ---- the lock helper ----------------------------------------------------------------------------------------

    /// <summary>
    /// Takes a lock (a lease, or with <see cref="RuvioLockOptions.SemaphoreLimit"/> a semaphore slot) and keeps it:
    /// renews at lease/3 in the background, and cancels <see cref="IRuvioLock.LockLost"/> before the server's
    /// deadline (on a monotonic clock, from a timer thread that does not depend on the thread pool) when it cannot
    /// renew. Null when someone else holds it (after waiting <see cref="RuvioLockOptions.Wait"/>, if given).
    /// </summary>
    /// <param name="key">The lock's key.</param>
    /// <param name="lease">The TTL of each grant and renewal.</param>
    /// <param name="options">Waiting, semaphore slots, renewal period, hold cap, safety margin.</param>
    /// <param name="cancellationToken">Cancels the acquisition (not the held lock).</param>
    public async Task<IRuvioLock?> TryAcquireLockAsync(string key, TimeSpan lease, RuvioLockOptions? options = null, CancellationToken cancellationToken = default)
    {
        CheckKey(key);
        options ??= RuvioLockOptions.Default;
        options.Validate(lease);
        var ttlMs = Ms(lease, nameof(lease));
        if (ttlMs < 1) throw new ArgumentOutOfRangeException(nameof(lease), "must be at least 1 ms");
        var sentAt = Stopwatch.GetTimestamp();
        long? token;
        if (options.SemaphoreLimit is int limit)
            token = options.Wait is TimeSpan w
                ? await AcquireSemaphoreAsync(key, limit, ttlMs, Ms(w, "Wait"), cancellationToken).ConfigureAwait(false)
                : await AcquireSemaphoreAsync(key, limit, ttlMs, cancellationToken).ConfigureAwait(false);
        else
            token = options.Wait is TimeSpan w
                ? await LeaseAsync(key, ttlMs, Ms(w, "Wait"), cancellationToken).ConfigureAwait(false)
                : await LeaseAsync(key, ttlMs, cancellationToken).ConfigureAwait(false);
        if (token is not long t) return null;
        // With WAIT the grant comes later than the send: a deadline counted from the send is on the safe side, but
        // after a wait longer than the lease it is already past, and the lock would be reported lost at once. A
        // RENEW sent now (it answers 1 only while the token holds the lock) gives a recent send to count from.
        if (options.Wait is not null && Stopwatch.GetTimestamp() - sentAt > ttlMs * Stopwatch.Frequency / 3000)
        {
            var renewSentAt = Stopwatch.GetTimestamp();
            try
            {
                if (await RenewAsync(key, t, ttlMs, CancellationToken.None).ConfigureAwait(false) == 1) sentAt = renewSentAt;
            }
            catch (RuvioException)
            {
                // Keep the send's instant: the lock helper reports the loss if no later renewal succeeds.
            }
        }
        return new RuvioLock(this, key, t, ttlMs, sentAt, options);
    }

    /// <summary>
    /// As <see cref="TryAcquireLockAsync"/>, but throws <see cref="RuvioLockNotAcquiredException"/> instead of returning null.
    /// </summary>
    public async Task<IRuvioLock> AcquireLockAsync(string key, TimeSpan lease, RuvioLockOptions? options = null, CancellationToken cancellationToken = default) =>
        await TryAcquireLockAsync(key, lease, options, cancellationToken).ConfigureAwait(false) ?? throw new RuvioLockNotAcquiredException(key);
}
