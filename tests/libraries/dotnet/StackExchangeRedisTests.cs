using System.Net;
using Ruvio.Testing;
using StackExchange.Redis;

namespace Ruvio.LibraryProof;

/// <summary>StackExchange.Redis 3.4.35's LockTake / LockExtend / LockQuery / LockRelease, unchanged.</summary>
[Collection("servers")]
public sealed class StackExchangeRedisTests(Servers servers)
{
    [Theory]
    [InlineData("ruvio")]
    [InlineData("redis")]
    public async Task LockTake_LockExtend_LockRelease(string kind)
    {
        await using var mux = await ConnectionMultiplexer.ConnectAsync(servers.Of(kind).Address);
        var db = mux.GetDatabase();
        var key = Keys.New("se-lock");
        Assert.True(await db.LockTakeAsync(key, "owner-a", TimeSpan.FromSeconds(30)));
        Assert.False(await db.LockTakeAsync(key, "owner-b", TimeSpan.FromSeconds(30)));
        Assert.Equal("owner-a", (string?)await db.LockQueryAsync(key));
        Assert.True(await db.LockExtendAsync(key, "owner-a", TimeSpan.FromSeconds(60)));
        Assert.False(await db.LockExtendAsync(key, "owner-b", TimeSpan.FromSeconds(60)));
        Assert.InRange((await db.KeyTimeToLiveAsync(key))!.Value.TotalSeconds, 31, 60);
        Assert.False(await db.LockReleaseAsync(key, "owner-b")); // not the owner: refused
        Assert.Equal("owner-a", (string?)await db.LockQueryAsync(key));
        Assert.True(await db.LockReleaseAsync(key, "owner-a"));
        Assert.True((await db.LockQueryAsync(key)).IsNull);
        Assert.True(await db.LockTakeAsync(key, "owner-b", TimeSpan.FromMilliseconds(300)));
        await Task.Delay(700); // expired
        Assert.True(await db.LockTakeAsync(key, "owner-c", TimeSpan.FromSeconds(30)));
        Assert.True(await db.LockReleaseAsync(key, "owner-c"));
    }

    [Theory]
    [InlineData("ruvio")]
    [InlineData("redis")]
    public async Task Resp3_and_concurrent_lock_cycles(string kind)
    {
        await using var mux = await ConnectionMultiplexer.ConnectAsync($"{servers.Of(kind).Address},protocol=resp3,name=proof");
        var db = mux.GetDatabase();
        var key = Keys.New("se-contend");
        var inside = 0;
        var cycles = 0;
        await Task.WhenAll(Enumerable.Range(0, 20).Select(async i =>
        {
            var me = $"worker-{i}";
            for (var n = 0; n < 10;)
            {
                if (!await db.LockTakeAsync(key, me, TimeSpan.FromSeconds(10))) { await Task.Delay(1); continue; }
                Assert.Equal(1, Interlocked.Increment(ref inside));
                Interlocked.Decrement(ref inside);
                Assert.True(await db.LockReleaseAsync(key, me));
                Interlocked.Increment(ref cycles);
                n++;
            }
        }));
        Assert.Equal(200, cycles);
    }

    /// <summary>StackExchange.Redis's Sentinel mode (serviceName=) against three ruvio coordinators: it finds the
    /// primary, takes a lock there, and after kill -9 of the primary takes locks on the new one.</summary>
    [Fact]
    public async Task Sentinel_mode_against_three_ruvio_coordinators()
    {
        const string service = "mymaster";
        using var primary = ServerProcess.StartRuvio();
        using var replica = ServerProcess.StartRuvio("--replicaof", $"127.0.0.1 {primary.Port}");
        var coordinators = ServerProcess.StartCoordinators(primary.Port, service);
        try
        {
            foreach (var c in coordinators)
            {
                await using var s = await ConnectionMultiplexer.ConnectAsync($"{c.Address},allowAdmin=true");
                var sw = System.Diagnostics.Stopwatch.StartNew();
                while ((await s.GetServer(c.Address).SentinelReplicasAsync(service)).Length < 1)
                {
                    Assert.True(sw.Elapsed < TimeSpan.FromSeconds(60), "the coordinators did not learn the replica");
                    await Task.Delay(100);
                }
            }
            var config = string.Join(",", coordinators.Select(c => c.Address)) + $",serviceName={service},connectTimeout=2000,syncTimeout=2000,asyncTimeout=2000";
            await using var mux = await ConnectionMultiplexer.ConnectAsync(config);
            var db = mux.GetDatabase();
            var key = Keys.New("se-sentinel");
            Assert.True(await db.LockTakeAsync(key, "a", TimeSpan.FromSeconds(60)));
            Assert.Equal(primary.Port, ((IPEndPoint)(await db.IdentifyEndpointAsync())!).Port);
            Assert.True(await db.LockReleaseAsync(key, "a"));

            primary.Kill9();
            var deadline = System.Diagnostics.Stopwatch.StartNew();
            while (true)
            {
                try
                {
                    if (await db.LockTakeAsync(key, "b", TimeSpan.FromSeconds(60))) break;
                }
                catch (RedisException) { }
                Assert.True(deadline.Elapsed < TimeSpan.FromSeconds(90), "StackExchange.Redis did not reach the new primary within 90 s");
                await Task.Delay(200);
            }
            Assert.Equal(replica.Port, ((IPEndPoint)(await db.IdentifyEndpointAsync())!).Port);
            Assert.True(await db.LockReleaseAsync(key, "b"));
        }
        finally
        {
            foreach (var c in coordinators) c.Dispose();
        }
    }
}
