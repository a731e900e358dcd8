using System.Diagnostics;
using System.Net;
using System.Text.Json;

namespace Ruvio.AspNetCore.DistributedLock.Tests;

/// <summary>
/// Endpoint locks across two instances of the sample app (separate processes, real Kestrel on 127.0.0.1 ports,
/// one real ruvio). The handler keeps a record in Ruvio (how many handlers of an order run now, and overlaps), so
/// "never at the same time" is checked against that shared record, not by timing alone.
/// </summary>
public sealed class EndpointLockTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;

    public EndpointLockTests(RuvioFixture f) => _f = f;

    private static async Task<(HttpStatusCode Status, string? MediaType, TimeSpan? RetryAfter, string Body)[]> TwentyAtOnceAsync(SampleApp a, SampleApp b, string path)
    {
        var go = new TaskCompletionSource();
        var requests = Enumerable.Range(0, 20).Select(async i =>
        {
            await go.Task;
            using var r = await (i % 2 == 0 ? a : b).PostAsync(path);
            return (r.StatusCode, r.Content.Headers.ContentType?.MediaType, r.Headers.RetryAfter?.Delta, await r.Content.ReadAsStringAsync());
        }).ToList();
        go.SetResult();
        return await Task.WhenAll(requests);
    }

    [Fact]
    public async Task TwentyConcurrentRequestsForOneOrderOverTwoInstancesNeverOverlapAndTheOthersGet409()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix);
        await using var b = await SampleApp.StartAsync(_f.Server, "b", prefix);
        var order = Guid.NewGuid().ToString("n")[..8];
        await using var conn = await _f.Server.ConnectAsync();
        var db = await conn.GetDefaultDatabaseAsync();

        // 20 at once, 10 to each instance, each handler taking 500 ms: the first to take the lock runs, the others
        // are answered 409 at once.
        var results = await TwentyAtOnceAsync(a, b, $"orders/{order}/pay?ms=500");
        var ok = results.Where(r => r.Status == HttpStatusCode.OK).ToList();
        Assert.NotEmpty(ok);
        foreach (var r in results.Where(r => r.Status != HttpStatusCode.OK))
        {
            Assert.Equal(HttpStatusCode.Conflict, r.Status);
            Assert.Equal("application/problem+json", r.MediaType);
            Assert.Equal(TimeSpan.FromSeconds(1), r.RetryAfter);
            var problem = JsonDocument.Parse(r.Body).RootElement;
            Assert.Equal(409, problem.GetProperty("status").GetInt32());
            Assert.Equal($"order:{order}", problem.GetProperty("lock").GetString());
        }
        Assert.True(ok.Count < 20, "no request was rejected");
        Assert.True((await db.ExecuteAsync("GET", $"sample:overlaps:{order}")).IsNull, "two handlers of one order ran at the same time");

        // 20 at once again, now on the endpoint that waits in the server's queue: every one runs, one after another,
        // on both instances, and the shared record shows no two handlers of the order at the same time.
        var queued = await TwentyAtOnceAsync(a, b, $"orders/{order}/pay-queued?ms=30");
        Assert.All(queued, r => Assert.Equal(HttpStatusCode.OK, r.Status));
        var bodies = queued.Select(r => JsonDocument.Parse(r.Body).RootElement).ToList();
        Assert.Equal(new[] { "a", "b" }, bodies.Select(x => x.GetProperty("instance").GetString()!).Distinct().Order().ToArray());
        var tokens = bodies.Select(x => long.Parse(x.GetProperty("token").GetString()!)).ToList();
        Assert.Equal(20, tokens.Distinct().Count());
        // Each payment is a fenced write (IFGT) under its request's token: all accepted means each holder's token was
        // above the previous writer's, i.e. the handlers ran in grant order.
        Assert.All(bodies, x => Assert.Equal(1, x.GetProperty("fencedWrite").GetInt32()));

        Assert.True((await db.ExecuteAsync("GET", $"sample:overlaps:{order}")).IsNull, "two handlers of one order ran at the same time");
        Assert.Equal("0", (await db.ExecuteAsync("GET", $"sample:active:{order}")).AsString());
        var started = (await a.StatsAsync()).GetProperty("payStarted").GetInt64() + (await b.StatsAsync()).GetProperty("payStarted").GetInt64();
        Assert.Equal(ok.Count + 20, started); // a rejected request never reached its handler
        Assert.Null(await db.LockInfoAsync(prefix + $"order:{order}")); // released after the last request
    }

    [Fact]
    public async Task AnotherOrderRunsInParallel()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix);
        await using var b = await SampleApp.StartAsync(_f.Server, "b", prefix);
        var slow = a.PostAsync("orders/slow/pay?ms=2000");
        await Wait.UntilAsync(async () => (await a.StatsAsync()).GetProperty("payStarted").GetInt64() == 1, TimeSpan.FromSeconds(10), "the slow order's handler started");

        var sw = Stopwatch.StartNew();
        using (var other = await b.PostAsync("orders/other/pay?ms=10"))
            Assert.Equal(HttpStatusCode.OK, other.StatusCode);
        using (var sameOnOtherInstance = await b.PostAsync("orders/slow/pay?ms=10"))
            Assert.Equal(HttpStatusCode.Conflict, sameOnOtherInstance.StatusCode);
        Assert.False(slow.IsCompleted, $"the other order should have been answered while the slow one still ran ({sw.ElapsedMilliseconds} ms)");
        using var slowResponse = await slow;
        Assert.Equal(HttpStatusCode.OK, slowResponse.StatusCode);
    }

    [Fact]
    public async Task ServerPausedMidRequestAnswers503AndFiresTheHandlersRequestAborted()
    {
        using var server = new RuvioServer(); // paused by this test: its own
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var a = await SampleApp.StartAsync(server, "a", prefix, "--Lock:DefaultLeaseMs", "1500",
            "--ConnectionStrings:Ruvio", server.Address + ",asyncTimeout=1000");
        var request = a.PostAsync("orders/9/pay?ms=20000");
        await Wait.UntilAsync(async () => (await a.StatsAsync()).GetProperty("payStarted").GetInt64() == 1, TimeSpan.FromSeconds(10), "the handler started");
        var paused = Stopwatch.StartNew();
        server.Pause();
        try
        {
            using var response = await request.WaitAsync(TimeSpan.FromSeconds(10));
            var answeredAfter = paused.Elapsed;
            Assert.Equal(HttpStatusCode.ServiceUnavailable, response.StatusCode);
            Assert.Equal("application/problem+json", response.Content.Headers.ContentType?.MediaType);
            var problem = JsonDocument.Parse(await response.Content.ReadAsStringAsync()).RootElement;
            Assert.Equal(503, problem.GetProperty("status").GetInt32());
            Assert.Contains("lost", problem.GetProperty("title").GetString());
            // LockLost fires before the 1.5 s lease can run out on the server (LocksTests checks that instant), so the
            // answer comes long before the handler's 20 s; the bound leaves room for this shared, loaded machine.
            Assert.True(answeredAfter < TimeSpan.FromSeconds(6), $"answered {answeredAfter.TotalMilliseconds:0} ms after the pause");
            var stats = await a.StatsAsync();
            Assert.Equal(1, stats.GetProperty("payAborted").GetInt64()); // the handler saw RequestAborted fire
            Assert.Equal(0, stats.GetProperty("payCompleted").GetInt64());
        }
        finally
        {
            server.Resume();
        }
        // With Ruvio back, the same order can be paid again (the lost lock expired on the server).
        await Wait.UntilAsync(async () =>
        {
            using var again = await a.PostAsync("orders/9/pay?ms=10");
            return again.StatusCode == HttpStatusCode.OK;
        }, TimeSpan.FromSeconds(10), "the order is payable again after the server resumed");
    }

    [Fact]
    public async Task RuvioUnreachableAnswers503()
    {
        var server = new RuvioServer();
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var a = await SampleApp.StartAsync(server, "a", prefix, "--ConnectionStrings:Ruvio", server.Address + ",asyncTimeout=1000,connectTimeout=1000");
        server.Dispose(); // gone: connection refused from now on
        using var response = await a.PostAsync("orders/1/pay?ms=10");
        Assert.Equal(HttpStatusCode.ServiceUnavailable, response.StatusCode);
        var problem = JsonDocument.Parse(await response.Content.ReadAsStringAsync()).RootElement;
        Assert.Equal("The lock service is unavailable", problem.GetProperty("title").GetString());
        Assert.False(response.Headers.Contains("Retry-After"));
        Assert.Equal(0, (await a.StatsAsync()).GetProperty("payStarted").GetInt64());
    }
}
