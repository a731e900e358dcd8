namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// The lock of a singleton worker (<c>AddRuvioSingleton&lt;TWorker&gt;(name)</c>). A worker gets the lease of its own
/// term through its constructor (a parameter of this type, keyed by the singleton's name or not): its
/// <see cref="Token"/> is the term's fencing token, to send with every write the worker makes (e.g.
/// <c>IfGtAsync</c>), and <see cref="LockLost"/> fires when the term ends because the lock was lost (the worker's
/// stopping token fires then too). Resolved elsewhere by its name (<c>[FromKeyedServices("name")]</c>), it shows
/// this instance's current term, if any.
/// </summary>
public interface IRuvioSingletonLease
{
    /// <summary>The singleton's name.</summary>
    string Name { get; }

    /// <summary>The lock's key (<c>KeyPrefix + Name</c>).</summary>
    string Key { get; }

    /// <summary>True while this instance holds the lock for this term.</summary>
    bool IsHeld { get; }

    /// <summary>The term's fencing token.</summary>
    /// <exception cref="InvalidOperationException">This instance holds no term (only for the lease resolved by name outside a worker).</exception>
    long Token { get; }

    /// <summary>Fires when the term's lock is lost; already cancelled when this instance holds no term.</summary>
    CancellationToken LockLost { get; }
}

/// <summary>Options of one singleton worker (named options, by the singleton's name).</summary>
public sealed class RuvioSingletonOptions
{
    /// <summary>
    /// The lease: renewed at a third of it while the worker runs; after a crash (kill -9) of the holder, another
    /// instance takes over within it. Default 15 s.
    /// </summary>
    public TimeSpan Lease { get; set; } = TimeSpan.FromSeconds(15);

    /// <summary>Pause before contending again after the worker failed or returned, or Ruvio failed; doubles up to <see cref="MaxRestartDelay"/>. Default 1 s.</summary>
    public TimeSpan RestartDelay { get; set; } = TimeSpan.FromSeconds(1);

    /// <summary>Longest pause between attempts. Default 30 s.</summary>
    public TimeSpan MaxRestartDelay { get; set; } = TimeSpan.FromSeconds(30);

    /// <summary>How long a worker being stopped (lock lost, failed) may take to end its <c>ExecuteAsync</c>. Default 30 s; on host shutdown, the host's own timeout applies.</summary>
    public TimeSpan StopTimeout { get; set; } = TimeSpan.FromSeconds(30);
}

/// <summary>One term of a singleton: fixed token and loss signal, so a stale worker never sees a later term's token.</summary>
internal sealed class RuvioSingletonTerm(string name, string key, IRuvioLock held) : IRuvioSingletonLease
{
    private volatile bool _ended;

    public string Name => name;
    public string Key => key;
    public long Token => held.Token;
    public CancellationToken LockLost => held.LockLost;
    public bool IsHeld => !_ended && !held.LockLost.IsCancellationRequested;
    public void End() => _ended = true;
}

/// <summary>The lease of a singleton by name, as seen from outside its worker: this instance's current term.</summary>
internal sealed class RuvioSingletonState(string name, string key) : IRuvioSingletonLease
{
    private static readonly CancellationToken Cancelled = new(true);
    private volatile RuvioSingletonTerm? _current;

    /// <summary>The term whose worker is being constructed on this flow (how a constructor gets its own term).</summary>
    internal static readonly AsyncLocal<RuvioSingletonTerm?> Constructing = new();

    public string Name => name;
    public string Key => key;
    public RuvioSingletonTerm? Current { get => _current; set => _current = value; }
    public bool IsHeld => _current?.IsHeld ?? false;
    public long Token => _current?.Token ?? throw new InvalidOperationException($"this instance does not hold the singleton '{name}' now");
    public CancellationToken LockLost => _current?.LockLost ?? Cancelled;
}

/// <summary>The names of the singletons registered in one service collection (a name is used once).</summary>
internal sealed class RuvioSingletonRegistry
{
    public HashSet<string> Names { get; } = new(StringComparer.Ordinal);
}
