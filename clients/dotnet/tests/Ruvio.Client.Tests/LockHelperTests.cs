using System.Diagnostics;
using Ruvio.Testing;

namespace Ruvio.Tests;

/// <summary>The lock helper: renewal at lease/3, loss before the server's deadline, normal release, hold cap, semaphore slots.</summary>
public sealed class LockHelperTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;
    public LockHelperTests(RuvioFixture f) => _f = f;

    [Fact]
    public async Task Held_lock_is_renewed_past_its_ttl_and_release_does_not_fire_LockLost()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("renewed");
        var l = await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(2000));
        Assert.NotNull(l);
        await Task.Delay(5000); // 2.5 TTLs: only renewals keep it
        Assert.False(l.IsLost, l.LostReason);
        var info = await db.LockInfoAsync(key);
        Assert.Equal(l.Token, Assert.Single(info!.Holders).Token);
        Assert.Null(await db.TryAcquireLockAsync(key, TimeSpan.FromSeconds(1)));
        Assert.True(await l.ReleaseAsync());
        Assert.False(l.LockLost.IsCancellationRequested);
        Assert.False(await l.ReleaseAsync()); // twice: false, no throw
        Assert.Null(await db.LockInfoAsync(key));
    }

    [Fact]
    public async Task Await_using_releases()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("using");
        long token;
        await using (var l = await db.TryAcquireLockAsync(key, TimeSpan.FromSeconds(30)))
        {
            token = l!.Token;
            Assert.True(token > 0);
        }
        Assert.Null(await db.LockInfoAsync(key));
        var again = (await db.LeaseAsync(key, 30_000))!.Value;
        Assert.True(again > token);
    }

    [Fact]
    public async Task Broken_lock_is_reported_lost_at_the_next_renewal()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("broken");
        var l = (await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(900)))!;
        var lost = new TaskCompletionSource();
        l.LockLost.Register(() => lost.TrySetResult());
        await db.ExecuteAsync("DEL", key);
        await lost.Task.WaitAsync(TimeSpan.FromSeconds(3));
        Assert.Contains("RENEW answered 0", l.LostReason);
        Assert.False(await l.ReleaseAsync()); // after a loss: false, never throws
    }

    [Fact]
    public async Task Hold_cap_fires_LockLost_before_the_capped_deadline()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("cap");
        var sent = Stopwatch.GetTimestamp();
        var l = (await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(1200), new RuvioLockOptions { MaxHold = TimeSpan.FromMilliseconds(3000) }))!;
        var lostAt = new TaskCompletionSource<long>();
        l.LockLost.Register(() => lostAt.TrySetResult(Stopwatch.GetTimestamp()));
        var at = await lostAt.Task.WaitAsync(TimeSpan.FromSeconds(5));
        var elapsed = Stopwatch.GetElapsedTime(sent, at);
        Assert.True(elapsed < TimeSpan.FromMilliseconds(3000), $"lost after {elapsed.TotalMilliseconds} ms, the cap is 3000 ms");
        Assert.True(elapsed > TimeSpan.FromMilliseconds(1800), $"lost after {elapsed.TotalMilliseconds} ms: renewals should have carried it well past one TTL");
        Assert.Contains("cap", l.LostReason);
        // The server lets it expire at the cap: soon after, nobody holds it.
        await Helpers.WaitUntil(async () => await db.LockInfoAsync(key) is null, TimeSpan.FromSeconds(2), "the capped lock to expire");
    }

    [Fact]
    public async Task Semaphore_slots()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("slots");
        var o = new RuvioLockOptions { SemaphoreLimit = 2 };
        var a = await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(1500), o);
        var b = await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(1500), o);
        Assert.NotNull(a);
        Assert.NotNull(b);
        Assert.True(b.Token > a.Token);
        Assert.Null(await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(1500), o));
        await Task.Delay(2500); // both slots renewed
        var info = (await db.LockInfoAsync(key))!;
        Assert.Equal("semaphore", info.Kind);
        Assert.Equal(new[] { a.Token, b.Token }, info.Holders.Select(h => h.Token));
        Assert.True(await a.ReleaseAsync());
        var third = await db.TryAcquireLockAsync(key, TimeSpan.FromMilliseconds(1500), o);
        Assert.NotNull(third);
        Assert.True(await b.ReleaseAsync());
        Assert.True(await third.ReleaseAsync());
        Assert.False(a.IsLost || b.IsLost || third.IsLost);
    }

    [Fact]
    public async Task Wait_hands_over_when_the_holder_releases()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("handover");
        var first = (await db.TryAcquireLockAsync(key, TimeSpan.FromSeconds(30)))!;
        var waiting = db.TryAcquireLockAsync(key, TimeSpan.FromSeconds(30), new RuvioLockOptions { Wait = TimeSpan.FromSeconds(10) });
        await Helpers.WaitUntil(async () => (await db.LockInfoAsync(key))!.Waiters == 1, TimeSpan.FromSeconds(5), "the waiter to queue");
        // The multiplexed connection is not held up by the waiter.
        Assert.True(await db.PingAsync() < TimeSpan.FromSeconds(1));
        var released = Stopwatch.GetTimestamp();
        Assert.True(await first.ReleaseAsync());
        var second = await waiting;
        Assert.NotNull(second);
        Assert.True(Stopwatch.GetElapsedTime(released) < TimeSpan.FromSeconds(1));
        Assert.True(second.Token > first.Token);
        Assert.True(await second.ReleaseAsync());
    }

    [Fact]
    public async Task Released_locks_leave_the_watchdog_and_held_ones_still_fire()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        // Held through the churn below, not renewed: its LockLost must still fire before its deadline, i.e. the
        // watchdog's compactions keep live entries.
        var ttl = TimeSpan.FromMilliseconds(4000);
        var sent = Stopwatch.GetTimestamp();
        var held = (await db.TryAcquireLockAsync(Helpers.Key("held"), ttl, new RuvioLockOptions { AutoRenew = false }))!;
        long lostAt = 0;
        held.LockLost.Register(() => Volatile.Write(ref lostAt, Stopwatch.GetTimestamp()));
        var key = Helpers.Key("churn");
        const int Cycles = 5000;
        for (var i = 0; i < Cycles; i++)
        {
            var l = (await db.TryAcquireLockAsync(key, TimeSpan.FromSeconds(30)))!;
            Assert.True(await l.ReleaseAsync());
        }
        // Each released lock used to stay queued (and reachable) until its old deadline, 29 s later.
        var queued = LockWatchdog.Count;
        Assert.True(queued < 2500, $"{queued} entries in the lock watchdog's queue after {Cycles} released locks");
        await Helpers.WaitUntil(() => Task.FromResult(Volatile.Read(ref lostAt) != 0), TimeSpan.FromSeconds(6), "LockLost of the held lock");
        var at = Stopwatch.GetElapsedTime(sent, lostAt);
        Assert.True(at < ttl, $"LockLost fired {at.TotalMilliseconds:0} ms after the send; the server deadline is {ttl.TotalMilliseconds} ms");
        Assert.Contains("no renewal succeeded", held.LostReason);
    }
}

/// <summary>LockLost fires on time with every thread-pool thread blocked (its timer does not depend on the pool).</summary>
[Collection("starvation")]
public sealed class LockStarvationTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;
    public LockStarvationTests(RuvioFixture f) => _f = f;

    [Fact]
    public async Task LockLost_fires_before_the_deadline_while_every_pool_thread_is_blocked()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("starved");
        var ttl = TimeSpan.FromMilliseconds(2000);
        var sent = Stopwatch.GetTimestamp();
        var l = (await db.TryAcquireLockAsync(key, ttl))!;
        long lostAt = 0;
        var lostSignal = new ManualResetEventSlim();
        l.LockLost.Register(() =>
        {
            lostAt = Stopwatch.GetTimestamp();
            lostSignal.Set();
        });

        // Block every pool thread (and keep the pool from adding threads) until the deadline has surely passed.
        ThreadPool.GetMinThreads(out var minWorkers, out var minIo);
        ThreadPool.GetMaxThreads(out var maxWorkers, out var maxIo);
        var workers = Environment.ProcessorCount;
        Assert.True(ThreadPool.SetMinThreads(1, minIo));
        Assert.True(ThreadPool.SetMaxThreads(workers, maxIo), $"could not cap the pool at {workers} threads");
        var release = new ManualResetEventSlim(); // not disposed: queued blockers still wait on it after the test
        var blocked = 0;
        long probeRanAt = 0;
        try
        {
            for (var i = 0; i < workers * 4; i++)
                ThreadPool.UnsafeQueueUserWorkItem(_ => { Interlocked.Increment(ref blocked); release.Wait(); }, null);
            // Queued behind the blockers: it runs only once the pool is free again.
            ThreadPool.UnsafeQueueUserWorkItem(_ => Volatile.Write(ref probeRanAt, Stopwatch.GetTimestamp()), null);
            var watcher = new Thread(() =>
            {
                lostSignal.Wait(TimeSpan.FromSeconds(5));
                Thread.Sleep(200);
                release.Set();
            });
            watcher.Start();
            watcher.Join();
        }
        finally
        {
            release.Set();
            ThreadPool.SetMaxThreads(maxWorkers, maxIo);
            ThreadPool.SetMinThreads(minWorkers, minIo);
        }
        Assert.True(lostSignal.IsSet, "LockLost did not fire while the pool was starved");
        await Helpers.WaitUntil(() => Task.FromResult(Volatile.Read(ref probeRanAt) != 0), TimeSpan.FromSeconds(5), "the probe work item");
        // The proof that no pool thread was free from the acquisition until after LockLost fired: a work item queued
        // right then ran only afterwards (and the renewals, which need the pool, did not happen).
        Assert.True(probeRanAt > lostAt, "the pool was not starved when LockLost fired");
        var at = Stopwatch.GetElapsedTime(sent, lostAt);
        Assert.True(at < ttl, $"LockLost fired {at.TotalMilliseconds:0} ms after the send; the server deadline is {ttl.TotalMilliseconds} ms");
        Assert.Contains("no renewal succeeded", l.LostReason);
        Assert.False(await l.ReleaseAsync());
    }
}
