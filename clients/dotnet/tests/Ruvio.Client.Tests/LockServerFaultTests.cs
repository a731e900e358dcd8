using System.Diagnostics;
using Ruvio.Testing;

namespace Ruvio.Tests;

/// <summary>The lock helper while the server is stopped or killed, and two processes contending for one key.</summary>
public sealed class LockServerFaultTests
{
    [Fact]
    public async Task SIGSTOP_of_the_server_fires_LockLost_before_the_deadline()
    {
        using var s = ServerProcess.StartRuvio();
        await using var c = await RuvioConnection.ConnectAsync($"{s.Address},asyncTimeout=300");
        var db = c.GetDatabase();
        var key = Helpers.Key("sigstop");
        var ttl = TimeSpan.FromMilliseconds(2000);
        var sent = Stopwatch.GetTimestamp();
        var l = (await db.TryAcquireLockAsync(key, ttl))!;
        var lostAt = new TaskCompletionSource<long>(TaskCreationOptions.RunContinuationsAsynchronously);
        l.LockLost.Register(() => lostAt.TrySetResult(Stopwatch.GetTimestamp()));
        s.SigStop();
        try
        {
            var at = Stopwatch.GetElapsedTime(sent, await lostAt.Task.WaitAsync(TimeSpan.FromSeconds(5)));
            Assert.True(at < ttl, $"LockLost fired {at.TotalMilliseconds:0} ms after the send (ttl {ttl.TotalMilliseconds} ms)");
            Assert.Contains("no renewal succeeded", l.LostReason);
        }
        finally
        {
            s.SigCont();
        }
        Assert.False(await l.ReleaseAsync());
    }

    [Fact]
    public async Task Kill9_and_restart_within_the_renewal_window_keeps_the_lock_and_its_token()
    {
        using var s = ServerProcess.StartRuvio("--appendfsync", "always");
        await using var c = await RuvioConnection.ConnectAsync($"{s.Address},asyncTimeout=2000");
        var db = c.GetDatabase();
        var key = Helpers.Key("kill9");
        var l = (await db.TryAcquireLockAsync(key, TimeSpan.FromSeconds(6)))!;
        s.Kill9();
        s.Start(); // appendfsync always: the grant is on disk
        await Task.Delay(TimeSpan.FromSeconds(4)); // past the first renewal (at 2 s) and its retries
        Assert.False(l.IsLost, l.LostReason);
        await Task.Delay(TimeSpan.FromSeconds(4)); // past the original deadline: only renewals on the new process keep it
        Assert.False(l.IsLost, l.LostReason);
        var info = (await db.LockInfoAsync(key))!;
        Assert.Equal(l.Token, Assert.Single(info.Holders).Token);
        Assert.True(await l.ReleaseAsync());
        Assert.False(l.LockLost.IsCancellationRequested);
    }

    [Fact]
    public async Task Two_processes_contending_with_IFGT_never_overlap_and_tokens_grow()
    {
        using var s = ServerProcess.StartRuvio();
        var key = Helpers.Key("contend");
        var dll = Path.Combine(AppContext.BaseDirectory, "..", "..", "..", "..", "Ruvio.Client.Contender", "bin",
            Path.GetFileName(Path.GetDirectoryName(AppContext.BaseDirectory.TrimEnd('/'))!), "net10.0", "Ruvio.Client.Contender.dll");
        Assert.True(File.Exists(dll), $"the contender is not built at {dll}");
        const int iterations = 150;
        var procs = new[] { "a", "b" }.Select(n =>
        {
            var psi = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true };
            foreach (var a in new[] { dll, s.Address, key, iterations.ToString(), n }) psi.ArgumentList.Add(a);
            return Process.Start(psi)!;
        }).ToArray();
        var outputs = await Task.WhenAll(procs.Select(async p =>
        {
            var stdout = p.StandardOutput.ReadToEndAsync();
            var stderr = p.StandardError.ReadToEndAsync();
            await p.WaitForExitAsync().WaitAsync(TimeSpan.FromSeconds(90));
            Assert.True(p.ExitCode == 0, $"contender exited {p.ExitCode}: {await stderr}");
            return (await stdout).Split('\n', StringSplitOptions.RemoveEmptyEntries).Select(line => line.Split(' ').Select(long.Parse).ToArray()).ToList();
        }));
        var all = outputs.SelectMany(o => o).ToList();
        Assert.Equal(2 * iterations, all.Count);
        Assert.All(all, r => Assert.Equal(1, r[2])); // nobody else inside
        Assert.All(all, r => Assert.Equal(1, r[1])); // every holder's fenced write landed: its token was the highest so far
        Assert.Equal(all.Count, all.Select(r => r[0]).Distinct().Count());
        Assert.All(outputs, o => Assert.Equal(o.Select(r => r[0]).Order(), o.Select(r => r[0]))); // each process: growing tokens
        // A stale holder's write is refused.
        await using var c = await Helpers.Connect(s);
        Assert.Equal(0, await c.GetDatabase().IfGtAsync(key + ":data", all.Min(r => r[0]), "stale"));
        Assert.Equal(1, await c.GetDatabase().IfGtAsync(key + ":data", all.Max(r => r[0]), "latest again"));
    }
}
