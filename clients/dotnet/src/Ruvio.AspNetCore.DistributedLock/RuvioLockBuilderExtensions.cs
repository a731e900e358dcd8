using Ruvio.AspNetCore.DistributedLock;

namespace Microsoft.AspNetCore.Builder;

/// <summary>Endpoint locks: the middleware and the endpoint convention.</summary>
public static class RuvioLockBuilderExtensions
{
    /// <summary>
    /// Adds the middleware that takes each request's endpoint lock (<see cref="RuvioLockAttribute"/>). Place it after
    /// <c>UseRouting()</c> (implicit in a <c>WebApplication</c>) and after authentication and authorization, so a
    /// rejected caller does not take a lock, as with <c>UseRateLimiter()</c>.
    /// </summary>
    public static IApplicationBuilder UseRuvioLock(this IApplicationBuilder app)
    {
        ArgumentNullException.ThrowIfNull(app);
        var marker = app.ApplicationServices.GetService<RuvioLockMiddlewareMarker>()
            ?? throw new InvalidOperationException("Unable to find the required services. Add them by calling 'IServiceCollection.AddRuvioDistributedLock' in the application startup code.");
        marker.Used = true;
        return app.UseMiddleware<RuvioLockMiddleware>();
    }

    /// <summary>
    /// Runs the endpoint(s) only while holding the lock <paramref name="template"/> (route values fill its
    /// <c>{name}</c> parts), as <c>WithMetadata(new RuvioLockAttribute(template))</c> does.
    /// </summary>
    /// <param name="builder">The endpoint(s).</param>
    /// <param name="template">The lock's name template, e.g. <c>"order:{id}"</c>.</param>
    /// <param name="lease">The lease; null: <see cref="RuvioDistributedLockOptions.DefaultLease"/>.</param>
    /// <param name="wait">How long a request waits on the server's queue before it is rejected; null: not at all.</param>
    public static TBuilder RequireRuvioLock<TBuilder>(this TBuilder builder, string template, TimeSpan? lease = null, TimeSpan? wait = null)
        where TBuilder : IEndpointConventionBuilder
    {
        ArgumentNullException.ThrowIfNull(builder);
        ArgumentException.ThrowIfNullOrEmpty(template);
        var metadata = new RuvioLockMetadata(template, lease, wait ?? TimeSpan.Zero);
        builder.Add(endpoint => endpoint.Metadata.Add(metadata));
        return builder;
    }

    private sealed record RuvioLockMetadata(string Template, TimeSpan? Lease, TimeSpan Wait) : IRuvioLockMetadata;
}
