namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// Options of <c>AddRuvioDistributedLock</c>. Validated when the host starts: a missing connection, a status code
/// outside 400..599 or a lease out of range stops the start with an error that names what is wrong.
/// </summary>
/// <remarks>
/// Where the connection comes from, first match wins: <see cref="ConnectionFactory"/>; <see cref="Configuration"/>;
/// a <see cref="RuvioConnection"/> registered in the service collection (the app owns and disposes it);
/// <c>ConnectionStrings:Ruvio</c> in configuration; the <c>Ruvio</c> configuration section
/// (<c>Ruvio:Configuration</c> as a connection string, or <c>Ruvio:EndPoints</c>, <c>Ruvio:Password</c>, ... as
/// properties of <see cref="RuvioOptions"/>).
/// </remarks>
public sealed class RuvioDistributedLockOptions
{
    /// <summary>Prepended to every lock name to make its key (<c>KeyPrefix + name</c>). Default: empty.</summary>
    public string KeyPrefix { get; set; } = "";

    /// <summary>
    /// A <c>Ruvio.Client</c> connection string, e.g. <c>"127.0.0.1:6379,password=..."</c> or the coordinator form
    /// <c>"h1:26379,h2:26379,serviceName=mymaster"</c>. Null: look in configuration.
    /// </summary>
    public string? Configuration { get; set; }

    /// <summary>
    /// Durable grants: every connection the package opens sends <c>CLIENT DURABILITY REPLICAS n</c>, so a grant is
    /// answered only once n replicas hold it on disk. Null (default): what the connection string says. With an
    /// app-owned connection this must match that connection's own setting (checked when the connection is first used).
    /// </summary>
    public int? DurabilityReplicas { get; set; }

    /// <summary>
    /// Opens the connection the package uses (the app owns it: the package never disposes it). Takes precedence
    /// over every other source.
    /// </summary>
    public Func<IServiceProvider, CancellationToken, Task<RuvioConnection>>? ConnectionFactory { get; set; }

    /// <summary>Lease of a lock taken without an explicit one (endpoint locks, <see cref="IRuvioLocks"/>). Default 30 s.</summary>
    public TimeSpan DefaultLease { get; set; } = TimeSpan.FromSeconds(30);

    /// <summary>Status code of a request whose endpoint lock is held by another request. Default 409 Conflict.</summary>
    public int RejectionStatusCode { get; set; } = StatusCodes.Status409Conflict;

    /// <summary>
    /// Status code of a request whose endpoint lock could not be taken because Ruvio was unreachable or failed, or
    /// was lost while the handler ran. Default 503 Service Unavailable.
    /// </summary>
    public int UnavailableStatusCode { get; set; } = StatusCodes.Status503ServiceUnavailable;

    /// <summary>The <c>Retry-After</c> of a rejected (busy) request, rounded up to whole seconds. Default 1 s; zero: no header.</summary>
    public TimeSpan RetryAfter { get; set; } = TimeSpan.FromSeconds(1);

    /// <summary>
    /// Called when an endpoint lock rejects a request (busy, unavailable or lost), after the status code and
    /// <c>Retry-After</c> are set and before the default problem+json body is written. A hook that starts the
    /// response (writes a body) replaces the default body. As <c>RateLimiterOptions.OnRejected</c>.
    /// </summary>
    public Func<RuvioLockRejectedContext, CancellationToken, ValueTask>? OnRejected { get; set; }
}
