using System.Diagnostics;
using Microsoft.Extensions.Diagnostics.HealthChecks;
using Ruvio;
using Ruvio.AspNetCore.DistributedLock;

namespace Microsoft.Extensions.DependencyInjection
{
    /// <summary>The Ruvio health check.</summary>
    public static class RuvioHealthChecksBuilderExtensions
    {
        /// <summary>
        /// Adds a health check that sends <c>PING</c> on the connection the locks use (connecting first if needed):
        /// healthy when it answers, <paramref name="failureStatus"/> (default unhealthy) otherwise.
        /// </summary>
        public static IHealthChecksBuilder AddRuvio(this IHealthChecksBuilder builder, string name = "ruvio", HealthStatus? failureStatus = null,
            IEnumerable<string>? tags = null, TimeSpan? timeout = null)
        {
            ArgumentNullException.ThrowIfNull(builder);
            builder.Services.AddRuvioDistributedLock();
            return builder.Add(new HealthCheckRegistration(name, sp => new RuvioHealthCheck(sp.GetRequiredService<RuvioConnectionProvider>()),
                failureStatus, tags, timeout));
        }
    }
}

namespace Ruvio.AspNetCore.DistributedLock
{
    internal sealed class RuvioHealthCheck(RuvioConnectionProvider connection) : IHealthCheck
    {
        public async Task<HealthCheckResult> CheckHealthAsync(HealthCheckContext context, CancellationToken cancellationToken = default)
        {
            var started = Stopwatch.GetTimestamp();
            try
            {
                var db = await connection.GetDatabaseAsync(cancellationToken).ConfigureAwait(false);
                await db.ExecuteAsync("PING", Array.Empty<object>(), cancellationToken).ConfigureAwait(false);
                var elapsed = Stopwatch.GetElapsedTime(started);
                return HealthCheckResult.Healthy($"PING answered in {elapsed.TotalMilliseconds:0.0} ms",
                    new Dictionary<string, object> { ["latency_ms"] = elapsed.TotalMilliseconds });
            }
            catch (Exception e) when (e is not OperationCanceledException || !cancellationToken.IsCancellationRequested)
            {
                return new HealthCheckResult(context.Registration.FailureStatus, $"Ruvio did not answer PING: {e.Message}", e);
            }
        }
    }
}
