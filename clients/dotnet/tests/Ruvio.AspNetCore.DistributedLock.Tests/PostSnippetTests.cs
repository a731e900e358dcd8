using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;

namespace Ruvio.AspNetCore.DistributedLock.Tests;

/// <summary>An ordinary worker, as in the post.</summary>
public sealed class OutboxPublisher : BackgroundService
{
    protected override Task ExecuteAsync(CancellationToken stoppingToken) => Task.Delay(Timeout.Infinite, stoppingToken);
}

/// <summary>
/// The product post's ASP.NET Core snippet, copied verbatim between the BEGIN/END markers below (a test checks the
/// copy against the post itself), compiled in an app with only <c>using Ruvio.AspNetCore.DistributedLock;</c> and
/// <c>using Ruvio;</c> beyond the Web SDK's implicit usings, and run against a real ruvio.
/// </summary>
public sealed class PostSnippetTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;
    private readonly List<CancellationToken> _reportRuns = [];

    public PostSnippetTests(RuvioFixture f) => _f = f;

    private Task RunReportAsync(CancellationToken lockLost)
    {
        _reportRuns.Add(lockLost);
        return Task.CompletedTask;
    }

    private static Task<IResult> PayAsync(string id) => Task.FromResult(Results.Text($"paid {id}"));

    private async Task Snippet(IServiceCollection services, IRuvioLocks locks, WebApplication app)
    {
        // BEGIN post snippet
services.AddRuvioDistributedLock(options => options.KeyPrefix = "myapp:lock:");

await using IRuvioLock? held = await locks.TryAcquireAsync(
    "nightly-report", lease: TimeSpan.FromSeconds(30), wait: TimeSpan.FromSeconds(5));

if (held is null) return;               // someone else runs it

await RunReportAsync(held.LockLost);    // stops if the lock is lost mid-run

// Or keep a background worker running on exactly one instance; another takes over if it stops.
services.AddRuvioSingleton<OutboxPublisher>("outbox-publisher");

// Or guard an endpoint: one request per order at a time, across every instance.
app.UseRuvioLock();
app.MapPost("/orders/{id}/pay", PayAsync).WithMetadata(new RuvioLockAttribute("order:{id}"));
        // END post snippet
    }

    private static string? FindPost()
    {
        if (Environment.GetEnvironmentVariable("RUVIO_PRODUCT_POST") is { Length: > 0 } p) return p;
        for (var d = new DirectoryInfo(AppContext.BaseDirectory); d is not null; d = d.Parent)
        {
            var candidate = Path.Combine(d.FullName, "shared", "product", "fencing-tokens-with-lease.md");
            if (File.Exists(candidate)) return candidate;
        }
        return null;
    }

    private static string[] Lines(string text) =>
        text.Replace("\r", "").Split('\n').Select(l => l.TrimEnd()).Where(l => l.Length > 0).ToArray();

    [Fact]
    public void TheCopyIsThePostsSnippetUntouched()
    {
        var post = FindPost() ?? throw new InvalidOperationException(
            "the product post (shared/product/fencing-tokens-with-lease.md beside the repository) was not found; set RUVIO_PRODUCT_POST to its path");
        var source = File.ReadAllText(Path.Combine(AppContext.BaseDirectory, "PostSnippetTests.cs"));
        var begin = source.IndexOf("// BEGIN post snippet", StringComparison.Ordinal);
        var end = source.IndexOf("        // END post snippet", StringComparison.Ordinal);
        var copy = Lines(source[(source.IndexOf('\n', begin) + 1)..end]);
        var postLines = Lines(File.ReadAllText(post));
        var start = Array.FindIndex(postLines, l => l == copy[0]);
        Assert.True(start >= 0, "the post has no line " + copy[0]);
        Assert.Equal(copy, postLines.Skip(start).Take(copy.Length).ToArray());
    }

    [Fact]
    public async Task TheSnippetRunsAsCommented()
    {
        var builder = WebApplication.CreateBuilder(new WebApplicationOptions { EnvironmentName = "Production" });
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.Logging.ClearProviders();
        builder.Configuration["ConnectionStrings:Ruvio"] = _f.Server.Address;
        builder.Services.AddRuvioDistributedLock(options => options.KeyPrefix = "myapp:lock:");
        await using var app = builder.Build();
        var locks = app.Services.GetRequiredService<IRuvioLocks>();
        var db = await locks.GetDatabaseAsync();
        await db.ExecuteAsync("DEL", "myapp:lock:nightly-report");

        // Someone else runs it (for longer than the 5 s wait): the snippet returns without running the report.
        var other = await locks.TryAcquireAsync("nightly-report", lease: TimeSpan.FromSeconds(30));
        Assert.NotNull(other);
        var services = new ServiceCollection();
        await Snippet(services, locks, app);
        Assert.Empty(_reportRuns);
        Assert.Equal(1, services.Count(d => d.ServiceType == typeof(IRuvioLocks))); // registered before the return

        // The holder releases within the wait: the snippet gets the lock, runs the report with its LockLost, and
        // registers the singleton and the endpoint lock.
        var snippet = Snippet(services, locks, app);
        await Task.Delay(500);
        await other!.ReleaseAsync();
        await snippet;
        var lockLost = Assert.Single(_reportRuns);
        Assert.False(lockLost.IsCancellationRequested);
        Assert.Null(await db.LockInfoAsync("myapp:lock:nightly-report")); // `await using` released it
        Assert.Contains(services, d => d.ServiceType == typeof(Microsoft.Extensions.Hosting.IHostedService));

        await app.StartAsync();
        using var client = new HttpClient { BaseAddress = new Uri(app.Urls.First()) };
        using var paid = await client.PostAsync("/orders/42/pay", null);
        Assert.Equal(HttpStatusCode.OK, paid.StatusCode);
        Assert.Equal("paid 42", await paid.Content.ReadAsStringAsync());
        // While another instance holds the order's lock, the endpoint answers 409.
        await using (var busy = await locks.TryAcquireAsync("order:43"))
        using (var conflict = await client.PostAsync("/orders/43/pay", null))
            Assert.Equal(HttpStatusCode.Conflict, conflict.StatusCode);
        await app.StopAsync();
    }
}
