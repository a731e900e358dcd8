namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// Distributed locks on Ruvio, injected by <c>AddRuvioDistributedLock</c>. A lock's key is
/// <see cref="RuvioDistributedLockOptions.KeyPrefix"/> + its name. A held lock (<see cref="IRuvioLock"/>) is renewed
/// in the background; its <see cref="IRuvioLock.LockLost"/> fires before the lease can run out on the server when it
/// cannot be renewed; its <see cref="IRuvioLock.Token"/> is the fencing token to send with every write it protects.
/// Waiting happens on the server's FIFO queue (<c>LEASE ... WAIT</c>), never by polling: a released lock goes to the
/// first waiter within a round trip.
/// </summary>
public interface IRuvioLocks
{
    /// <summary>
    /// Takes the lock <paramref name="name"/>, waiting up to <paramref name="wait"/> on the server's queue while
    /// another holder has it. Returns null when it is still held by another after the wait (at once with no wait).
    /// </summary>
    /// <param name="name">The lock's name; the key is <c>KeyPrefix + name</c>.</param>
    /// <param name="lease">The lease (renewed at a third of it while held); null: <see cref="RuvioDistributedLockOptions.DefaultLease"/>.</param>
    /// <param name="wait">How long to wait for a holder to release; zero (default): do not wait.</param>
    /// <param name="cancellationToken">Stops the wait (a grant that was being made is given back).</param>
    /// <exception cref="RuvioException">Ruvio could not be reached or answered an error.</exception>
    Task<IRuvioLock?> TryAcquireAsync(string name, TimeSpan? lease = null, TimeSpan wait = default, CancellationToken cancellationToken = default);

    /// <summary>Takes the lock <paramref name="name"/>, waiting on the server's queue for up to <paramref name="timeout"/> (null: without limit).</summary>
    /// <exception cref="TimeoutException">The lock was still held by another after <paramref name="timeout"/>.</exception>
    /// <exception cref="RuvioException">Ruvio could not be reached or answered an error.</exception>
    Task<IRuvioLock> AcquireAsync(string name, TimeSpan? lease = null, TimeSpan? timeout = null, CancellationToken cancellationToken = default);

    /// <summary>
    /// Takes one of <paramref name="maxCount"/> slots of the semaphore <paramref name="name"/> (each slot has its own
    /// token and lease), waiting up to <paramref name="wait"/> on the server's queue. Null: all slots are taken.
    /// </summary>
    Task<IRuvioLock?> TryAcquireSemaphoreAsync(string name, int maxCount, TimeSpan? lease = null, TimeSpan wait = default, CancellationToken cancellationToken = default);

    /// <summary>Takes a slot of the semaphore <paramref name="name"/>, waiting up to <paramref name="timeout"/> (null: without limit).</summary>
    /// <exception cref="TimeoutException">All slots were still taken after <paramref name="timeout"/>.</exception>
    Task<IRuvioLock> AcquireSemaphoreAsync(string name, int maxCount, TimeSpan? lease = null, TimeSpan? timeout = null, CancellationToken cancellationToken = default);

    /// <summary>The database the locks live in (connected on first use), for fenced writes such as <c>IfGtAsync</c>.</summary>
    Task<RuvioDatabase> GetDatabaseAsync(CancellationToken cancellationToken = default);

    /// <summary>The key of the lock <paramref name="name"/>: <c>KeyPrefix + name</c>.</summary>
    string GetKey(string name);
}
