using System.Net;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Mvc;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;

namespace Ruvio.AspNetCore.DistributedLock.Tests;

/// <summary>
/// In-process apps on real Kestrel ports (127.0.0.1) and a real ruvio: start-up errors, the connection sources,
/// controllers, RequireRuvioLock, the OnRejected hook and status codes, release on exceptions, the health check.
/// </summary>
public sealed class StartupTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;

    public StartupTests(RuvioFixture f) => _f = f;

    private static WebApplicationBuilder Builder(params (string Key, string? Value)[] config)
    {
        var builder = WebApplication.CreateBuilder(new WebApplicationOptions { EnvironmentName = "Production" });
        builder.WebHost.UseUrls("http://127.0.0.1:0");
        builder.Logging.ClearProviders();
        foreach (var (key, value) in config) builder.Configuration[key] = value;
        return builder;
    }

    private static HttpClient Client(WebApplication app) => new() { BaseAddress = new Uri(app.Urls.First()), Timeout = TimeSpan.FromSeconds(30) };

    [Fact]
    public async Task ATemplateNamingAParameterTheRouteLacksFailsAtStartUp()
    {
        var builder = Builder(("ConnectionStrings:Ruvio", _f.Server.Address));
        builder.Services.AddRuvioDistributedLock();
        await using var app = builder.Build();
        app.UseRuvioLock();
        app.MapPost("/orders/{id}/pay", () => "paid").WithMetadata(new RuvioLockAttribute("order:{orderId}"));
        var e = await Assert.ThrowsAsync<InvalidOperationException>(() => app.StartAsync());
        Assert.Contains("{orderId}", e.Message);
        Assert.Contains("/orders/{id}/pay", e.Message);
    }

    [Fact]
    public async Task AMalformedTemplateFailsAtStartUp()
    {
        var builder = Builder(("ConnectionStrings:Ruvio", _f.Server.Address));
        builder.Services.AddRuvioDistributedLock();
        await using var app = builder.Build();
        app.UseRuvioLock();
        app.MapPost("/orders/{id}/pay", () => "paid").RequireRuvioLock("order:{id");
        var e = await Assert.ThrowsAsync<InvalidOperationException>(() => app.StartAsync());
        Assert.Contains("never closed", e.Message);
    }

    [Fact]
    public async Task LockMetadataWithoutUseRuvioLockFailsAtStartUp()
    {
        var builder = Builder(("ConnectionStrings:Ruvio", _f.Server.Address));
        builder.Services.AddRuvioDistributedLock();
        await using var app = builder.Build();
        app.MapPost("/orders/{id}/pay", () => "paid").WithMetadata(new RuvioLockAttribute("order:{id}"));
        var e = await Assert.ThrowsAsync<InvalidOperationException>(() => app.StartAsync());
        Assert.Contains("UseRuvioLock()", e.Message);
    }

    [Fact]
    public async Task UseRuvioLockWithoutAddRuvioDistributedLockFailsClearly()
    {
        var builder = Builder();
        await using var app = builder.Build();
        var e = Assert.Throws<InvalidOperationException>(() => app.UseRuvioLock());
        Assert.Contains("AddRuvioDistributedLock", e.Message);
    }

    [Fact]
    public async Task AMissingConnectionConfigurationFailsAtStartUpNamingWhereItMayComeFrom()
    {
        var builder = Builder();
        builder.Services.AddRuvioDistributedLock(o => o.KeyPrefix = "x:");
        await using var app = builder.Build();
        var e = await Assert.ThrowsAsync<OptionsValidationException>(() => app.StartAsync());
        Assert.Contains("ConnectionStrings:Ruvio", e.Message);
        Assert.Contains("RuvioDistributedLockOptions.Configuration", e.Message);
    }

    [Fact]
    public async Task InvalidOptionsFailAtStartUp()
    {
        var builder = Builder(("Ruvio:EndPoints:0", _f.Server.Address), ("Ruvio:Pasword", "typo"));
        builder.Services.AddRuvioDistributedLock(o => o.RejectionStatusCode = 200);
        await using var app = builder.Build();
        var e = await Assert.ThrowsAsync<OptionsValidationException>(() => app.StartAsync());
        Assert.Contains("RejectionStatusCode", e.Message);
        Assert.Contains("Ruvio:Pasword", e.Message);
    }

    [Fact]
    public async Task EachConnectionSourceConnects()
    {
        async Task<RuvioDatabase> Check(WebApplicationBuilder builder, Action<RuvioDistributedLockOptions>? configure = null)
        {
            builder.Services.AddRuvioDistributedLock(configure);
            await using var app = builder.Build();
            await app.StartAsync();
            var locks = app.Services.GetRequiredService<IRuvioLocks>();
            await using (var held = await locks.TryAcquireAsync($"src:{Guid.NewGuid():n}")) Assert.NotNull(held);
            var db = await locks.GetDatabaseAsync();
            await app.StopAsync();
            return db;
        }

        await Check(Builder(), o => o.Configuration = _f.Server.Address);
        await Check(Builder(("ConnectionStrings:Ruvio", _f.Server.Address)));
        await Check(Builder(("Ruvio:EndPoints:0", _f.Server.Address), ("Ruvio:ConnectTimeout", "2000")));
        await Check(Builder(("Ruvio:Configuration", _f.Server.Address)));

        // An app-owned connection, registered in DI: used as is, and not disposed with the app.
        await using var owned = await _f.Server.ConnectAsync();
        var shared = Builder();
        shared.Services.AddSingleton(owned);
        Assert.Same(owned, (await Check(shared)).Connection);
        Assert.Equal("PONG", (await (await owned.GetDefaultDatabaseAsync()).ExecuteAsync("PING")).AsString());

        // Or from a factory.
        await using var fromFactory = await _f.Server.ConnectAsync();
        Assert.Same(fromFactory, (await Check(Builder(), o => o.ConnectionFactory = (_, _) => Task.FromResult(fromFactory))).Connection);
    }

    [Fact]
    public async Task ControllersRequireRuvioLockOnRejectedAndStatusCodes()
    {
        var builder = Builder(("ConnectionStrings:Ruvio", _f.Server.Address));
        var rejected = new List<RuvioLockRejectionReason>();
        var prefix = $"t{Guid.NewGuid():n}:";
        builder.Services.AddRuvioDistributedLock(o =>
        {
            o.KeyPrefix = prefix;
            o.RejectionStatusCode = StatusCodes.Status423Locked;
            o.RetryAfter = TimeSpan.FromSeconds(3);
            o.OnRejected = async (ctx, ct) =>
            {
                lock (rejected) rejected.Add(ctx.Reason);
                if (ctx.Name.StartsWith("custom:")) await ctx.HttpContext.Response.WriteAsync("custom body " + ctx.Key, ct);
            };
        });
        builder.Services.AddControllers().AddApplicationPart(typeof(LockedController).Assembly);
        await using var app = builder.Build();
        app.UseRuvioLock();
        app.MapControllers();
        app.MapGet("/custom/{id}", async (string id) => { await Task.Delay(2000); return "done"; }).RequireRuvioLock("custom:{id}");
        await app.StartAsync();
        using var client = Client(app);
        var db = await app.Services.GetRequiredService<IRuvioLocks>().GetDatabaseAsync();
        Task Held(string name) => Wait.UntilAsync(async () => await db.LockInfoAsync(prefix + name) is not null, TimeSpan.FromSeconds(10), name + " is held");

        // A controller action with [RuvioLock]: a second request for the same order while the first runs is rejected.
        var first = client.PostAsync("/api/orders/5/pay?ms=2000", null);
        await Held("order:5");
        using (var second = await client.PostAsync("/api/orders/5/pay?ms=0", null))
        {
            Assert.Equal((HttpStatusCode)423, second.StatusCode);
            Assert.Equal(TimeSpan.FromSeconds(3), second.Headers.RetryAfter?.Delta);
            Assert.Equal("application/problem+json", second.Content.Headers.ContentType?.MediaType);
        }
        using (var other = await client.PostAsync("/api/orders/6/pay?ms=0", null)) Assert.Equal(HttpStatusCode.OK, other.StatusCode);
        using (var done = await first) Assert.Equal(HttpStatusCode.OK, done.StatusCode);
        // The class-level attribute applies to an action without its own.
        using (var refund = await client.PostAsync("/api/orders/5/refund", null))
        {
            Assert.Equal(HttpStatusCode.OK, refund.StatusCode);
            Assert.Contains("\"locked\":true", await refund.Content.ReadAsStringAsync());
        }

        // RequireRuvioLock and an OnRejected hook that writes its own body.
        var slow = client.GetAsync("/custom/1");
        await Held("custom:1");
        using (var busy = await client.GetAsync("/custom/1"))
        {
            Assert.Equal((HttpStatusCode)423, busy.StatusCode);
            Assert.StartsWith("custom body ", await busy.Content.ReadAsStringAsync());
        }
        using (var done = await slow) Assert.Equal(HttpStatusCode.OK, done.StatusCode);
        lock (rejected) Assert.Equal([RuvioLockRejectionReason.Busy, RuvioLockRejectionReason.Busy], rejected);
        await app.StopAsync();
    }

    [Fact]
    public async Task TheLockIsReleasedWhenTheHandlerThrows()
    {
        var builder = Builder(("ConnectionStrings:Ruvio", _f.Server.Address));
        var prefix = $"t{Guid.NewGuid():n}:";
        builder.Services.AddRuvioDistributedLock(o => o.KeyPrefix = prefix);
        await using var app = builder.Build();
        app.UseRuvioLock();
        app.MapPost("/fail/{id}", (string id, HttpContext ctx) =>
        {
            Assert.NotNull(ctx.GetRuvioLock()); // the lock is there while the handler runs
            throw new InvalidOperationException("handler failed");
        }).WithMetadata(new RuvioLockAttribute("fail:{id}"));
        await app.StartAsync();
        using var client = Client(app);
        using (var r = await client.PostAsync("/fail/1", null)) Assert.Equal(HttpStatusCode.InternalServerError, r.StatusCode);
        var db = await app.Services.GetRequiredService<IRuvioLocks>().GetDatabaseAsync();
        Assert.Null(await db.LockInfoAsync(prefix + "fail:1"));
        using (var r = await client.PostAsync("/fail/1", null)) Assert.Equal(HttpStatusCode.InternalServerError, r.StatusCode); // not 409
        await app.StopAsync();
    }

    [Fact]
    public async Task TheHealthCheckPingsRuvio()
    {
        var server = new RuvioServer();
        var builder = Builder(("ConnectionStrings:Ruvio", server.Address + ",asyncTimeout=500,connectTimeout=500"));
        builder.Services.AddHealthChecks().AddRuvio();
        await using var app = builder.Build();
        app.MapHealthChecks("/healthz");
        await app.StartAsync();
        using var client = Client(app);
        using (var r = await client.GetAsync("/healthz"))
        {
            Assert.Equal(HttpStatusCode.OK, r.StatusCode);
            Assert.Equal("Healthy", await r.Content.ReadAsStringAsync());
        }
        server.Dispose();
        using (var r = await client.GetAsync("/healthz"))
        {
            Assert.Equal(HttpStatusCode.ServiceUnavailable, r.StatusCode);
            Assert.Equal("Unhealthy", await r.Content.ReadAsStringAsync());
        }
        await app.StopAsync();
    }
}

[ApiController]
[Route("api/orders/{id}")]
[RuvioLock("order:{id}")]
public sealed class LockedController : ControllerBase
{
    [HttpPost("pay")]
    [RuvioLock("order:{id}", LeaseMilliseconds = 10_000)]
    public async Task<IActionResult> Pay(string id, [FromQuery] int ms)
    {
        await Task.Delay(ms, HttpContext.RequestAborted);
        return Ok(new { id, token = HttpContext.GetRuvioLock()!.Token });
    }

    [HttpPost("refund")]
    public IActionResult Refund(string id) => Ok(new { id, locked = HttpContext.GetRuvioLock() is not null });
}
