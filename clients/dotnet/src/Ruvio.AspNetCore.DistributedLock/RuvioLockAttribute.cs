namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// Endpoint metadata read by <c>UseRuvioLock()</c>: the request runs only while it holds the lock named by
/// <see cref="Template"/>, whose <c>{name}</c> parts are filled from the request's route values
/// (<c>"order:{id}"</c> on <c>/orders/{id}/pay</c>). Use it with <c>WithMetadata(new RuvioLockAttribute(...))</c>, on
/// a controller or action, or through <c>RequireRuvioLock(...)</c>.
/// </summary>
/// <remarks>
/// A template naming a parameter the route lacks, or this metadata on any endpoint of an app that never called
/// <c>UseRuvioLock()</c>, fails the host's start. Attributes cannot hold a <see cref="TimeSpan"/>, so the lease and
/// the wait are in milliseconds.
/// </remarks>
[AttributeUsage(AttributeTargets.Class | AttributeTargets.Method, AllowMultiple = false, Inherited = true)]
public sealed class RuvioLockAttribute : Attribute, IRuvioLockMetadata
{
    /// <summary>Creates the attribute.</summary>
    /// <param name="template">The lock's name, with <c>{routeParameter}</c> parts; the key is <c>KeyPrefix + name</c>.</param>
    public RuvioLockAttribute(string template)
    {
        ArgumentException.ThrowIfNullOrEmpty(template);
        Template = template;
    }

    /// <inheritdoc />
    public string Template { get; }

    /// <summary>Lease in milliseconds; 0 (default): <see cref="RuvioDistributedLockOptions.DefaultLease"/>.</summary>
    public int LeaseMilliseconds { get; set; }

    /// <summary>
    /// How long a request waits for the lock on the server's FIFO queue before it is rejected; 0 (default): it is
    /// rejected at once when another request holds the lock.
    /// </summary>
    public int WaitMilliseconds { get; set; }

    TimeSpan? IRuvioLockMetadata.Lease => LeaseMilliseconds == 0 ? null : TimeSpan.FromMilliseconds(LeaseMilliseconds);

    TimeSpan IRuvioLockMetadata.Wait => TimeSpan.FromMilliseconds(WaitMilliseconds);
}

/// <summary>The endpoint lock's metadata, as <see cref="RuvioLockAttribute"/> provides it.</summary>
public interface IRuvioLockMetadata
{
    /// <summary>The lock's name template, e.g. <c>"order:{id}"</c>.</summary>
    string Template { get; }

    /// <summary>The lease; null: <see cref="RuvioDistributedLockOptions.DefaultLease"/>.</summary>
    TimeSpan? Lease { get; }

    /// <summary>The longest wait on the server's queue; zero: none.</summary>
    TimeSpan Wait { get; }
}

/// <summary>Why an endpoint lock rejected a request.</summary>
public enum RuvioLockRejectionReason
{
    /// <summary>Another request holds the lock (after the endpoint's wait, if any): <see cref="RuvioDistributedLockOptions.RejectionStatusCode"/>.</summary>
    Busy,

    /// <summary>Ruvio could not be reached or answered an error: <see cref="RuvioDistributedLockOptions.UnavailableStatusCode"/>.</summary>
    Unavailable,

    /// <summary>The lock was lost while the handler ran (its lease could not be renewed in time): <see cref="RuvioDistributedLockOptions.UnavailableStatusCode"/>.</summary>
    LockLost,
}

/// <summary>What <see cref="RuvioDistributedLockOptions.OnRejected"/> is told.</summary>
public sealed class RuvioLockRejectedContext
{
    internal RuvioLockRejectedContext(HttpContext httpContext, string name, string key, RuvioLockRejectionReason reason, Exception? exception)
    {
        HttpContext = httpContext;
        Name = name;
        Key = key;
        Reason = reason;
        Exception = exception;
    }

    /// <summary>The rejected request (its status code is already set).</summary>
    public HttpContext HttpContext { get; }

    /// <summary>The lock's name (the template filled in).</summary>
    public string Name { get; }

    /// <summary>The lock's key (<c>KeyPrefix + Name</c>).</summary>
    public string Key { get; }

    /// <summary>Why the request was rejected.</summary>
    public RuvioLockRejectionReason Reason { get; }

    /// <summary>The error from Ruvio, for <see cref="RuvioLockRejectionReason.Unavailable"/>.</summary>
    public Exception? Exception { get; }
}

/// <summary>
/// The lock a guarded request holds, in <c>HttpContext.Features</c> while its handler runs (or through
/// <c>HttpContext.GetRuvioLock()</c>): its <see cref="IRuvioLock.Token"/> is the fencing token to send with the
/// writes the lock protects.
/// </summary>
public interface IRuvioLockFeature
{
    /// <summary>The held lock.</summary>
    IRuvioLock Lock { get; }
}

internal sealed class RuvioLockFeature(IRuvioLock held) : IRuvioLockFeature
{
    public IRuvioLock Lock { get; } = held;
}

/// <summary>Access to the endpoint lock of a request.</summary>
public static class RuvioLockHttpContextExtensions
{
    /// <summary>The endpoint lock this request holds, or null when its endpoint has none.</summary>
    public static IRuvioLock? GetRuvioLock(this HttpContext context)
    {
        ArgumentNullException.ThrowIfNull(context);
        return context.Features.Get<IRuvioLockFeature>()?.Lock;
    }
}
