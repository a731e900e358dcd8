using Microsoft.AspNetCore.Routing;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection;
using Microsoft.Extensions.Hosting;

namespace Ruvio.AspNetCore.DistributedLock.Tests;

/// <summary>The lock name templates (no server needed).</summary>
public sealed class TemplateTests
{
    [Theory]
    [InlineData("order:{id}", "order:42")]
    [InlineData("{tenant}/{id}", "acme/42")]
    [InlineData("fixed", "fixed")]
    [InlineData("{{literal}}:{id}", "{literal}:42")]
    [InlineData("order:{missing}", "order:")]
    public void FillsRouteValues(string template, string expected)
    {
        var values = new RouteValueDictionary { ["id"] = 42, ["tenant"] = "acme" };
        Assert.Equal(expected, RuvioLockTemplate.Parse(template).Format(values));
    }

    [Theory]
    [InlineData("order:{id", "never closed")]
    [InlineData("order:id}", "closes nothing")]
    [InlineData("order:{}", "not a route parameter name")]
    [InlineData("order:{a/b}", "not a route parameter name")]
    public void RejectsMalformedTemplates(string template, string message)
    {
        var e = Assert.Throws<FormatException>(() => RuvioLockTemplate.Parse(template));
        Assert.Contains(message, e.Message);
    }
}

/// <summary>A singleton worker that records the lease its constructor got.</summary>
public sealed class LeaseRecordingWorker(IRuvioSingletonLease lease, LeaseRecorder recorder) : BackgroundService
{
    protected override async Task ExecuteAsync(CancellationToken stoppingToken)
    {
        recorder.Leases.Add(lease);
        await Task.Delay(Timeout.Infinite, stoppingToken).ContinueWith(_ => { });
    }
}

public sealed class LeaseRecorder
{
    public System.Collections.Concurrent.ConcurrentBag<IRuvioSingletonLease> Leases { get; } = [];
}

/// <summary>IRuvioSingletonLease in a generic host (no web server), against a real ruvio.</summary>
public sealed class SingletonLeaseTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;

    public SingletonLeaseTests(RuvioFixture f) => _f = f;

    [Fact]
    public async Task AWorkerGetsItsTermAndOthersSeeTheCurrentOneByName()
    {
        var prefix = $"t{Guid.NewGuid():n}:";
        var builder = Host.CreateApplicationBuilder(new HostApplicationBuilderSettings { EnvironmentName = "Production", DisableDefaults = true });
        builder.Configuration["ConnectionStrings:Ruvio"] = _f.Server.Address;
        builder.Services.AddSingleton<LeaseRecorder>();
        builder.Services.AddRuvioDistributedLock(o => o.KeyPrefix = prefix);
        builder.Services.AddRuvioSingleton<LeaseRecordingWorker>("one", o => o.Lease = TimeSpan.FromSeconds(5));
        builder.Services.AddRuvioSingleton<LeaseRecordingWorker>("two", o => o.Lease = TimeSpan.FromSeconds(5));
        Assert.Throws<InvalidOperationException>(() => builder.Services.AddRuvioSingleton<LeaseRecordingWorker>("one"));
        using var host = builder.Build();
        await host.StartAsync();
        var recorder = host.Services.GetRequiredService<LeaseRecorder>();
        await Wait.UntilAsync(() => Task.FromResult(recorder.Leases.Count == 2), TimeSpan.FromSeconds(10), "both workers started");

        var byName = recorder.Leases.ToDictionary(l => l.Name);
        Assert.Equal(prefix + "one", byName["one"].Key);
        Assert.NotEqual(byName["one"].Token, byName["two"].Token);
        var db = await host.Services.GetRequiredService<IRuvioLocks>().GetDatabaseAsync();
        Assert.Equal(byName["one"].Token, Assert.Single((await db.LockInfoAsync(prefix + "one"))!.Holders).Token);

        var current = host.Services.GetRequiredKeyedService<IRuvioSingletonLease>("one");
        Assert.True(current.IsHeld);
        Assert.Equal(byName["one"].Token, current.Token);
        Assert.Throws<InvalidOperationException>(() => host.Services.GetRequiredService<IRuvioSingletonLease>());

        // Break the lock: the term ends (its worker stops), a new term starts with a new token; the old term's lease
        // keeps its own token and says it no longer holds.
        await db.ExecuteAsync("DEL", prefix + "one");
        await Wait.UntilAsync(() => Task.FromResult(recorder.Leases.Count(l => l.Name == "one") == 2), TimeSpan.FromSeconds(10), "a new term");
        var old = byName["one"];
        Assert.False(old.IsHeld);
        Assert.True(old.LockLost.IsCancellationRequested);
        var renewed = host.Services.GetRequiredKeyedService<IRuvioSingletonLease>("one");
        Assert.True(renewed.Token > old.Token);
        await host.StopAsync();
        Assert.False(host.Services.GetRequiredKeyedService<IRuvioSingletonLease>("one").IsHeld);
        Assert.Null(await db.LockInfoAsync(prefix + "one")); // released on stop
    }
}
