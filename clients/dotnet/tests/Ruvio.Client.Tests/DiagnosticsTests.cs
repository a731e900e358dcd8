using System.Collections.Concurrent;
using System.Diagnostics;
using System.Diagnostics.Metrics;

namespace Ruvio.Tests;

/// <summary>The Meter and the ActivitySource named Ruvio.Client report commands, grants, renewals and losses.</summary>
[Collection("snippets")] // listeners are process-wide; keep this away from the tests that count nothing
public sealed class DiagnosticsTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;
    public DiagnosticsTests(RuvioFixture f) => _f = f;

    [Fact]
    public async Task Meter_and_ActivitySource_named_Ruvio_Client()
    {
        var counts = new ConcurrentDictionary<string, long>();
        using var meters = new MeterListener();
        meters.InstrumentPublished = (instrument, l) =>
        {
            if (instrument.Meter.Name == "Ruvio.Client") l.EnableMeasurementEvents(instrument);
        };
        meters.SetMeasurementEventCallback<long>((instrument, value, _, _) => counts.AddOrUpdate(instrument.Name, value, (_, v) => v + value));
        meters.Start();
        var activities = new ConcurrentQueue<Activity>();
        using var listener = new ActivityListener
        {
            ShouldListenTo = s => s.Name == "Ruvio.Client",
            Sample = (ref ActivityCreationOptions<ActivityContext> _) => ActivitySamplingResult.AllData,
            ActivityStopped = a => activities.Enqueue(a),
        };
        ActivitySource.AddActivityListener(listener);

        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("diag");
        var l = (await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(1500)))!;
        await Helpers.WaitUntil(() => Task.FromResult(counts.GetValueOrDefault("ruvio.client.lock.renewals") >= 1), TimeSpan.FromSeconds(5), "a renewal");
        await db.ExecuteAsync("DEL", key);
        await Helpers.WaitUntil(() => Task.FromResult(l.IsLost), TimeSpan.FromSeconds(5), "the loss");
        Assert.True(counts.GetValueOrDefault("ruvio.client.commands") >= 3);
        Assert.True(counts.GetValueOrDefault("ruvio.client.lock.grants") >= 1);
        Assert.True(counts.GetValueOrDefault("ruvio.client.lock.losses") >= 1);
        Assert.Contains(activities, a => a.OperationName == "LEASE" && a.Kind == ActivityKind.Client);
        Assert.Contains(activities, a => a.OperationName == "RENEW");
    }
}
