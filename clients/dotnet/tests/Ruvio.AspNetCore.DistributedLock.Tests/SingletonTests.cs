using System.Diagnostics;

namespace Ruvio.AspNetCore.DistributedLock.Tests;

/// <summary>
/// AddRuvioSingleton across two instances of the sample app (separate processes): its OutboxPublisher must run on
/// exactly one of them, move on a crash, a pause and a graceful stop, and be fenced off after a pause.
/// </summary>
public sealed class SingletonTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;

    public SingletonTests(RuvioFixture f) => _f = f;

    private static async Task<(SampleApp Runner, SampleApp Standby)> WhoRunsAsync(SampleApp a, SampleApp b)
    {
        SampleApp? runner = null;
        await Wait.UntilAsync(async () =>
        {
            var ra = await a.RunningAsync();
            var rb = await b.RunningAsync();
            runner = ra is not null ? a : rb is not null ? b : null;
            return runner is not null;
        }, TimeSpan.FromSeconds(15), "one instance runs the worker");
        return (runner!, runner == a ? b : a);
    }

    private static async Task AssertExactlyOneRunsAsync(SampleApp a, SampleApp b, TimeSpan during)
    {
        var sw = Stopwatch.StartNew();
        while (sw.Elapsed < during)
        {
            var ra = await a.RunningAsync();
            var rb = await b.RunningAsync();
            Assert.False(ra is not null && rb is not null, $"both instances run the worker (tokens {ra}, {rb})");
            await Task.Delay(50);
        }
    }

    [Fact]
    public async Task ExactlyOneInstanceRunsTheWorkerAndKill9MovesItWithinTheLease()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        string[] settings = ["--Outbox:LeaseMs", "2000"];
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix, settings);
        await using var b = await SampleApp.StartAsync(_f.Server, "b", prefix, settings);
        var (runner, standby) = await WhoRunsAsync(a, b);
        await AssertExactlyOneRunsAsync(a, b, TimeSpan.FromSeconds(1.5));
        Assert.Null(await standby.RunningAsync());
        var firstToken = (await runner.RunningAsync())!.Value;

        var killed = Stopwatch.StartNew();
        runner.Kill9();
        await Wait.UntilAsync(async () => await standby.RunningAsync() is not null, TimeSpan.FromSeconds(10), "the standby takes over");
        var tookOver = killed.Elapsed;
        // Within the lease (2 s) of the crash, plus the slack of this shared machine.
        Assert.True(tookOver < TimeSpan.FromMilliseconds(2000 + 1500), $"took over {tookOver.TotalMilliseconds:0} ms after kill -9");
        Assert.True((await standby.RunningAsync())!.Value > firstToken);
    }

    [Fact]
    public async Task GracefulStopHandsOverAtOnceAndAWaitingStandbyStopsPromptly()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        // A long lease: a hand-over by expiry would take 20 s; a released lock goes to the waiting standby at once.
        string[] settings = ["--Outbox:LeaseMs", "20000"];
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix, settings);
        await using var b = await SampleApp.StartAsync(_f.Server, "b", prefix, settings);
        var (runner, standby) = await WhoRunsAsync(a, b);

        // A standby blocked in LEASE ... WAIT stops at once (its wait is cancelled), and the runner is not disturbed.
        var stopping = Stopwatch.StartNew();
        await standby.StopGracefullyAsync();
        Assert.True(stopping.Elapsed < TimeSpan.FromSeconds(10), $"the waiting standby took {stopping.ElapsedMilliseconds} ms to stop");
        Assert.NotNull(await runner.RunningAsync());

        await using var c = await SampleApp.StartAsync(_f.Server, "c", prefix, settings);
        await Task.Delay(500); // c is queued on the server
        Assert.Null(await c.RunningAsync());
        var stopped = Stopwatch.StartNew();
        await runner.StopGracefullyAsync();
        await Wait.UntilAsync(async () => await c.RunningAsync() is not null, TimeSpan.FromSeconds(10), "the standby takes over");
        Assert.True(stopped.Elapsed < TimeSpan.FromSeconds(5), $"took over {stopped.ElapsedMilliseconds} ms after the stop began (the lease is 20 s)");
    }

    [Fact]
    public async Task PausedHolderLosesTheWorkerAfterTheLeaseAndItsFencedWritesAreRejected()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        string[] settings = ["--Outbox:LeaseMs", "2000"];
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix, settings);
        await using var b = await SampleApp.StartAsync(_f.Server, "b", prefix, settings);
        var (runner, standby) = await WhoRunsAsync(a, b);
        var oldToken = (await runner.RunningAsync())!.Value;
        await using var conn = await _f.Server.ConnectAsync();
        var db = await conn.GetDefaultDatabaseAsync();

        var paused = Stopwatch.StartNew();
        runner.Pause();
        long newToken;
        try
        {
            await Wait.UntilAsync(async () => await standby.RunningAsync() is not null, TimeSpan.FromSeconds(10), "the standby takes over");
            // Not before the paused holder's lease could have run out on the server: its last renewal was at most a
            // third of the lease (667 ms) before the pause, so the lease ran out at least 1333 ms after it.
            Assert.True(paused.Elapsed >= TimeSpan.FromMilliseconds(1300), $"took over only {paused.ElapsedMilliseconds} ms after the pause");
            newToken = (await standby.RunningAsync())!.Value;
            Assert.True(newToken > oldToken);
            await Wait.UntilAsync(async () => (await standby.StatsAsync()).GetProperty("fencedWritesAccepted").GetInt64() > 0, TimeSpan.FromSeconds(5), "the new holder writes");
        }
        finally
        {
            runner.Resume();
        }
        // The resumed worker goes on writing under its old token until it notices: every such write is rejected.
        await Wait.UntilAsync(async () => (await runner.StatsAsync()).GetProperty("fencedWritesRejected").GetInt64() > 0, TimeSpan.FromSeconds(10), "the old worker's fenced write is rejected");
        await Wait.UntilAsync(async () => await runner.RunningAsync() is null, TimeSpan.FromSeconds(10), "the old worker stops");
        await AssertExactlyOneRunsAsync(a, b, TimeSpan.FromSeconds(1));
        Assert.Equal(newToken, await standby.RunningAsync());
        var value = (await db.ExecuteAsync("GET", prefix + "outbox-publisher:data")).AsString()!;
        Assert.StartsWith($"{standby.Instance}:", value); // the old holder never overwrote the new one's data
    }

    [Fact]
    public async Task AThrowingWorkerIsRestartedAndDoesNotStopTheApp()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix,
            "--Outbox:ThrowAfterBatches", "2", "--Outbox:RestartDelayMs", "200", "--Outbox:LeaseMs", "5000");
        await Wait.UntilAsync(async () =>
        {
            var stats = await a.StatsAsync();
            return stats.GetProperty("terms").TryGetProperty("outbox-publisher", out var n) && n.GetInt32() >= 3;
        }, TimeSpan.FromSeconds(8), "the failed worker runs again (three terms)");
        Assert.False(a.HasExited, "the host stopped");
        Assert.Contains("Ruvio.AspNetCore.DistributedLock.Singleton[32]", a.Log()); // logged with its stable event id (SingletonWorkerFailed)
        // Three terms within 8 s: each failure released the lock (waiting for the 5 s lease to expire would take longer).
        using var health = await new HttpClient().GetAsync(new Uri(a.BaseAddress, "healthz"));
        Assert.True(health.IsSuccessStatusCode);
    }

    [Fact]
    public async Task SeveralSingletonsOfOneTypeUnderDifferentNamesRunSideBySide()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix, "--Outbox:Second", "true");
        await Wait.UntilAsync(async () => await a.RunningAsync("outbox-publisher") is not null && await a.RunningAsync("outbox-publisher-2") is not null,
            TimeSpan.FromSeconds(15), "both singletons run");
        Assert.NotEqual(await a.RunningAsync("outbox-publisher"), await a.RunningAsync("outbox-publisher-2"));
        await using var conn = await _f.Server.ConnectAsync();
        var db = await conn.GetDefaultDatabaseAsync();
        Assert.NotNull(await db.LockInfoAsync(prefix + "outbox-publisher"));
        Assert.NotNull(await db.LockInfoAsync(prefix + "outbox-publisher-2"));
    }
}
