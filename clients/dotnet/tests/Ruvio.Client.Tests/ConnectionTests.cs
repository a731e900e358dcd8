using System.Diagnostics;
using System.Net;
using Ruvio.Testing;

namespace Ruvio.Tests;

public sealed class ConnectionTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;
    public ConnectionTests(RuvioFixture f) => _f = f;

    [Fact]
    public async Task Connects_by_host_port_connection_string_and_options()
    {
        await using (var a = await RuvioConnection.ConnectAsync("127.0.0.1", _f.Server.Port))
            Assert.Equal("PONG", (await a.GetDatabase().ExecuteAsync("PING")).AsString());
        await using (var b = await RuvioConnection.ConnectAsync($"127.0.0.1:{_f.Server.Port},name=cs-test,defaultDatabase=2,connectTimeout=2000,asyncTimeout=3000,ssl=false"))
        {
            var db = await b.GetDefaultDatabaseAsync();
            Assert.Equal(2, db.Database);
            Assert.Equal("cs-test", (await db.ExecuteAsync("CLIENT", "GETNAME")).AsString());
            var key = Helpers.Key("db2");
            await db.ExecuteAsync("SET", key, "x");
            await using var other = await Helpers.Connect(_f.Server);
            Assert.True((await other.GetDatabase().ExecuteAsync("GET", key)).IsNull); // database 0 does not see it
        }
        var o = new RuvioOptions { Protocol = RuvioProtocol.Resp2 };
        o.EndPoints.Add(new IPEndPoint(IPAddress.Loopback, _f.Server.Port));
        await using var c = await RuvioConnection.ConnectAsync(o);
        Assert.Equal(2, c.Protocol);
        Assert.True((await c.GetDatabase().ExecuteAsync("GET", Helpers.Key("missing"))).IsNull);
    }

    [Fact]
    public void Connection_string_parsing()
    {
        var o = RuvioOptions.Parse("h1:26379, h2 ,serviceName=mymaster,user=u,password=p,ssl=true,name=n,defaultDatabase=3,connectTimeout=100,asyncTimeout=200,abortConnect=false,allowAdmin=true,durabilityReplicas=1,protocol=resp2");
        Assert.Equal(["h1:26379", "h2:26379"], o.EndPoints.Select(e => PhysicalConnection.Format(e)));
        Assert.Equal("mymaster", o.ServiceName);
        Assert.Equal(("u", "p", true, "n", 3), (o.User, o.Password, o.Ssl, o.ClientName, o.DefaultDatabase));
        Assert.Equal(TimeSpan.FromMilliseconds(100), o.ConnectTimeout);
        Assert.Equal(TimeSpan.FromMilliseconds(200), o.AsyncTimeout);
        Assert.False(o.AbortOnConnectFail);
        Assert.Equal(1, o.DurabilityReplicas);
        Assert.Equal(RuvioProtocol.Resp2, o.Protocol);
        Assert.Equal("[::1]:7000", PhysicalConnection.Format(RuvioOptions.Parse("[::1]:7000").EndPoints[0]));
        Assert.Throws<ArgumentException>(() => RuvioOptions.Parse("h:1,bogus=1"));
        Assert.Throws<ArgumentException>(() => RuvioOptions.Parse("h:99999"));
    }

    [Fact]
    public async Task Resp3_reply_types_through_ExecuteAsync()
    {
        await using var c = await Helpers.Connect(_f.Server);
        Assert.Equal(3, c.Protocol);
        var db = c.GetDatabase();
        var hello = await db.ExecuteAsync("HELLO", "3");
        Assert.Equal(RuvioResultType.Map, hello.Type);
        Assert.Contains(hello.Entries, e => e.Key.AsString() == "server" && e.Value.AsString() == "ruvio");
        var key = Helpers.Key("types");
        Assert.Equal(RuvioResultType.Nil, (await db.ExecuteAsync("GET", key)).Type);
        Assert.Equal(RuvioResultType.SimpleString, (await db.ExecuteAsync("SET", key, "1.5")).Type);
        Assert.Equal(2.5, (await db.ExecuteAsync("INCRBYFLOAT", key, 1.0)).AsDouble());
        var info = await db.ExecuteAsync("CLIENT", "INFO");
        Assert.Equal(RuvioResultType.VerbatimString, info.Type);
        Assert.Equal("txt", info.VerbatimFormat);
        var ex = await Assert.ThrowsAsync<RuvioServerException>(() => db.ExecuteAsync("LEASE", key, 1000));
        Assert.Equal("WRONGTYPE", ex.Code);
        Assert.Equal("LEASE", ex.Command);
    }

    [Fact]
    public async Task Pipelines_many_concurrent_commands_on_one_connection()
    {
        await using var c = await Helpers.Connect(_f.Server);
        var db = c.GetDatabase();
        var key = Helpers.Key("counter");
        var tasks = Enumerable.Range(0, 2000).Select(_ => db.ExecuteAsync("INCR", key)).ToArray();
        var results = await Task.WhenAll(tasks);
        Assert.Equal(Enumerable.Range(1, 2000).Select(i => (long)i), results.Select(r => r.AsInt64()).Order());
        // All of it went over one connection.
        var id = (await db.ExecuteAsync("CLIENT", "ID")).AsInt64();
        var mine = (await db.ExecuteAsync("CLIENT", "LIST")).AsString()!.Split('\n').Single(l => l.StartsWith($"id={id} "));
        Assert.Contains("cmd=client", mine);
    }

    [Fact]
    public async Task Wrong_password_fails_the_connect_with_the_server_code()
    {
        using var s = ServerProcess.StartRuvio("--requirepass", "secret");
        var ex = await Assert.ThrowsAsync<RuvioServerException>(() => RuvioConnection.ConnectAsync($"{s.Address},password=wrong"));
        Assert.Equal("WRONGPASS", ex.Code);
        await using var ok = await RuvioConnection.ConnectAsync($"{s.Address},password=secret");
        Assert.Equal("PONG", (await ok.GetDatabase().ExecuteAsync("PING")).AsString());
        await using var resp2 = await RuvioConnection.ConnectAsync($"{s.Address},password=secret,protocol=resp2");
        Assert.Equal("PONG", (await resp2.GetDatabase().ExecuteAsync("PING")).AsString());
    }

    [Fact]
    public async Task Connect_to_a_closed_port_fails_fast_and_says_where()
    {
        var port = ServerProcess.FreePort();
        var sw = Stopwatch.StartNew();
        var ex = await Assert.ThrowsAsync<RuvioConnectionException>(() => RuvioConnection.ConnectAsync("127.0.0.1", port));
        Assert.Contains($"127.0.0.1:{port}", ex.Message);
        Assert.True(sw.Elapsed < TimeSpan.FromSeconds(5));
    }

    [Fact]
    public async Task DurabilityReplicas_refused_by_the_server_fails_the_connect()
    {
        using var s = ServerProcess.StartRuvio("--appendonly", "no");
        var ex = await Assert.ThrowsAsync<RuvioServerException>(() => RuvioConnection.ConnectAsync($"{s.Address},durabilityReplicas=1"));
        Assert.Contains("appendonly", ex.Message);
    }

    [Fact]
    public async Task DurabilityReplicas_is_sent_on_every_connection_and_NOREPLICAS_is_resent_for_a_while()
    {
        using var primary = ServerProcess.StartRuvio();
        await using var c = await RuvioConnection.ConnectAsync(new RuvioOptions { DurabilityReplicas = 1, NoReplicasRetry = TimeSpan.FromSeconds(20), AsyncTimeout = TimeSpan.FromSeconds(25), EndPoints = { new IPEndPoint(IPAddress.Loopback, primary.Port) } });
        var db = c.GetDatabase();
        Assert.Equal(1, (await db.ExecuteAsync("CLIENT", "DURABILITY")).Items[1].AsInt64());
        var key = Helpers.Key("durable");
        // No replica yet: -NOREPLICAS (nothing ran); the client resends until a replica streams.
        var lease = db.LeaseAsync(key, 30_000);
        await Task.Delay(300);
        Assert.False(lease.IsCompleted);
        using var replica = ServerProcess.StartRuvio("--replicaof", $"127.0.0.1 {primary.Port}");
        var token = await lease.WaitAsync(TimeSpan.FromSeconds(20));
        Assert.True(token > 0);
        // Dedicated connections carry the setting too: a waiting LEASE is answered once the replica has it.
        var waited = await db.LeaseAsync(Helpers.Key("durable-wait"), 30_000, 1000);
        Assert.True(waited > 0);
        await using var plain = await Helpers.Connect(primary);
        Assert.Equal(0, (await plain.GetDatabase().ExecuteAsync("CLIENT", "DURABILITY")).Items[1].AsInt64());
    }
}

/// <summary>Timeouts, lost connections, reconnects and the retry rules (each test has its own server: they stop or kill it).</summary>
public sealed class ResilienceTests
{
    [Fact]
    public async Task A_written_grant_that_times_out_is_not_resent_and_says_its_fate_is_unknown()
    {
        using var s = ServerProcess.StartRuvio();
        await using var c = await RuvioConnection.ConnectAsync($"{s.Address},asyncTimeout=500");
        var db = c.GetDatabase();
        var key = Helpers.Key("fate");
        s.SigStop();
        var ex = await Assert.ThrowsAsync<RuvioTimeoutException>(() => db.AcquireSemaphoreAsync(key, 5, 30_000));
        Assert.True(ex.FateUnknown);
        Assert.Contains("SEMAPHORE", ex.Message);
        s.SigCont();
        // The server ran the one SEMAPHORE it received: exactly one slot is taken (a resend would have taken two).
        await Helpers.WaitUntil(async () => (await db.LockInfoAsync(key))?.Holders.Count == 1, TimeSpan.FromSeconds(5), "the late grant");
        await Task.Delay(600);
        Assert.Single((await db.LockInfoAsync(key))!.Holders);
    }

    [Fact]
    public async Task A_grant_lost_with_the_connection_says_its_fate_is_unknown_and_the_client_reconnects()
    {
        using var s = ServerProcess.StartRuvio("--appendfsync", "always");
        await using var c = await RuvioConnection.ConnectAsync($"{s.Address},asyncTimeout=5000");
        var failed = new TaskCompletionSource<RuvioConnectionEventArgs>();
        var restored = new TaskCompletionSource<RuvioConnectionEventArgs>();
        c.ConnectionFailed += (_, e) => failed.TrySetResult(e);
        c.ConnectionRestored += (_, e) => restored.TrySetResult(e);
        var db = c.GetDatabase();
        var key = Helpers.Key("lost");
        var held = (await db.LeaseAsync(key, 30_000))!.Value;
        s.SigStop();
        var lease = db.LeaseAsync(Helpers.Key("lost2"), 30_000);
        await Task.Delay(200);
        s.Kill9();
        var ex = await Assert.ThrowsAsync<RuvioConnectionException>(() => lease);
        Assert.True(ex.FateUnknown);
        Assert.Contains("may or may not have run", ex.Message);
        Assert.NotNull((await failed.Task.WaitAsync(TimeSpan.FromSeconds(5))).Exception);
        s.Start(); // same port and data folder (appendfsync always: the held lease survives)
        await restored.Task.WaitAsync(TimeSpan.FromSeconds(10));
        // The lock taken before the crash is still held by its token.
        Assert.Equal(1, await db.RenewAsync(key, held, 30_000));
        Assert.Equal(1, await db.ReleaseAsync(key, held));
    }

    [Fact]
    public async Task RENEW_is_resent_after_a_lost_connection()
    {
        using var s = ServerProcess.StartRuvio("--appendfsync", "always");
        await using var c = await RuvioConnection.ConnectAsync($"{s.Address},asyncTimeout=15000");
        var db = c.GetDatabase();
        var key = Helpers.Key("renew-resent");
        var token = (await db.LeaseAsync(key, 30_000))!.Value;
        s.SigStop();
        var renew = db.RenewAsync(key, token, 30_000);
        await Task.Delay(200);
        s.Kill9();
        s.Start();
        Assert.Equal(1, await renew.WaitAsync(TimeSpan.FromSeconds(15)));
    }

    [Fact]
    public async Task Command_timeout_against_a_stopped_server()
    {
        using var s = ServerProcess.StartRuvio();
        await using var c = await RuvioConnection.ConnectAsync($"{s.Address},asyncTimeout=300");
        var db = c.GetDatabase();
        s.SigStop();
        var sw = Stopwatch.StartNew();
        var ex = await Assert.ThrowsAsync<RuvioTimeoutException>(() => db.ExecuteAsync("GET", "k"));
        Assert.True(sw.Elapsed < TimeSpan.FromSeconds(2));
        Assert.True(ex.FateUnknown);
        s.SigCont();
        Assert.True((await db.ExecuteAsync("GET", Helpers.Key("x"))).IsNull);
    }

    [Fact]
    public async Task Cancellation_of_a_waiting_lease_drops_the_waiter()
    {
        using var s = ServerProcess.StartRuvio();
        await using var c = await Helpers.Connect(s);
        var db = c.GetDatabase();
        var key = Helpers.Key("cancel");
        var holder = (await db.LeaseAsync(key, 30_000))!.Value;
        using var cts = new CancellationTokenSource();
        var waiting = db.LeaseAsync(key, 30_000, 20_000, cts.Token);
        await Helpers.WaitUntil(async () => (await db.LockInfoAsync(key))!.Waiters == 1, TimeSpan.FromSeconds(5), "the waiter");
        cts.Cancel();
        await Assert.ThrowsAnyAsync<OperationCanceledException>(() => waiting);
        await Helpers.WaitUntil(async () => (await db.LockInfoAsync(key))!.Waiters == 0, TimeSpan.FromSeconds(5), "the waiter to go");
        Assert.Equal(1, await db.ReleaseAsync(key, holder));
    }
}
