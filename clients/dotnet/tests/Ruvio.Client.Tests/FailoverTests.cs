using System.Collections.Concurrent;
using System.Diagnostics;
using Ruvio.Testing;

namespace Ruvio.Tests;

/// <summary>
/// Failover discovery through three <c>ruvio coordinator</c>s (the Sentinel protocol, <c>serviceName=</c>): kill -9 of
/// the primary while durable grants are being taken; the client follows the switch, every acknowledged durable grant
/// keeps its token on the new primary, and new tokens are larger.
/// </summary>
public sealed class FailoverTests
{
    private const string Service = "mymaster";

    [Fact]
    public async Task Kill9_of_the_primary_keeps_every_acknowledged_durable_grant()
    {
        using var primary = ServerProcess.StartRuvio("--appendfsync", "always");
        using var replica = ServerProcess.StartRuvio("--appendfsync", "always", "--replicaof", $"127.0.0.1 {primary.Port}");
        var coordinators = ServerProcess.StartCoordinators(primary.Port, Service, 3, durabilityReplicas: 1);
        try
        {
            var sentinelString = string.Join(",", coordinators.Select(c => c.Address)) + $",serviceName={Service}";
            // Every coordinator knows the replica, and the primary counts it for durable writes.
            foreach (var co in coordinators)
            {
                await using var s = await RuvioConnection.ConnectAsync($"{co.Address},protocol=resp2");
                await Helpers.WaitUntil(async () => (await s.GetDatabase().ExecuteAsync("SENTINEL", "REPLICAS", Service)).Items.Count == 1,
                    TimeSpan.FromSeconds(60), "the coordinators to know the replica");
            }
            await using (var p = await Helpers.Connect(primary))
                await Helpers.WaitUntil(async () => (await p.GetDatabase().ExecuteAsync("INFO", "replication")).AsString()!.Contains("durable=1"),
                    TimeSpan.FromSeconds(60), "the replica to count for durable writes");

            var o = RuvioOptions.Parse(sentinelString + ",asyncTimeout=3000,connectTimeout=1000");
            o.DurabilityReplicas = 1;
            await using var c = await RuvioConnection.ConnectAsync(o);
            Assert.Equal(primary.Port, ((System.Net.IPEndPoint)c.CurrentEndPoint!).Port);
            var changed = new TaskCompletionSource<RuvioPrimaryChangedEventArgs>(TaskCreationOptions.RunContinuationsAsynchronously);
            c.PrimaryChanged += (_, e) => changed.TrySetResult(e);
            var db = c.GetDatabase();
            var prefix = Helpers.Key("failover");

            // Take durable grants until some time after the kill; keep those that were acknowledged.
            var acknowledged = new ConcurrentDictionary<string, long>();
            var stop = new CancellationTokenSource();
            var unknown = 0;
            var worker = Task.Run(async () =>
            {
                for (var i = 0; !stop.IsCancellationRequested; i++)
                {
                    var key = $"{prefix}:{i}";
                    try
                    {
                        if (await db.LeaseAsync(key, 120_000) is long t) acknowledged[key] = t;
                    }
                    catch (RuvioException e) when (e.FateUnknown || e is RuvioConnectionException or RuvioTimeoutException or RuvioServerException)
                    {
                        Interlocked.Increment(ref unknown);
                        await Task.Delay(50);
                    }
                }
            });
            await Helpers.WaitUntil(() => Task.FromResult(acknowledged.Count >= 20), TimeSpan.FromSeconds(30), "20 durable grants");
            primary.Kill9();
            var e = await changed.Task.WaitAsync(TimeSpan.FromSeconds(60));
            Assert.Equal(replica.Port, ((System.Net.IPEndPoint)e.NewPrimary).Port);
            // The new primary has no replica left, so durable grants are refused there (-NOREPLICAS): stop taking them.
            stop.Cancel();
            await worker;

            var before = acknowledged.Where(kv => kv.Value > 0).ToList();
            Assert.True(before.Count >= 20);
            await using var check = await Helpers.Connect(replica);
            foreach (var (key, token) in before)
            {
                var info = await check.GetDatabase().LockInfoAsync(key);
                Assert.True(info is not null, $"the acknowledged grant {key} (token {token}) is missing on the new primary");
                Assert.Equal(token, Assert.Single(info.Holders).Token);
            }
            // A new grant on the new primary (asynchronous: it has no replica now), through the coordinators again.
            await using var plain = await RuvioConnection.ConnectAsync(sentinelString);
            Assert.Equal(replica.Port, ((System.Net.IPEndPoint)plain.CurrentEndPoint!).Port);
            var fresh = (await plain.GetDatabase().LeaseAsync($"{prefix}:after", 30_000))!.Value;
            Assert.True(fresh > before.Max(kv => kv.Value), "a new token must be larger than every token granted before");
        }
        finally
        {
            foreach (var co in coordinators) co.Dispose();
        }
    }
}
