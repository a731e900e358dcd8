using System.Diagnostics;

namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// <see cref="IRuvioLocks"/> on the client's lock helper (<see cref="RuvioDatabase.TryAcquireLockAsync"/>), which
/// sends <c>LEASE key ttl WAIT ms</c> (or <c>SEMAPHORE</c>) on a dedicated connection, renews at a third of the lease
/// and fires <see cref="IRuvioLock.LockLost"/> before the server's deadline.
/// </summary>
internal sealed class RuvioLocks : IRuvioLocks
{
    /// <summary>
    /// An unlimited wait is sent as waits of this length, one after the other: a wait without a timeout
    /// (<c>WAIT 0</c>) on a connection that silently died would never end, while a bounded one ends with the
    /// client's timeout and is sent again. Only an unlimited waiter loses its place in the queue, once a minute.
    /// </summary>
    internal static readonly TimeSpan UnlimitedWaitSlice = TimeSpan.FromSeconds(60);

    private readonly RuvioConnectionProvider _connection;
    private readonly RuvioDistributedLockOptions _options;
    private readonly ILogger _logger;

    public RuvioLocks(RuvioConnectionProvider connection, IOptions<RuvioDistributedLockOptions> options, ILoggerFactory loggerFactory)
    {
        _connection = connection;
        _options = options.Value;
        _logger = loggerFactory.CreateLogger("Ruvio.AspNetCore.DistributedLock");
    }

    public string GetKey(string name)
    {
        ArgumentNullException.ThrowIfNull(name);
        return _options.KeyPrefix + name;
    }

    public Task<RuvioDatabase> GetDatabaseAsync(CancellationToken cancellationToken = default) => _connection.GetDatabaseAsync(cancellationToken);

    public Task<IRuvioLock?> TryAcquireAsync(string name, TimeSpan? lease = null, TimeSpan wait = default, CancellationToken cancellationToken = default) =>
        TryAcquireCoreAsync(name, null, lease, CheckWait(wait), cancellationToken);

    public Task<IRuvioLock?> TryAcquireSemaphoreAsync(string name, int maxCount, TimeSpan? lease = null, TimeSpan wait = default, CancellationToken cancellationToken = default) =>
        TryAcquireCoreAsync(name, CheckCount(maxCount), lease, CheckWait(wait), cancellationToken);

    public Task<IRuvioLock> AcquireAsync(string name, TimeSpan? lease = null, TimeSpan? timeout = null, CancellationToken cancellationToken = default) =>
        AcquireCoreAsync(name, null, lease, timeout, cancellationToken);

    public Task<IRuvioLock> AcquireSemaphoreAsync(string name, int maxCount, TimeSpan? lease = null, TimeSpan? timeout = null, CancellationToken cancellationToken = default) =>
        AcquireCoreAsync(name, CheckCount(maxCount), lease, timeout, cancellationToken);

    private async Task<IRuvioLock> AcquireCoreAsync(string name, int? maxCount, TimeSpan? lease, TimeSpan? timeout, CancellationToken cancellationToken)
    {
        if (timeout is { } t && t != Timeout.InfiniteTimeSpan)
        {
            return await TryAcquireCoreAsync(name, maxCount, lease, CheckWait(t), cancellationToken).ConfigureAwait(false)
                ?? throw new TimeoutException($"the lock '{GetKey(name)}' was still held by another after {t.TotalMilliseconds:0} ms");
        }
        while (true)
        {
            var held = await TryAcquireCoreAsync(name, maxCount, lease, UnlimitedWaitSlice, cancellationToken).ConfigureAwait(false);
            if (held is not null) return held;
        }
    }

    private async Task<IRuvioLock?> TryAcquireCoreAsync(string name, int? maxCount, TimeSpan? lease, TimeSpan wait, CancellationToken cancellationToken)
    {
        var key = GetKey(name);
        var ttl = lease ?? _options.DefaultLease;
        if (ttl <= TimeSpan.Zero) throw new ArgumentOutOfRangeException(nameof(lease), ttl, "the lease must be positive");
        var db = await _connection.GetDatabaseAsync(cancellationToken).ConfigureAwait(false);
        var started = Stopwatch.GetTimestamp();
        // No wait is no WAIT argument at all: the server reads WAIT 0 as "wait without a timeout". A wait shorter than
        // a millisecond is sent as 1 ms for the same reason.
        var lockOptions = new RuvioLockOptions
        {
            Wait = wait <= TimeSpan.Zero ? null : wait < TimeSpan.FromMilliseconds(1) ? TimeSpan.FromMilliseconds(1) : wait,
            SemaphoreLimit = maxCount,
        };
        var held = await db.TryAcquireLockAsync(key, ttl, lockOptions, cancellationToken).ConfigureAwait(false);
        if (held is null) Log.LockBusy(_logger, key, (long)Stopwatch.GetElapsedTime(started).TotalMilliseconds);
        else Log.LockAcquired(_logger, key, held.Token);
        return held;
    }

    private static TimeSpan CheckWait(TimeSpan wait) =>
        wait >= TimeSpan.Zero ? wait : throw new ArgumentOutOfRangeException(nameof(wait), wait, "the wait cannot be negative");

    private static int CheckCount(int maxCount) =>
        maxCount >= 1 ? maxCount : throw new ArgumentOutOfRangeException(nameof(maxCount), maxCount, "a semaphore has at least one slot");
}
