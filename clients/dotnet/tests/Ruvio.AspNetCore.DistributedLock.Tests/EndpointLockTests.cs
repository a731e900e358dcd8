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

    [Fact]
    public async Task TwentyConcurrentRequestsForOneOrderOverTwoInstancesNeverOverlapAndTheOthersGet409()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        await using var a = await SampleApp.StartAsync(_f.Server, "a", prefix);
        await using var b = await SampleApp.StartAsync(_f.Server, "b", prefix);
        var order = Guid.NewGuid().ToString("n")[..8];

        // 20 requests spread over about a second, alternating between the instances; each handler takes 150 ms,
        // so some find the lock free (one after another) and the rest find it taken.
        var random = new Random(7);
        var requests = Enumerable.Range(0, 20).Select(async i =>
        {
            await Task.Delay(random.Next(0, 1000));
            var app = i % 2 == 0 ? a : b;
            using var r = await app.PostAsync($"orders/{order}/pay?ms=150");
            var body = await r.Content.ReadAsStringAsync();
            return (r.StatusCode, r.Content.Headers.ContentType?.MediaType, RetryAfter: r.Headers.RetryAfter?.Delta, body);
        }).ToList();
        var results = await Task.WhenAll(requests);

        var ok = results.Where(r => r.StatusCode == HttpStatusCode.OK).ToList();
        var rejected = results.Where(r => r.StatusCode != HttpStatusCode.OK).ToList();
        Assert.True(ok.Count >= 2, $"expected several requests to find the lock free one after another, got {ok.Count}");
        Assert.NotEmpty(rejected);
        foreach (var r in rejected)
        {
            Assert.Equal(HttpStatusCode.Conflict, r.StatusCode);
            Assert.Equal("application/problem+json", r.MediaType);
            Assert.Equal(TimeSpan.FromSeconds(1), r.RetryAfter);
            var problem = JsonDocument.Parse(r.body).RootElement;
            Assert.Equal(409, problem.GetProperty("status").GetInt32());
            Assert.Equal($"order:{order}", problem.GetProperty("lock").GetString());
        }
        // Both instances served some of the successful requests or rejected some: the lock is shared, not local.
        var instances = ok.Select(r => JsonDocument.Parse(r.body).RootElement.GetProperty("instance").GetString()).Distinct().ToList();
        var tokens = ok.Select(r => long.Parse(JsonDocument.Parse(r.body).RootElement.GetProperty("token").GetString()!)).ToList();
        Assert.Equal(tokens.Count, tokens.Distinct().Count());
        // Every payment was a fenced write under a token larger than the previous holder's: all accepted.
        Assert.All(ok, r => Assert.Equal(1, JsonDocument.Parse(r.body).RootElement.GetProperty("fencedWrite").GetInt32()));

        await using var conn = await _f.Server.ConnectAsync();
        var db = await conn.GetDefaultDatabaseAsync();
        Assert.True((await db.ExecuteAsync("GET", $"sample:overlaps:{order}")).IsNull, "two handlers of one order ran at the same time");
        Assert.Equal("0", (await db.ExecuteAsync("GET", $"sample:active:{order}")).AsString());
        var started = (await a.StatsAsync()).GetProperty("payStarted").GetInt64() + (await b.StatsAsync()).GetProperty("payStarted").GetInt64();
        Assert.Equal(ok.Count, started); // a rejected request never reached its handler
        Assert.True((await db.LockInfoAsync(prefix + $"order:{order}")) is null, "the lock was not released after the last request");
        Assert.NotEmpty(instances);
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
            // LockLost fires before the 1.5 s lease can run out on the server: well before the handler's 20 s.
            Assert.True(answeredAfter < TimeSpan.FromSeconds(3), $"answered {answeredAfter.TotalMilliseconds:0} ms after the pause");
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
