using Medallion.Threading.Redis;
using StackExchange.Redis;

namespace Ruvio.LibraryProof;

/// <summary>DistributedLock.Redis 1.1.1, unchanged.</summary>
[Collection("servers")]
public sealed class DistributedLockTests(Servers servers)
{
    [Theory]
    [InlineData("ruvio")]
    [InlineData("redis")]
    public async Task Lock_acquire_refuse_release_and_wait(string kind)
    {
        await using var mux = await ConnectionMultiplexer.ConnectAsync(servers.Of(kind).Address);
        var db = mux.GetDatabase();
        var name = Keys.New("dl-lock");
        var a = new RedisDistributedLock(name, db);
        var b = new RedisDistributedLock(name, db);
        await using (var held = await a.TryAcquireAsync())
        {
            Assert.NotNull(held);
            Assert.False(held.HandleLostToken.IsCancellationRequested);
            Assert.Null(await b.TryAcquireAsync());
            // A waiter gets it once the holder releases (DistributedLock polls for it).
            var waiting = b.TryAcquireAsync(TimeSpan.FromSeconds(10)).AsTask();
            await Task.Delay(200);
            Assert.False(waiting.IsCompleted);
            await held.DisposeAsync();
            await using var second = await waiting;
            Assert.NotNull(second);
        }
        await using var third = await a.TryAcquireAsync();
        Assert.NotNull(third);
    }

    [Theory]
    [InlineData("ruvio")]
    [InlineData("redis")]
    public async Task Lock_extends_itself_past_its_expiry(string kind)
    {
        await using var mux = await ConnectionMultiplexer.ConnectAsync(servers.Of(kind).Address);
        var db = mux.GetDatabase();
        var name = Keys.New("dl-extend");
        var l = new RedisDistributedLock(name, db, o => o.Expiry(TimeSpan.FromSeconds(1)).ExtensionCadence(TimeSpan.FromMilliseconds(300)));
        await using var held = await l.AcquireAsync();
        await Task.Delay(2500);
        Assert.False(held.HandleLostToken.IsCancellationRequested);
        Assert.Null(await new RedisDistributedLock(name, db).TryAcquireAsync());
    }

    /// <summary>RedisDistributedSemaphore keeps its holders in a sorted set (ZADD, ZRANGEBYSCORE, ...), which Ruvio
    /// has since issue 33.</summary>
    [Theory]
    [InlineData("ruvio")]
    [InlineData("redis")]
    public async Task Semaphore_slots(string kind)
    {
        await using var mux = await ConnectionMultiplexer.ConnectAsync(servers.Of(kind).Address);
        var db = mux.GetDatabase();
        var name = Keys.New("dl-sem");
        var s = new RedisDistributedSemaphore(name, 2, db);
        await using var one = await s.TryAcquireAsync();
        await using var two = await s.TryAcquireAsync();
        Assert.NotNull(one);
        Assert.NotNull(two);
        Assert.Null(await s.TryAcquireAsync());
        await one!.DisposeAsync();
        await using var three = await s.TryAcquireAsync(TimeSpan.FromSeconds(5));
        Assert.NotNull(three);
    }
}
