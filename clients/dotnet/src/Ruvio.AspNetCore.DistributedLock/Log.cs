namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// Every log event of the package, with stable ids and names (documented in the README; never renumbered), in the
/// categories <c>Ruvio.AspNetCore.DistributedLock</c> (connection, locks, endpoint locks) and
/// <c>Ruvio.AspNetCore.DistributedLock.Singleton</c>.
/// </summary>
internal static partial class Log
{
    [LoggerMessage(1, LogLevel.Information, "Connecting to Ruvio from {Source}", EventName = "Connecting")]
    public static partial void Connecting(ILogger logger, string source);

    [LoggerMessage(2, LogLevel.Error, "Could not connect to Ruvio; the next use tries again", EventName = "ConnectFailed")]
    public static partial void ConnectFailed(ILogger logger, Exception exception);

    [LoggerMessage(10, LogLevel.Debug, "Lock {Key} acquired with token {Token}", EventName = "LockAcquired")]
    public static partial void LockAcquired(ILogger logger, string key, long token);

    [LoggerMessage(11, LogLevel.Debug, "Lock {Key} is held by another (waited {WaitMs} ms)", EventName = "LockBusy")]
    public static partial void LockBusy(ILogger logger, string key, long waitMs);

    [LoggerMessage(13, LogLevel.Warning, "Releasing lock {Key} (token {Token}) failed; it expires at the end of its lease", EventName = "LockReleaseFailed")]
    public static partial void LockReleaseFailed(ILogger logger, string key, long token, Exception exception);

    [LoggerMessage(20, LogLevel.Information, "Request rejected with {StatusCode}: lock {Key} is held by another request", EventName = "EndpointLockBusy")]
    public static partial void EndpointLockBusy(ILogger logger, string key, int statusCode);

    [LoggerMessage(21, LogLevel.Warning, "Request rejected with {StatusCode}: lock {Key} could not be taken", EventName = "EndpointLockUnavailable")]
    public static partial void EndpointLockUnavailable(ILogger logger, string key, int statusCode, Exception exception);

    [LoggerMessage(22, LogLevel.Warning, "Lock {Key} (token {Token}) was lost while its request ran", EventName = "EndpointLockLost")]
    public static partial void EndpointLockLost(ILogger logger, string key, long token);

    [LoggerMessage(30, LogLevel.Information, "Singleton {Name} acquired lock {Key} with token {Token}: starting {Worker}", EventName = "SingletonStarted")]
    public static partial void SingletonStarted(ILogger logger, string name, string key, long token, string worker);

    [LoggerMessage(31, LogLevel.Warning, "Singleton {Name} lost lock {Key} (token {Token}): stopping its worker and contending again", EventName = "SingletonLockLost")]
    public static partial void SingletonLockLost(ILogger logger, string name, string key, long token);

    [LoggerMessage(32, LogLevel.Error, "Singleton {Name}'s worker failed (token {Token}): lock released, contending again in {DelayMs} ms", EventName = "SingletonWorkerFailed")]
    public static partial void SingletonWorkerFailed(ILogger logger, string name, long token, long delayMs, Exception exception);

    [LoggerMessage(33, LogLevel.Information, "Singleton {Name}'s worker returned (token {Token}): lock released, contending again in {DelayMs} ms", EventName = "SingletonWorkerCompleted")]
    public static partial void SingletonWorkerCompleted(ILogger logger, string name, long token, long delayMs);

    [LoggerMessage(34, LogLevel.Information, "Singleton {Name} stopped its worker and released lock {Key} (token {Token})", EventName = "SingletonReleased")]
    public static partial void SingletonReleased(ILogger logger, string name, string key, long token);

    [LoggerMessage(35, LogLevel.Warning, "Singleton {Name} could not contend for lock {Key}; trying again in {DelayMs} ms", EventName = "SingletonContendFailed")]
    public static partial void SingletonContendFailed(ILogger logger, string name, string key, long delayMs, Exception exception);

    [LoggerMessage(36, LogLevel.Warning, "Singleton {Name}'s worker did not stop within {TimeoutMs} ms", EventName = "SingletonStopTimedOut")]
    public static partial void SingletonStopTimedOut(ILogger logger, string name, long timeoutMs);

    [LoggerMessage(37, LogLevel.Debug, "Singleton {Name} waits for lock {Key} on the server's queue", EventName = "SingletonWaiting")]
    public static partial void SingletonWaiting(ILogger logger, string name, string key);
}
