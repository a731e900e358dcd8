using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Routing;

namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>Set by <c>UseRuvioLock()</c>, so the start-up check knows the middleware is in the pipeline.</summary>
internal sealed class RuvioLockMiddlewareMarker
{
    public volatile bool Used;
}

/// <summary>
/// Checks every endpoint's lock metadata once the app's pipeline is built, before the server starts listening: a
/// template that is malformed or names a parameter the route lacks, a negative lease or wait, or lock metadata in
/// an app that never called <c>UseRuvioLock()</c> stops the start with one error listing every problem. (ASP.NET
/// Core checks for missing middleware only for auth, CORS and anti-forgery, and only at the first request.)
/// </summary>
internal sealed class RuvioLockStartupFilter(RuvioLockMiddlewareMarker marker) : IStartupFilter
{
    public Action<IApplicationBuilder> Configure(Action<IApplicationBuilder> next) => app =>
    {
        next(app);
        var sources = app.ApplicationServices.GetServices<EndpointDataSource>();
        Validate(sources.SelectMany(s => s.Endpoints), marker.Used);
    };

    internal static void Validate(IEnumerable<Endpoint> endpoints, bool middlewareUsed)
    {
        var problems = new StringBuilder();
        var guarded = 0;
        foreach (var endpoint in endpoints)
        {
            var metadata = endpoint.Metadata.GetMetadata<IRuvioLockMetadata>();
            if (metadata is null) continue;
            guarded++;
            var where = endpoint.DisplayName ?? (endpoint as RouteEndpoint)?.RoutePattern.RawText ?? "(unnamed endpoint)";
            RuvioLockTemplate template;
            try { template = RuvioLockTemplate.Parse(metadata.Template); }
            catch (FormatException e) { problems.Append("\n- endpoint '").Append(where).Append("': ").Append(e.Message); continue; }
            foreach (var parameter in template.Parameters)
            {
                var known = endpoint is RouteEndpoint route
                    && (route.RoutePattern.GetParameter(parameter) is not null || route.RoutePattern.RequiredValues.ContainsKey(parameter));
                if (!known)
                    problems.Append("\n- endpoint '").Append(where).Append("': lock template \"").Append(metadata.Template)
                        .Append("\" names {").Append(parameter).Append("}, which its route does not have");
            }
            if (metadata.Lease is { } lease && lease <= TimeSpan.Zero)
                problems.Append("\n- endpoint '").Append(where).Append("': the lock's lease must be positive");
            if (metadata.Wait < TimeSpan.Zero)
                problems.Append("\n- endpoint '").Append(where).Append("': the lock's wait cannot be negative");
        }
        if (guarded > 0 && !middlewareUsed)
            problems.Append("\n- ").Append(guarded).Append(" endpoint(s) carry RuvioLockAttribute metadata but the app never called app.UseRuvioLock(): call it after UseRouting (if any), before the endpoints, or the locks would not be taken");
        if (problems.Length > 0)
            throw new InvalidOperationException("Ruvio endpoint locks are misconfigured:" + problems);
    }
}
