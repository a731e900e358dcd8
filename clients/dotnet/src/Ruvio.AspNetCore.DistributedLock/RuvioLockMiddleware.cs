using System.Collections.Concurrent;
using System.Globalization;
using Microsoft.AspNetCore.Http.HttpResults;
using Microsoft.AspNetCore.Mvc;

namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// Runs a request whose endpoint carries <see cref="IRuvioLockMetadata"/> only while it holds that lock: busy answers
/// <see cref="RuvioDistributedLockOptions.RejectionStatusCode"/> (409) with a problem+json body and
/// <c>Retry-After</c>; Ruvio unreachable, or the lock lost while the handler ran, answers
/// <see cref="RuvioDistributedLockOptions.UnavailableStatusCode"/> (503). While the handler runs,
/// <c>HttpContext.RequestAborted</c> also fires when the lock is lost. The lock is released as soon as the rest of
/// the pipeline has returned or thrown, before this middleware returns: a client that sends its next request after
/// reading the response finds the lock free.
/// </summary>
internal sealed class RuvioLockMiddleware
{
    private readonly RequestDelegate _next;
    private readonly IRuvioLocks _locks;
    private readonly RuvioDistributedLockOptions _options;
    private readonly ILogger _logger;
    private readonly ConcurrentDictionary<string, RuvioLockTemplate> _templates = new();

    public RuvioLockMiddleware(RequestDelegate next, IRuvioLocks locks, IOptions<RuvioDistributedLockOptions> options, ILoggerFactory loggerFactory)
    {
        _next = next;
        _locks = locks;
        _options = options.Value;
        _logger = loggerFactory.CreateLogger("Ruvio.AspNetCore.DistributedLock");
    }

    public Task InvokeAsync(HttpContext context)
    {
        var metadata = context.GetEndpoint()?.Metadata.GetMetadata<IRuvioLockMetadata>();
        return metadata is null ? _next(context) : InvokeGuardedAsync(context, metadata);
    }

    private async Task InvokeGuardedAsync(HttpContext context, IRuvioLockMetadata metadata)
    {
        // Checked at start-up already (RuvioLockStartupFilter); parsed once per template.
        var template = _templates.GetOrAdd(metadata.Template, RuvioLockTemplate.Parse);
        var name = template.Format(context.Request.RouteValues);
        var key = _locks.GetKey(name);
        var aborted = context.RequestAborted;

        IRuvioLock? held;
        try
        {
            held = await _locks.TryAcquireAsync(name, metadata.Lease, metadata.Wait, aborted).ConfigureAwait(false);
        }
        catch (OperationCanceledException) when (aborted.IsCancellationRequested)
        {
            return; // the client left while the request waited: nobody to answer
        }
        catch (Exception e) when (e is RuvioException or TimeoutException or InvalidOperationException or OperationCanceledException)
        {
            Log.EndpointLockUnavailable(_logger, key, _options.UnavailableStatusCode, e);
            await RejectAsync(context, name, key, RuvioLockRejectionReason.Unavailable, e).ConfigureAwait(false);
            return;
        }
        if (held is null)
        {
            Log.EndpointLockBusy(_logger, key, _options.RejectionStatusCode);
            await RejectAsync(context, name, key, RuvioLockRejectionReason.Busy, null).ConfigureAwait(false);
            return;
        }

        bool lost;
        using (var linked = CancellationTokenSource.CreateLinkedTokenSource(aborted, held.LockLost))
        {
            context.RequestAborted = linked.Token;
            context.Features.Set<IRuvioLockFeature>(new RuvioLockFeature(held));
            try
            {
                await _next(context).ConfigureAwait(false);
                lost = held.LockLost.IsCancellationRequested;
            }
            catch (Exception) when (held.LockLost.IsCancellationRequested && !context.Response.HasStarted)
            {
                // The handler stopped because the lock was lost (its RequestAborted fired): answer 503 below.
                lost = true;
            }
            finally
            {
                context.RequestAborted = aborted;
                context.Features.Set<IRuvioLockFeature>(null);
                // A lost lock's RELEASE is only a courtesy (it answers 0 if another holds it now), and Ruvio may
                // not be answering: do not hold the 503 back for it.
                if (held.LockLost.IsCancellationRequested) _ = ReleaseAsync(held, key);
                else await ReleaseAsync(held, key).ConfigureAwait(false);
            }
        }
        if (lost)
        {
            Log.EndpointLockLost(_logger, key, held.Token);
            // A handler that finished after its lock was lost still ran without the guarantee: say so rather than
            // answer as if nothing happened. A response already under way cannot be changed.
            if (!context.Response.HasStarted)
            {
                context.Response.Clear();
                await RejectAsync(context, name, key, RuvioLockRejectionReason.LockLost, null).ConfigureAwait(false);
            }
        }
    }

    private async Task ReleaseAsync(IRuvioLock held, string key)
    {
        try
        {
            await held.DisposeAsync().ConfigureAwait(false);
        }
        catch (Exception e)
        {
            // The lease ends on its own; a failed release must not turn a finished request into an error.
            Log.LockReleaseFailed(_logger, key, held.Token, e);
        }
    }

    private async Task RejectAsync(HttpContext context, string name, string key, RuvioLockRejectionReason reason, Exception? exception)
    {
        var response = context.Response;
        if (response.HasStarted) return;
        var status = reason == RuvioLockRejectionReason.Busy ? _options.RejectionStatusCode : _options.UnavailableStatusCode;
        response.StatusCode = status;
        if (reason == RuvioLockRejectionReason.Busy && _options.RetryAfter > TimeSpan.Zero)
            response.Headers.RetryAfter = ((long)Math.Ceiling(_options.RetryAfter.TotalSeconds)).ToString(CultureInfo.InvariantCulture);
        if (_options.OnRejected is { } onRejected)
        {
            await onRejected(new RuvioLockRejectedContext(context, name, key, reason, exception), context.RequestAborted).ConfigureAwait(false);
            if (response.HasStarted) return;
        }
        var problem = new ProblemDetails
        {
            Status = response.StatusCode,
            Title = reason switch
            {
                RuvioLockRejectionReason.Busy => "The resource is locked by another request",
                RuvioLockRejectionReason.Unavailable => "The lock service is unavailable",
                _ => "The lock was lost while the request ran",
            },
            Detail = reason switch
            {
                RuvioLockRejectionReason.Busy => $"Another request holds the lock '{name}'. Retry later.",
                RuvioLockRejectionReason.Unavailable => $"The lock '{name}' could not be taken: the lock service did not answer. Retry later.",
                _ => $"The lock '{name}' could not be kept for the whole request; the request may or may not have taken effect.",
            },
        };
        problem.Extensions["lock"] = name;
        await TypedResults.Problem(problem).ExecuteAsync(context).ConfigureAwait(false);
    }
}
