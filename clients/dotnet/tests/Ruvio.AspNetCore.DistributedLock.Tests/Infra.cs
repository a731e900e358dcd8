using System.Diagnostics;
using System.Net;
using System.Net.Http.Json;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Text.Json;

namespace Ruvio.AspNetCore.DistributedLock.Tests;

/// <summary>Signals for real processes (the server, the sample app).</summary>
internal static class Signals
{
    [DllImport("libc", SetLastError = true)]
    private static extern int kill(int pid, int sig);

    public const int SIGKILL = 9, SIGTERM = 15, SIGCONT = 18, SIGSTOP = 19;

    public static void Send(int pid, int sig) => kill(pid, sig);

    /// <summary>SIGSTOP, then wait until every thread is stopped (delivery is asynchronous).</summary>
    public static void Stop(int pid)
    {
        kill(pid, SIGSTOP);
        var sw = Stopwatch.StartNew();
        while (sw.Elapsed < TimeSpan.FromSeconds(10))
        {
            var states = new List<string>();
            foreach (var task in Directory.GetDirectories($"/proc/{pid}/task"))
            {
                try
                {
                    var stat = File.ReadAllText(Path.Combine(task, "stat"));
                    states.Add(stat[(stat.LastIndexOf(')') + 2)..].Split(' ')[0]);
                }
                catch (IOException) { }
                catch (UnauthorizedAccessException) { }
            }
            if (states.Count > 0 && states.All(s => s is "T" or "t")) return;
            Thread.Sleep(5);
        }
        throw new InvalidOperationException($"process {pid} did not stop after SIGSTOP");
    }

    public static int FreePort()
    {
        using var l = new TcpListener(IPAddress.Loopback, 0);
        l.Start();
        return ((IPEndPoint)l.LocalEndpoint).Port;
    }

    public static string TempDir(string prefix)
    {
        var d = Path.Combine(Path.GetTempPath(), prefix + Guid.NewGuid().ToString("n")[..12]);
        Directory.CreateDirectory(d);
        return d;
    }
}

/// <summary>A real ruvio (RUVIO_BIN; missing is an error, never a skip) on a 127.0.0.1 port with its own folder.</summary>
public sealed class RuvioServer : IDisposable
{
    private Process? _proc;

    public int Port { get; }
    public string Dir { get; }
    public string Address => $"127.0.0.1:{Port}";
    public int Pid => _proc?.Id ?? throw new InvalidOperationException("not running");

    public RuvioServer()
    {
        var bin = Environment.GetEnvironmentVariable("RUVIO_BIN");
        if (string.IsNullOrEmpty(bin))
            throw new InvalidOperationException("RUVIO_BIN is not set: point it at the ruvio binary (e.g. target/release/ruvio). Tests without a server fail; they never skip.");
        if (!File.Exists(bin)) throw new InvalidOperationException($"RUVIO_BIN={bin} does not exist");
        Port = Signals.FreePort();
        Dir = Signals.TempDir("ruvio-aspnet-test-");
        var psi = new ProcessStartInfo(bin) { RedirectStandardOutput = true, RedirectStandardError = true };
        foreach (var a in new[] { "--port", Port.ToString(), "--bind", "127.0.0.1", "--dir", Dir }) psi.ArgumentList.Add(a);
        _proc = Process.Start(psi)!;
        _proc.OutputDataReceived += (_, _) => { };
        _proc.ErrorDataReceived += (_, _) => { };
        _proc.BeginOutputReadLine();
        _proc.BeginErrorReadLine();
        var sw = Stopwatch.StartNew();
        while (sw.Elapsed < TimeSpan.FromSeconds(30))
        {
            if (_proc.HasExited) throw new InvalidOperationException($"ruvio exited at start with {_proc.ExitCode}");
            try
            {
                using var c = new TcpClient();
                c.Connect(IPAddress.Loopback, Port);
                c.GetStream().Write("PING\r\n"u8);
                c.ReceiveTimeout = 2000;
                if (c.GetStream().ReadByte() == '+') return;
            }
            catch (Exception e) when (e is SocketException or IOException) { }
            Thread.Sleep(50);
        }
        throw new InvalidOperationException("ruvio did not answer PING within 30 s");
    }

    public void Pause() => Signals.Stop(Pid);
    public void Resume() => Signals.Send(Pid, Signals.SIGCONT);

    public Task<RuvioConnection> ConnectAsync() => RuvioConnection.ConnectAsync(Address);

    public void Dispose()
    {
        var p = _proc;
        _proc = null;
        if (p is null) return;
        try
        {
            Signals.Send(p.Id, Signals.SIGCONT);
            p.Kill(entireProcessTree: true);
            p.WaitForExit(5000);
        }
        catch (InvalidOperationException) { }
        p.Dispose();
        try { Directory.Delete(Dir, recursive: true); } catch (IOException) { } catch (UnauthorizedAccessException) { }
    }
}

/// <summary>One ruvio shared by the tests of a class that never pause or kill it.</summary>
public sealed class RuvioFixture : IDisposable
{
    public RuvioServer Server { get; } = new();
    public void Dispose() => Server.Dispose();
}

/// <summary>
/// The sample app (examples/Ruvio.AspNetCore.Sample) as a separate process on a real 127.0.0.1 port, built with the
/// tests. Its output goes to a file, shown when a test fails.
/// </summary>
public sealed class SampleApp : IAsyncDisposable
{
    private static readonly HttpClient Http = new(new SocketsHttpHandler { PooledConnectionLifetime = TimeSpan.FromSeconds(30), MaxConnectionsPerServer = 64 })
    {
        Timeout = TimeSpan.FromSeconds(30),
    };

    private Process? _proc;
    private readonly string _log;

    public string Instance { get; }
    public int Port { get; }
    public Uri BaseAddress { get; }
    public int Pid { get; }
    public bool HasExited => _proc?.HasExited ?? true;

    public static string Dll
    {
        get
        {
            // tests/X/bin/<Configuration>/net10.0/ -> examples/Ruvio.AspNetCore.Sample/bin/<Configuration>/net10.0/
            var bin = new DirectoryInfo(AppContext.BaseDirectory.TrimEnd('/'));
            var configuration = bin.Parent!.Name;
            var dotnetRoot = bin.Parent.Parent!.Parent!.Parent!.Parent!.FullName;
            var dll = Path.Combine(dotnetRoot, "examples", "Ruvio.AspNetCore.Sample", "bin", configuration, bin.Name, "Ruvio.AspNetCore.Sample.dll");
            if (!File.Exists(dll)) throw new InvalidOperationException($"the sample app is not built at {dll}");
            return dll;
        }
    }

    private SampleApp(string instance, int port, Process proc, string log)
    {
        Instance = instance;
        Port = port;
        BaseAddress = new Uri($"http://127.0.0.1:{port}/");
        _proc = proc;
        Pid = proc.Id;
        _log = log;
    }

    /// <summary>Starts an instance connected to <paramref name="server"/> and waits until it answers.</summary>
    public static async Task<SampleApp> StartAsync(RuvioServer server, string instance, string keyPrefix, params string[] settings)
    {
        var port = Signals.FreePort();
        var log = Path.Combine(Path.GetTempPath(), $"ruvio-aspnet-sample-{instance}-{Guid.NewGuid():n}.log");
        var psi = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true };
        psi.ArgumentList.Add(Dll);
        var args = new List<string>
        {
            "--urls", $"http://127.0.0.1:{port}",
            "--ConnectionStrings:Ruvio", server.Address,
            "--Instance", instance,
            "--KeyPrefix", keyPrefix,
            "--Logging:LogLevel:Default", "Warning",
            "--Logging:LogLevel:Ruvio", "Information",
        };
        args.AddRange(settings);
        foreach (var a in args) psi.ArgumentList.Add(a);
        psi.Environment["DOTNET_ENVIRONMENT"] = "Production";
        psi.Environment["ASPNETCORE_ENVIRONMENT"] = "Production";
        var proc = Process.Start(psi)!;
        var writer = new StreamWriter(log) { AutoFlush = true };
        var gate = new object();
        proc.OutputDataReceived += (_, e) => { if (e.Data is not null) lock (gate) writer.WriteLine(e.Data); };
        proc.ErrorDataReceived += (_, e) => { if (e.Data is not null) lock (gate) writer.WriteLine(e.Data); };
        proc.BeginOutputReadLine();
        proc.BeginErrorReadLine();
        var app = new SampleApp(instance, port, proc, log);
        var sw = Stopwatch.StartNew();
        while (sw.Elapsed < TimeSpan.FromSeconds(60))
        {
            if (proc.HasExited) throw new InvalidOperationException($"sample {instance} exited at start with {proc.ExitCode}:\n{app.Log()}");
            try
            {
                using var r = await Http.GetAsync(new Uri(app.BaseAddress, "stats"));
                if (r.IsSuccessStatusCode) return app;
            }
            catch (HttpRequestException) { }
            await Task.Delay(100);
        }
        throw new InvalidOperationException($"sample {instance} did not answer within 60 s:\n{app.Log()}");
    }

    public string Log()
    {
        try
        {
            using var f = new FileStream(_log, FileMode.Open, FileAccess.Read, FileShare.ReadWrite);
            return new StreamReader(f).ReadToEnd();
        }
        catch (IOException e) { return $"(no log: {e.Message})"; }
    }

    public Task<HttpResponseMessage> PostAsync(string path) => Http.PostAsync(new Uri(BaseAddress, path), null);

    public async Task<JsonElement> StatsAsync()
    {
        using var r = await Http.GetAsync(new Uri(BaseAddress, "stats"));
        r.EnsureSuccessStatusCode();
        return await r.Content.ReadFromJsonAsync<JsonElement>();
    }

    /// <summary>The token of the term this instance runs singleton <paramref name="name"/> under, or null.</summary>
    public async Task<long?> RunningAsync(string name = "outbox-publisher")
    {
        var stats = await StatsAsync();
        return stats.GetProperty("running").TryGetProperty(name, out var t) ? long.Parse(t.GetString()!) : null;
    }

    public void Pause() => Signals.Stop(Pid);
    public void Resume() => Signals.Send(Pid, Signals.SIGCONT);
    public void Kill9() => Signals.Send(Pid, Signals.SIGKILL);

    /// <summary>SIGTERM: the host stops gracefully (hosted services' StopAsync); waits for the exit.</summary>
    public async Task StopGracefullyAsync()
    {
        Signals.Send(Pid, Signals.SIGTERM);
        using var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30));
        await _proc!.WaitForExitAsync(cts.Token);
    }

    public async ValueTask DisposeAsync()
    {
        var p = _proc;
        _proc = null;
        if (p is null) return;
        try
        {
            if (!p.HasExited)
            {
                Signals.Send(p.Id, Signals.SIGCONT);
                p.Kill(entireProcessTree: true);
                await p.WaitForExitAsync(new CancellationTokenSource(5000).Token);
            }
        }
        catch (Exception e) when (e is InvalidOperationException or OperationCanceledException) { }
        p.Dispose();
    }
}

internal static class Wait
{
    /// <summary>Polls <paramref name="condition"/> every 20 ms until it holds or <paramref name="timeout"/> passes; returns the time it took.</summary>
    public static async Task<TimeSpan> UntilAsync(Func<Task<bool>> condition, TimeSpan timeout, string what)
    {
        var sw = Stopwatch.StartNew();
        while (true)
        {
            if (await condition()) return sw.Elapsed;
            if (sw.Elapsed > timeout) throw new TimeoutException($"{what}: not within {timeout.TotalMilliseconds:0} ms");
            await Task.Delay(20);
        }
    }
}
