using System.Diagnostics;
using Microsoft.Extensions.Logging;

namespace Ruvio;

/// <summary>
/// A held lock (a lease or one semaphore slot) from <see cref="RuvioDatabase.TryAcquireLockAsync"/>. It renews itself
/// and signals loss through <see cref="LockLost"/>; <c>await using</c> releases it.
/// </summary>
public interface IRuvioLock : IAsyncDisposable
{
    /// <summary>The lock's key.</summary>
    string Key { get; }

    /// <summary>The fencing token: pass it to the writes the lock protects (e.g. <see cref="RuvioDatabase.IfGtAsync(string, long, string, TimeSpan?, CancellationToken)"/>).</summary>
    long Token { get; }

    /// <summary>
    /// Cancelled when the lock is lost or must be assumed lost: a renewal answered 0, or no renewal succeeded and the
    /// server's deadline minus the safety margin passed (client monotonic clock), or the hold cap was reached. It is
    /// cancelled before the server's deadline, never after; a normal release does not cancel it.
    /// </summary>
    CancellationToken LockLost { get; }

    /// <summary>True once <see cref="LockLost"/> is cancelled.</summary>
    bool IsLost { get; }

    /// <summary>Why the lock was lost (null while held or after a normal release).</summary>
    string? LostReason { get; }

    /// <summary>How long the lock is known to be held for, on the client's monotonic clock (zero once lost or released).</summary>
    TimeSpan Remaining { get; }

    /// <summary>Renews now, besides the background renewals: true while the lock is held.</summary>
    Task<bool> RenewAsync(CancellationToken cancellationToken = default);

    /// <summary>
    /// Stops renewing and sends <c>RELEASE</c> (resent after a lost connection: it carries the token). True when this
    /// call released the lock; false when it had been lost or released already. Never throws for a lost lock.
    /// </summary>
    Task<bool> ReleaseAsync(CancellationToken cancellationToken = default);
}

/// <summary>Options of <see cref="RuvioDatabase.TryAcquireLockAsync"/>.</summary>
public sealed class RuvioLockOptions
{
    internal static readonly RuvioLockOptions Default = new();

    /// <summary>Wait up to this long in the server's fair queue (<c>WAIT</c>). Null (default): do not wait.</summary>
    public TimeSpan? Wait { get; set; }

    /// <summary>Take one of this many slots of a semaphore instead of a single-holder lease.</summary>
    public int? SemaphoreLimit { get; set; }

    /// <summary>Renew in the background (default true). With false, <see cref="IRuvioLock.LockLost"/> still fires before the deadline.</summary>
    public bool AutoRenew { get; set; } = true;

    /// <summary>Renewal period. Default: lease/3.</summary>
    public TimeSpan? RenewEvery { get; set; }

    /// <summary>
    /// Cap on the total hold time, from the acquisition: renewals never extend the lock beyond it, so a stuck process
    /// cannot hold it forever; <see cref="IRuvioLock.LockLost"/> fires as the capped deadline approaches. Default: none.
    /// </summary>
    public TimeSpan? MaxHold { get; set; }

    /// <summary>
    /// How long before the server-side deadline <see cref="IRuvioLock.LockLost"/> fires when no renewal succeeded. The
    /// deadline is counted from when the granting or renewing request was sent. Default: lease/10, at least 250 ms
    /// (or lease/4 if that is less) and at most 1 s.
    /// </summary>
    public TimeSpan? SafetyMargin { get; set; }

    internal void Validate(TimeSpan lease)
    {
        if (lease <= TimeSpan.Zero) throw new ArgumentOutOfRangeException(nameof(lease), "the lease must be positive");
        if (SemaphoreLimit is < 1) throw new ArgumentOutOfRangeException(nameof(SemaphoreLimit), "must be at least 1");
        if (RenewEvery is { } r && r <= TimeSpan.Zero) throw new ArgumentOutOfRangeException(nameof(RenewEvery), "must be positive");
        if (MaxHold is { } m && m <= TimeSpan.Zero) throw new ArgumentOutOfRangeException(nameof(MaxHold), "must be positive");
        if (SafetyMargin is { } s && (s < TimeSpan.Zero || s >= lease)) throw new ArgumentOutOfRangeException(nameof(SafetyMargin), "must be between zero and the lease");
        if (Wait is { } w && w < TimeSpan.Zero) throw new ArgumentOutOfRangeException(nameof(Wait), "must not be negative");
    }
}

/// <summary>Thrown by <see cref="RuvioDatabase.AcquireLockAsync"/> when someone else holds the lock.</summary>
public sealed class RuvioLockNotAcquiredException : RuvioException
{
    /// <summary>Creates the exception.</summary>
    public RuvioLockNotAcquiredException(string key) : base($"lock {key} is held by someone else") => Key = key;

    /// <summary>The lock's key.</summary>
    public string Key { get; }
}

/// <remarks>
/// One entry in <see cref="LockWatchdog"/>'s queue per lock, due at the earlier of the next renewal and the loss
/// instant. The watchdog thread fires the loss itself (a starved pool cannot delay it) and hands a due renewal to the
/// thread pool. So a lock costs no timer, no renewal task and no second cancellation source while it is held, and
/// releasing it costs no cancellation: most helper locks are released long before their first renewal.
/// </remarks>
internal sealed class RuvioLock : IRuvioLock
{
    private readonly RuvioDatabase _db;
    private readonly long _ttlMs;
    private readonly long _capAt;   // Stopwatch ticks; long.MaxValue: no cap
    private readonly long _margin;  // Stopwatch ticks
    private readonly long _period;  // Stopwatch ticks
    private readonly CancellationTokenSource _lost = new();
    private readonly object _sync = new();
    private long _validUntil;       // Stopwatch ticks: sent(last good LEASE/RENEW) + ttl
    private long _renewAt;          // Stopwatch ticks: the next background renewal; long.MaxValue: none due (off, or one in flight)
    // The instant of this lock's live entry in the watchdog's queue; long.MinValue: none (not armed yet, released,
    // or claimed by the watchdog). An entry (lock, at) is live exactly while _armedAt == at: whoever moves _armedAt
    // away from at (a re-arm, a release, the watchdog's claim) makes it void.
    private long _armedAt = long.MinValue;
    private int _state;             // 0 held, 1 lost, 2 released
    private string? _lostReason;

    internal RuvioLock(RuvioDatabase db, string key, long token, long ttlMs, long sentAt, RuvioLockOptions o)
    {
        _db = db;
        Key = key;
        Token = token;
        _ttlMs = ttlMs;
        var f = Stopwatch.Frequency;
        _validUntil = sentAt + ttlMs * f / 1000;
        _capAt = o.MaxHold is { } cap ? sentAt + (long)(cap.TotalSeconds * f) : long.MaxValue;
        if (_validUntil > _capAt) _validUntil = _capAt;
        // Default margin: lease/10, but at least 250 ms (a loaded machine can wake the watchdog that late) unless that
        // is more than a quarter of the lease, and at most 1 s.
        var marginMs = o.SafetyMargin is { } m ? m.TotalMilliseconds : Math.Clamp(ttlMs / 10.0, Math.Min(250, ttlMs / 4.0), 1000);
        _margin = (long)(marginMs * f / 1000);
        _period = o.RenewEvery is { } r ? (long)(r.TotalSeconds * f) : ttlMs * f / 3000;
        _renewAt = o.AutoRenew ? Stopwatch.GetTimestamp() + _period : long.MaxValue;
        LockLost = _lost.Token;
        lock (_sync) Arm();
    }

    public string Key { get; }
    public long Token { get; }
    public CancellationToken LockLost { get; }
    public bool IsLost => Volatile.Read(ref _state) == 1;
    public string? LostReason => _lostReason;

    public TimeSpan Remaining
    {
        get
        {
            if (Volatile.Read(ref _state) != 0) return TimeSpan.Zero;
            var left = Interlocked.Read(ref _validUntil) - _margin - Stopwatch.GetTimestamp();
            return left <= 0 ? TimeSpan.Zero : TimeSpan.FromSeconds((double)left / Stopwatch.Frequency);
        }
    }

    private long LossAt() => Interlocked.Read(ref _validUntil) - _margin;

    /// <summary>(Re)arms the watchdog's entry at the earlier of the loss instant and the next renewal. Under <see cref="_sync"/>.</summary>
    private void Arm()
    {
        var at = Math.Min(LossAt(), Interlocked.Read(ref _renewAt));
        var previous = Interlocked.Exchange(ref _armedAt, at);
        if (previous == at) return; // that entry is live still
        LockWatchdog.Arm(this, at, voidsAnEntry: previous != long.MinValue);
    }

    /// <summary>Voids this lock's entry in the watchdog's queue (a release, a loss): it will never fire.</summary>
    private void Disarm()
    {
        if (Interlocked.Exchange(ref _armedAt, long.MinValue) != long.MinValue) LockWatchdog.Voided();
    }

    /// <summary>The watchdog's claim of a due entry: true when it is still live (then it is no longer).</summary>
    internal bool TryClaim(long at) => Interlocked.CompareExchange(ref _armedAt, long.MinValue, at) == at;

    /// <summary>True while the watchdog's entry (this, <paramref name="at"/>) is live.</summary>
    internal bool IsArmedAt(long at) => Interlocked.Read(ref _armedAt) == at;

    /// <summary>
    /// Called on the watchdog thread when this lock's entry came due (and <see cref="TryClaim"/> succeeded): the loss
    /// instant passed, or a renewal is due.
    /// </summary>
    internal void OnDue()
    {
        if (Stopwatch.GetTimestamp() >= LossAt())
        {
            // Renewals ask for whole milliseconds up to the cap, so the last one ends within a few ms of it.
            var capped = _capAt != long.MaxValue && Interlocked.Read(ref _validUntil) >= _capAt - Stopwatch.Frequency / 200;
            Lose(capped ? "the hold cap (MaxHold) was reached" : "no renewal succeeded before the deadline");
            return;
        }
        lock (_sync)
        {
            if (_state != 0) return;
            // Until this renewal is answered the entry waits for the loss instant only.
            Interlocked.Exchange(ref _renewAt, long.MaxValue);
            Arm();
        }
        // The send and the reply need the pool; the loss signal above does not.
        ThreadPool.UnsafeQueueUserWorkItem(static l => _ = l.RenewOnceAsync(), this, preferLocal: false);
    }

    private void Lose(string why)
    {
        lock (_sync)
        {
            if (_state != 0) return;
            // Counted before IsLost turns true, so whoever sees the loss also sees it in the metric.
            RuvioDiagnostics.LockLosses.Add(1);
            _state = 1;
            _lostReason = why;
        }
        // First the signal: it runs the callbacks registered on LockLost on this thread (the watchdog's, when the
        // deadline fired it). Then stop the renewals and log.
        try { _lost.Cancel(); }
        finally
        {
            Disarm();
            _db.Connection.Logger.LogWarning("Ruvio: lock {Key} (token {Token}) lost: {Why}", Key, Token, why);
        }
    }

    /// <summary>One background renewal; on success or failure it schedules the next one through the watchdog.</summary>
    private async Task RenewOnceAsync()
    {
        var f = Stopwatch.Frequency;
        if (Volatile.Read(ref _state) != 0) return;
        var sentAt = Stopwatch.GetTimestamp();
        var ttl = Math.Min(_ttlMs, _capAt == long.MaxValue ? long.MaxValue : (_capAt - sentAt) * 1000 / f);
        if (ttl < 1) return; // the cap is reached: no more renewals; the watchdog fires before the deadline
        var left = LossAt() - sentAt;
        if (left <= 0) return; // the watchdog fires (or has fired)
        try
        {
            // Not cancelled by a release: a RENEW already written runs anyway, and its reply is ignored then.
            var r = await _db.RenewForHelperAsync(Key, Token, ttl, TimeSpan.FromSeconds((double)left / f), CancellationToken.None).ConfigureAwait(false);
            if (Volatile.Read(ref _state) != 0) return;
            if (r == 1)
            {
                RuvioDiagnostics.LockRenewals.Add(1);
                Extend(sentAt + ttl * f / 1000, Stopwatch.GetTimestamp() + _period);
            }
            else
            {
                Lose("RENEW answered 0: the token no longer holds the lock");
            }
        }
        catch (RuvioServerException e) when (e.Code is not ("READONLY" or "NOREPLICAS" or "LOADING" or "TRYAGAIN"))
        {
            Lose($"RENEW failed: {e.Message}");
        }
        catch (Exception)
        {
            // A timeout, a lost connection, a failover in progress: RENEW carries the token, so try again soon,
            // at intervals that fit what is left before the deadline.
            var now = Stopwatch.GetTimestamp();
            Extend(0, now + Math.Min(_period, Math.Max(f / 100, (LossAt() - now) / 3)));
        }
    }

    /// <summary>Moves the deadline to <paramref name="newValidUntil"/> (if later) and, when given, the next renewal; re-arms.</summary>
    private void Extend(long newValidUntil, long? renewAt = null)
    {
        lock (_sync)
        {
            if (_state != 0) return;
            if (newValidUntil > Interlocked.Read(ref _validUntil)) Interlocked.Exchange(ref _validUntil, newValidUntil);
            if (renewAt is long next) Interlocked.Exchange(ref _renewAt, next);
            Arm();
        }
    }

    public async Task<bool> RenewAsync(CancellationToken cancellationToken = default)
    {
        if (Volatile.Read(ref _state) != 0) return false;
        var f = Stopwatch.Frequency;
        var sentAt = Stopwatch.GetTimestamp();
        var ttl = Math.Min(_ttlMs, _capAt == long.MaxValue ? long.MaxValue : (_capAt - sentAt) * 1000 / f);
        if (ttl < 1) return false;
        var r = await _db.RenewAsync(Key, Token, ttl, cancellationToken).ConfigureAwait(false);
        if (r != 1)
        {
            Lose("RENEW answered 0: the token no longer holds the lock");
            return false;
        }
        Extend(sentAt + ttl * f / 1000);
        return !IsLost;
    }

    public async Task<bool> ReleaseAsync(CancellationToken cancellationToken = default)
    {
        bool wasLost;
        lock (_sync)
        {
            if (_state == 2) return false;
            wasLost = _state == 1;
            _state = 2;
        }
        Disarm(); // the watchdog's entry is now void: no loss, no renewal; it is dropped at the next compaction
        try
        {
            var r = await _db.ReleaseAsync(Key, Token, cancellationToken).ConfigureAwait(false);
            return r == 1 && !wasLost;
        }
        catch (Exception) when (wasLost)
        {
            return false;
        }
    }

    public async ValueTask DisposeAsync()
    {
        try
        {
            await ReleaseAsync().ConfigureAwait(false);
        }
        catch (Exception e) when (e is RuvioException or ObjectDisposedException or OperationCanceledException)
        {
            // Disposal must not throw (the connection may be gone already): an unreleased lock expires at its TTL.
        }
    }
}

/// <summary>
/// Fires lock deadlines and due renewals from one dedicated thread that waits on a monotonic clock: a starved thread
/// pool cannot delay a loss signal (its callbacks run on this thread); renewals are handed to the pool.
/// </summary>
/// <remarks>
/// A released or renewed lock leaves a void entry behind (a binary heap cannot remove from its middle). Void entries
/// are counted, and once they are at least half of the queue (and 1024 or more) the queue is rebuilt from its live
/// entries: O(1) amortized per release, and a released lock is not kept reachable until its old deadline (at 30 000
/// cycles/s with 30 s leases that was close to a million dead locks).
/// </remarks>
internal static class LockWatchdog
{
    private const int CompactAtVoid = 1024;
    private static readonly object Gate = new();
    private static PriorityQueue<RuvioLock, long> Queue = new();
    private static int _void; // entries in Queue that are void (see RuvioLock._armedAt)
    private static Thread? _thread;

    /// <summary>Entries in the queue, live or void (for tests).</summary>
    internal static int Count
    {
        get { lock (Gate) return Queue.Count; }
    }

    public static void Arm(RuvioLock l, long at, bool voidsAnEntry)
    {
        lock (Gate)
        {
            if (voidsAnEntry) _void++;
            var wake = !Queue.TryPeek(out _, out var first) || at < first;
            Queue.Enqueue(l, at);
            if (_thread is null)
            {
                _thread = new Thread(Run) { IsBackground = true, Name = "Ruvio lock watchdog", Priority = ThreadPriority.AboveNormal };
                _thread.Start();
            }
            else if (wake) Monitor.Pulse(Gate);
            CompactIfMostlyVoid();
        }
    }

    public static void Voided()
    {
        lock (Gate)
        {
            _void++;
            CompactIfMostlyVoid();
        }
    }

    private static void CompactIfMostlyVoid()
    {
        if (_void < CompactAtVoid || _void * 2L < Queue.Count) return;
        var live = new List<(RuvioLock, long)>(Math.Max(0, Queue.Count - _void));
        foreach (var (l, at) in Queue.UnorderedItems)
            if (l.IsArmedAt(at)) live.Add((l, at));
        // A fresh queue: Clear() would keep the old, large array.
        Queue = new PriorityQueue<RuvioLock, long>(live);
        _void = 0;
        // The earliest entry may be later now; the watchdog's wait is only ever early, never late, so no pulse.
    }

    private static void Run()
    {
        var due = new List<RuvioLock>();
        while (true)
        {
            lock (Gate)
            {
                while (true)
                {
                    var now = Stopwatch.GetTimestamp();
                    while (Queue.TryPeek(out var l, out var at) && at <= now)
                    {
                        Queue.Dequeue();
                        if (l.TryClaim(at)) due.Add(l);
                        else _void--; // it was void: it leaves the queue here
                    }
                    if (due.Count > 0) break;
                    if (!Queue.TryPeek(out _, out var next))
                    {
                        Monitor.Wait(Gate);
                        continue;
                    }
                    // Wake up no later than the deadline (round down: early is safe, late is not).
                    var ms = (next - now) * 1000 / Stopwatch.Frequency;
                    Monitor.Wait(Gate, (int)Math.Clamp(ms, 0, int.MaxValue));
                }
            }
            foreach (var l in due)
            {
                try { l.OnDue(); }
                catch { /* a throwing LockLost callback must not stop the watchdog */ }
            }
            due.Clear();
        }
    }
}
