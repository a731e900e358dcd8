using System.Diagnostics;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;

namespace Ruvio.AspNetCore.DistributedLock.Tests;

/// <summary>IRuvioLocks against a real ruvio: waits on the server's queue, loss signals, semaphores, keys.</summary>
public sealed class LocksTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;

    public LocksTests(RuvioFixture f) => _f = f;

    internal static ServiceProvider Services(RuvioServer server, string prefix, string? connectionSuffix = null)
    {
        var services = new ServiceCollection();
        services.AddLogging();
        services.AddSingleton<IConfiguration>(new ConfigurationBuilder()
            .AddInMemoryCollection(new Dictionary<string, string?> { ["ConnectionStrings:Ruvio"] = server.Address + connectionSuffix })
            .Build());
        services.AddRuvioDistributedLock(o => o.KeyPrefix = prefix);
        return services.BuildServiceProvider();
    }

    [Fact]
    public async Task TryAcquireWithWaitGetsTheLockAboutARoundTripAfterTheHolderReleases()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var sp = Services(_f.Server, prefix);
        var locks = sp.GetRequiredService<IRuvioLocks>();
        var first = await locks.TryAcquireAsync("report", lease: TimeSpan.FromSeconds(10));
        Assert.NotNull(first);

        var second = locks.TryAcquireAsync("report", lease: TimeSpan.FromSeconds(10), wait: TimeSpan.FromSeconds(10));
        var db = await locks.GetDatabaseAsync();
        // The second caller is queued on the server (LOCKINFO counts it), not polling.
        await Wait.UntilAsync(async () => (await db.LockInfoAsync(prefix + "report"))?.Waiters == 1, TimeSpan.FromSeconds(5), "the waiter is queued");
        Assert.False(second.IsCompleted);

        var released = Stopwatch.StartNew();
        await first!.ReleaseAsync();
        await using var got = await second;
        var handOver = released.Elapsed;
        Assert.NotNull(got);
        Assert.True(got!.Token > first.Token);
        Assert.True(handOver < TimeSpan.FromMilliseconds(300), $"hand-over took {handOver.TotalMilliseconds:0.0} ms");
        Assert.Equal(prefix + "report", got.Key);
        Assert.False(got.LockLost.IsCancellationRequested);
    }

    [Fact]
    public async Task TryAcquireReturnsNullAfterTheWaitAndAcquireThrowsTimeoutException()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var sp = Services(_f.Server, prefix);
        var locks = sp.GetRequiredService<IRuvioLocks>();
        await using var held = await locks.TryAcquireAsync("report");
        Assert.NotNull(held);

        Assert.Null(await locks.TryAcquireAsync("report")); // no wait: at once
        var sw = Stopwatch.StartNew();
        Assert.Null(await locks.TryAcquireAsync("report", wait: TimeSpan.FromMilliseconds(500)));
        Assert.InRange(sw.ElapsedMilliseconds, 450, 3000);
        await Assert.ThrowsAsync<TimeoutException>(() => locks.AcquireAsync("report", timeout: TimeSpan.FromMilliseconds(200)));
    }

    [Fact]
    public async Task AWaitLongerThanTheLeaseGivesALockThatIsNotReportedLost()
    {
        // Regression: the client counted a waited grant's deadline from the LEASE's send, so after a wait longer
        // than the lease it fired LockLost at once for a lock it held.
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var sp = Services(_f.Server, prefix);
        var locks = sp.GetRequiredService<IRuvioLocks>();
        var first = await locks.TryAcquireAsync("job", lease: TimeSpan.FromSeconds(10));
        // A 2 s lease (renewed every 667 ms: shorter ones lose renewals on this loaded machine), granted after 3 s.
        var second = locks.TryAcquireAsync("job", lease: TimeSpan.FromMilliseconds(2000), wait: TimeSpan.FromSeconds(10));
        await Task.Delay(3000);
        await first!.ReleaseAsync();
        await using var got = await second;
        Assert.NotNull(got);
        await Task.Delay(2500); // more than a lease: it had to be renewed, and it was
        Assert.False(got!.LockLost.IsCancellationRequested, $"a held lock was reported lost: {got.LostReason}");
        var info = await (await locks.GetDatabaseAsync()).LockInfoAsync(prefix + "job");
        Assert.Equal(got.Token, Assert.Single(info!.Holders).Token);
    }

    [Fact]
    public async Task AcquireWithoutTimeoutWaitsOnTheQueueUntilReleased()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var sp = Services(_f.Server, prefix);
        var locks = sp.GetRequiredService<IRuvioLocks>();
        var first = await locks.AcquireAsync("job");
        var second = locks.AcquireAsync("job");
        await Task.Delay(300);
        Assert.False(second.IsCompleted);
        await first.ReleaseAsync();
        await using var got = await second.WaitAsync(TimeSpan.FromSeconds(5));
        Assert.True(got.Token > first.Token);
    }

    [Fact]
    public async Task LockLostFiresWhenTheKeyIsDeleted()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var sp = Services(_f.Server, prefix);
        var locks = sp.GetRequiredService<IRuvioLocks>();
        await using var held = await locks.TryAcquireAsync("job", lease: TimeSpan.FromMilliseconds(1500));
        var lost = new TaskCompletionSource();
        held!.LockLost.Register(() => lost.TrySetResult());
        var db = await locks.GetDatabaseAsync();
        Assert.Equal(1, (await db.ExecuteAsync("DEL", prefix + "job")).AsInt64());
        await lost.Task.WaitAsync(TimeSpan.FromSeconds(5)); // at the next renewal (lease/3)
    }

    [Fact]
    public async Task LockLostFiresWhenTheLeaseRunsOutWhileTheServerStopsAnswering()
    {
        using var server = new RuvioServer();
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var sp = Services(server, prefix, ",asyncTimeout=500");
        var locks = sp.GetRequiredService<IRuvioLocks>();
        await locks.GetDatabaseAsync(); // connected first: the clock below starts just before the LEASE is sent
        var sent = Stopwatch.StartNew();
        var held = await locks.TryAcquireAsync("job", lease: TimeSpan.FromMilliseconds(3000));
        var lostAt = new TaskCompletionSource<TimeSpan>();
        held!.LockLost.Register(() => lostAt.TrySetResult(sent.Elapsed));
        server.Pause();
        try
        {
            var at = await lostAt.Task.WaitAsync(TimeSpan.FromSeconds(10));
            // No renewal can be answered, so the loss is signalled as the lease runs out: not before lease - margin
            // (3000 - 300 ms) after the send. That it comes before the server's deadline, on a monotonic clock and
            // under a starved thread pool, is the client's proof (its lock helper tests); here the clock starts at
            // an unknown moment before the send on a loaded machine, so the upper bound has slack.
            Assert.True(at > TimeSpan.FromMilliseconds(2600), $"LockLost fired early, {at.TotalMilliseconds:0} ms after the send");
            Assert.True(at < TimeSpan.FromMilliseconds(5000), $"LockLost fired {at.TotalMilliseconds:0} ms after the send");
            Assert.True(held.IsLost);
        }
        finally
        {
            server.Resume();
        }
        // The server agrees: the lease expired (the key goes away); the lost lock's release frees nothing.
        var db = await locks.GetDatabaseAsync();
        // Right after SIGCONT the server first works through what queued up while it was stopped: a LOCKINFO that
        // gets no reply within this test's short asyncTimeout (500 ms) is asked again.
        await Wait.UntilAsync(async () =>
        {
            try { return await db.LockInfoAsync(prefix + "job") is null; }
            catch (RuvioTimeoutException) { return false; }
        }, TimeSpan.FromSeconds(10), "the lease expired on the server");
        Assert.False(await held.ReleaseAsync());
    }

    [Fact]
    public async Task SemaphoreSlotsAreLimitedAndAWaiterGetsAFreedSlot()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var sp = Services(_f.Server, prefix);
        var locks = sp.GetRequiredService<IRuvioLocks>();
        var one = await locks.TryAcquireSemaphoreAsync("exports", 2);
        await using var two = await locks.TryAcquireSemaphoreAsync("exports", 2);
        Assert.NotNull(one);
        Assert.NotNull(two);
        Assert.Null(await locks.TryAcquireSemaphoreAsync("exports", 2));
        var third = locks.AcquireSemaphoreAsync("exports", 2, timeout: TimeSpan.FromSeconds(5));
        await Task.Delay(200);
        Assert.False(third.IsCompleted);
        await one!.ReleaseAsync();
        await using var got = await third;
        Assert.True(got.Token > two!.Token);
        var info = await (await locks.GetDatabaseAsync()).LockInfoAsync(prefix + "exports");
        Assert.Equal("semaphore", info!.Kind);
        Assert.Equal(2, info.Holders.Count);
    }

    [Fact]
    public async Task DurabilityReplicasMakesGrantsDurable()
    {
        // A lone server has no replica: a durable grant cannot be acknowledged, so LEASE answers NOREPLICAS (the
        // client resends it for a few seconds first). Without the option the same server grants at once.
        var prefix = $"t{Guid.NewGuid():n}:";
        var services = new ServiceCollection();
        services.AddLogging();
        services.AddSingleton<IConfiguration>(new ConfigurationBuilder()
            .AddInMemoryCollection(new Dictionary<string, string?> { ["ConnectionStrings:Ruvio"] = _f.Server.Address })
            .Build());
        services.AddRuvioDistributedLock(o => { o.KeyPrefix = prefix; o.DurabilityReplicas = 1; });
        await using var sp = services.BuildServiceProvider();
        var locks = sp.GetRequiredService<IRuvioLocks>();
        Assert.Equal(1, (await locks.GetDatabaseAsync()).Connection.Options.DurabilityReplicas);
        var e = await Assert.ThrowsAsync<RuvioServerException>(() => locks.TryAcquireAsync("durable"));
        Assert.Equal("NOREPLICAS", e.Code);

        await using var plain = Services(_f.Server, prefix);
        await using var held = await plain.GetRequiredService<IRuvioLocks>().TryAcquireAsync("durable");
        Assert.NotNull(held);
    }

    [Fact]
    public async Task TheKeyIsThePrefixPlusTheName()
    {
        var prefix = $"t{Guid.NewGuid():n}:lock:";
        await using var sp = Services(_f.Server, prefix);
        var locks = sp.GetRequiredService<IRuvioLocks>();
        Assert.Equal(prefix + "nightly-report", locks.GetKey("nightly-report"));
        await using var held = await locks.TryAcquireAsync("nightly-report");
        var info = await (await locks.GetDatabaseAsync()).LockInfoAsync(prefix + "nightly-report");
        Assert.Equal(held!.Token, Assert.Single(info!.Holders).Token);
    }
}
