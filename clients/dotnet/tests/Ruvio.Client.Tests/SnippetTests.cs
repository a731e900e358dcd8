using System.Net;
using Ruvio.Testing;

namespace Ruvio.Tests;

/// <summary>
/// The product post's C# snippets, copied verbatim (they connect to 127.0.0.1:6379; an internal test seam points
/// that address at this test's server), run against a real ruvio and behave as their comments say.
/// </summary>
[Collection("snippets")] // the seam is process-wide: these tests do not run in parallel with each other
public sealed class SnippetTests : IClassFixture<RuvioFixture>, IDisposable
{
    private readonly RuvioFixture _f;

    public SnippetTests(RuvioFixture f)
    {
        _f = f;
        var port = f.Server.Port;
        PhysicalConnection.EndPointRewriter = ep => ep is IPEndPoint { Port: 6379 } ip && IPAddress.IsLoopback(ip.Address) ? new IPEndPoint(IPAddress.Loopback, port) : ep;
    }

    public void Dispose() => PhysicalConnection.EndPointRewriter = null;

    // ---- verbatim from the post (lease) ----
    private static async Task LeaseSnippet()
    {
        await using var connection = await RuvioConnection.ConnectAsync("127.0.0.1", 6379);
        var db = await connection.GetDefaultDatabaseAsync();

        long? token = await db.LeaseAsync("job:nightly-report", 30_000);
        // token -> you hold it
        // null -> someone else holds it
        if (token is long held)
        {
            long released = await db.ReleaseAsync("job:nightly-report", held);
            // 1 -> released (0 if the token no longer matches)
        }
    }

    // ---- verbatim from the post (semaphore) ----
    private static async Task SemaphoreSnippet()
    {
        await using var connection = await RuvioConnection.ConnectAsync("127.0.0.1", 6379);
        var db = await connection.GetDefaultDatabaseAsync();

        long? token = await db.AcquireSemaphoreAsync("upstream:billing", 8, 15_000);
        // 1700000000123 -> a slot, this is your token
        // null          -> all 8 slots are taken
        if (token is long held)
        {
            await db.ReleaseAsync("upstream:billing", held);
        }
    }

    private static async Task<List<(string Command, object?[] Args, RuvioResult Reply)>> Record(Func<Task> snippet)
    {
        var calls = new List<(string, object?[], RuvioResult)>();
        RuvioConnection.Recorder.Value = calls;
        try { await snippet(); }
        finally { RuvioConnection.Recorder.Value = null; }
        return calls;
    }

    [Fact]
    public async Task Lease_snippet_holds_then_releases()
    {
        var calls = await Record(LeaseSnippet);
        Assert.Equal(2, calls.Count);
        Assert.Equal("LEASE", calls[0].Command);
        var token = calls[0].Reply.AsInt64();
        Assert.True(token > 0);
        Assert.Equal("RELEASE", calls[1].Command);
        Assert.Equal(new object?[] { "job:nightly-report", token }, calls[1].Args);
        Assert.Equal(1, calls[1].Reply.AsInt64());
        await using var admin = await Helpers.Connect(_f.Server);
        Assert.Null(await admin.GetDatabase().LockInfoAsync("job:nightly-report"));
    }

    [Fact]
    public async Task Lease_snippet_gets_null_when_someone_else_holds_it()
    {
        await using var admin = await Helpers.Connect(_f.Server);
        var db = admin.GetDatabase();
        var other = await db.LeaseAsync("job:nightly-report", 30_000);
        Assert.NotNull(other);
        try
        {
            var calls = await Record(LeaseSnippet);
            Assert.True(Assert.Single(calls).Reply.IsNull); // LEASE -> null, nothing released
            var info = await db.LockInfoAsync("job:nightly-report");
            Assert.Equal(other, Assert.Single(info!.Holders).Token);
        }
        finally
        {
            await db.ReleaseAsync("job:nightly-report", other!.Value);
        }
    }

    [Fact]
    public async Task Semaphore_snippet_takes_a_slot_and_null_when_all_are_taken()
    {
        var calls = await Record(SemaphoreSnippet);
        Assert.Equal(2, calls.Count);
        Assert.Equal(new object?[] { "upstream:billing", 8, 15_000L }, calls[0].Args);
        Assert.True(calls[0].Reply.AsInt64() > 0);
        Assert.Equal(1, calls[1].Reply.AsInt64());
        await using var admin = await Helpers.Connect(_f.Server);
        var db = admin.GetDatabase();
        Assert.Null(await db.LockInfoAsync("upstream:billing"));
        var held = new List<long>();
        for (var i = 0; i < 8; i++) held.Add((await db.AcquireSemaphoreAsync("upstream:billing", 8, 15_000))!.Value);
        try
        {
            Assert.True(Assert.Single(await Record(SemaphoreSnippet)).Reply.IsNull);
        }
        finally
        {
            foreach (var t in held) await db.ReleaseAsync("upstream:billing", t);
        }
    }

    [Fact]
    public async Task Release_with_a_stale_token_answers_zero()
    {
        await using var c = await RuvioConnection.ConnectAsync("127.0.0.1", 6379);
        var db = await c.GetDefaultDatabaseAsync();
        var key = Helpers.Key("stale");
        var t = (await db.LeaseAsync(key, 30_000))!.Value;
        Assert.Equal(1, await db.ReleaseAsync(key, t));
        Assert.Equal(0, await db.ReleaseAsync(key, t));
    }
}
