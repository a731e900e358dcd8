using System.Diagnostics;
using System.Diagnostics.Metrics;

namespace Ruvio;

/// <summary>
/// The client's <see cref="Meter"/> and <see cref="ActivitySource"/>, both named <c>Ruvio.Client</c>, so that
/// OpenTelemetry (<c>AddMeter("Ruvio.Client")</c>, <c>AddSource("Ruvio.Client")</c>) picks them up without this
/// package depending on it.
/// </summary>
public static class RuvioDiagnostics
{
    /// <summary>The name of the meter and of the activity source: <c>Ruvio.Client</c>.</summary>
    public const string Name = "Ruvio.Client";

    /// <summary>The activity source: one activity per command (kind Client) when something listens.</summary>
    public static ActivitySource ActivitySource { get; } = new(Name, typeof(RuvioDiagnostics).Assembly.GetName().Version?.ToString());

    /// <summary>The meter: counters <c>ruvio.client.commands</c>, <c>ruvio.client.command.errors</c>,
    /// <c>ruvio.client.lock.grants</c>, <c>ruvio.client.lock.renewals</c>, <c>ruvio.client.lock.losses</c>,
    /// <c>ruvio.client.reconnects</c>.</summary>
    public static Meter Meter { get; } = new(Name, typeof(RuvioDiagnostics).Assembly.GetName().Version?.ToString());

    internal static readonly Counter<long> Commands = Meter.CreateCounter<long>("ruvio.client.commands", "{command}", "Commands sent (tagged with the command name).");
    internal static readonly Counter<long> CommandErrors = Meter.CreateCounter<long>("ruvio.client.command.errors", "{command}", "Commands that failed (tagged with the command name and error code).");
    internal static readonly Counter<long> LockGrants = Meter.CreateCounter<long>("ruvio.client.lock.grants", "{grant}", "LEASE/SEMAPHORE grants received.");
    internal static readonly Counter<long> LockRenewals = Meter.CreateCounter<long>("ruvio.client.lock.renewals", "{renewal}", "Successful renewals by the lock helper.");
    internal static readonly Counter<long> LockLosses = Meter.CreateCounter<long>("ruvio.client.lock.losses", "{loss}", "Locks the helper reported lost.");
    internal static readonly Counter<long> Reconnects = Meter.CreateCounter<long>("ruvio.client.reconnects", "{reconnect}", "Connections restored after a loss.");
}
