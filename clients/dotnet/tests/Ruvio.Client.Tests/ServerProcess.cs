using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Runtime.InteropServices;
using System.Text;

namespace Ruvio.Testing;

/// <summary>
/// A real server process (ruvio from RUVIO_BIN, a ruvio coordinator, or redis-server) on a 127.0.0.1 port with its
/// own data folder; restartable on the same port and folder. Missing RUVIO_BIN is an error, never a skip.
/// </summary>
public sealed class ServerProcess : IDisposable
{
    private readonly string[] _argv;
    private Process? _proc;
    private readonly bool _pingReady;

    public int Port { get; }
    public string Dir { get; }
    public string LogPath => Path.Combine(Dir, "server.log");
    public int Pid => _proc?.Id ?? throw new InvalidOperationException("not running");
    public string Address => $"127.0.0.1:{Port}";

    private ServerProcess(string[] argv, int port, string dir, bool pingReady)
    {
        _argv = argv;
        Port = port;
        Dir = dir;
        _pingReady = pingReady;
    }

    public static string RuvioBin
    {
        get
        {
            var bin = Environment.GetEnvironmentVariable("RUVIO_BIN");
            if (string.IsNullOrEmpty(bin))
                throw new InvalidOperationException("RUVIO_BIN is not set: point it at the ruvio binary (e.g. target/release/ruvio). Tests without a server fail; they never skip.");
            if (!File.Exists(bin)) throw new InvalidOperationException($"RUVIO_BIN={bin} does not exist");
            return bin;
        }
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

    /// <summary>
    /// Starts ruvio with <c>--appendonly yes --appendfsync everysec</c> unless <paramref name="extra"/> names
    /// <c>--appendonly</c> (tests that kill -9 and restart pass <c>--appendfsync always</c>: every write, RENEW
    /// included, then waits for an fsync, which is slow on this shared disk).
    /// </summary>
    public static ServerProcess StartRuvio(params string[] extra)
    {
        var port = FreePort();
        var dir = TempDir("ruvio-dotnet-test-");
        var argv = new List<string> { RuvioBin, "--port", port.ToString(), "--dir", Path.Combine(dir, "data"), "--loglevel", "warning" };
        if (!extra.Contains("--appendonly")) argv.AddRange(["--appendonly", "yes"]);
        if (!extra.Contains("--appendfsync")) argv.AddRange(["--appendfsync", "everysec"]);
        // Lets the coordinators of StartCoordinators in (the built-in `coordinator` user); harmless elsewhere.
        if (!extra.Contains("--coordinator-pass")) argv.AddRange(["--coordinator-pass", CoordinatorPass]);
        argv.AddRange(extra);
        var s = new ServerProcess(argv.ToArray(), port, dir, true);
        s.Start();
        return s;
    }

    /// <summary>The secret of the nodes' built-in <c>coordinator</c> user (<c>coordinator-pass</c>), which the
    /// coordinators log in with: the coordination commands are closed to everyone else (docs/coordinator.md).</summary>
    public const string CoordinatorPass = "dotnet-test-coordinator-secret";

    /// <summary>Starts three <c>ruvio coordinator</c>s watching the primary on <paramref name="primaryPort"/>, logged in
    /// to the nodes as their <c>coordinator</c> user and to each other with a peer user, as docs/coordinator.md sets a
    /// group up.</summary>
    public static List<ServerProcess> StartCoordinators(int primaryPort, string service, int count = 3, int durabilityReplicas = 0)
    {
        var ports = Enumerable.Range(0, count).Select(_ => FreePort()).ToArray();
        var list = new List<ServerProcess>();
        foreach (var port in ports)
        {
            var dir = TempDir("ruvio-dotnet-coordinator-");
            var conf = Path.Combine(dir, "coordinator.conf");
            File.WriteAllText(conf,
                $"port {port}\nbind 127.0.0.1\ndir {dir}\n" +
                $"coordinator-peers {string.Join(' ', ports.Select(p => $"127.0.0.1:{p}"))}\n" +
                $"sentinel monitor {service} 127.0.0.1 {primaryPort} 2\n" +
                $"sentinel down-after-milliseconds {service} 1000\n" +
                $"sentinel durability-replicas {service} {durabilityReplicas}\n" +
                $"sentinel auth-user {service} coordinator\nsentinel auth-pass {service} {CoordinatorPass}\n" +
                "sentinel sentinel-user coordinators\nsentinel sentinel-pass dotnet-test-peer-secret\n");
            var s = new ServerProcess([RuvioBin, "coordinator", "--config", conf], port, dir, false);
            s.Start();
            list.Add(s);
        }
        return list;
    }

    public static ServerProcess StartRedis()
    {
        var exe = new[] { "/usr/bin/redis-server", "/usr/local/bin/redis-server" }.FirstOrDefault(File.Exists)
                  ?? throw new InvalidOperationException("redis-server is not installed (apt-get install redis-server)");
        var port = FreePort();
        var dir = TempDir("ruvio-dotnet-redis-");
        var s = new ServerProcess([exe, "--port", port.ToString(), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", "--loglevel", "warning"], port, dir, true);
        s.Start();
        return s;
    }

    public void Start()
    {
        var psi = new ProcessStartInfo(_argv[0]) { WorkingDirectory = Dir, RedirectStandardOutput = true, RedirectStandardError = true, UseShellExecute = false };
        foreach (var a in _argv.Skip(1)) psi.ArgumentList.Add(a);
        var p = Process.Start(psi) ?? throw new InvalidOperationException($"could not start {_argv[0]}");
        var log = new StreamWriter(LogPath, append: true) { AutoFlush = true };
        p.OutputDataReceived += (_, e) => { if (e.Data is not null) lock (log) log.WriteLine(e.Data); };
        p.ErrorDataReceived += (_, e) => { if (e.Data is not null) lock (log) log.WriteLine(e.Data); };
        p.BeginOutputReadLine();
        p.BeginErrorReadLine();
        _proc = p;
        // A test host that dies (or a test that forgets Dispose) must not leave servers behind.
        AppDomain.CurrentDomain.ProcessExit += (_, _) => { try { if (!p.HasExited) { kill(p.Id, SIGCONT); p.Kill(); } } catch { } };
        var deadline = Stopwatch.StartNew();
        while (deadline.Elapsed < TimeSpan.FromSeconds(20))
        {
            if (p.HasExited) throw new InvalidOperationException($"{_argv[0]} exited with {p.ExitCode}: {Log()}");
            if (_pingReady ? Ping(Port) : PortOpen(Port)) return;
            Thread.Sleep(30);
        }
        throw new InvalidOperationException($"{_argv[0]} did not answer on {Port} within 20 s: {Log()}");
    }

    public string Log()
    {
        try
        {
            using var f = new FileStream(LogPath, FileMode.Open, FileAccess.Read, FileShare.ReadWrite);
            using var r = new StreamReader(f);
            var s = r.ReadToEnd();
            return s.Length > 2000 ? s[^2000..] : s;
        }
        catch (IOException) { return ""; }
    }

    public static bool Ping(int port)
    {
        try
        {
            using var c = new TcpClient();
            c.Connect(IPAddress.Loopback, port);
            var s = c.GetStream();
            s.ReadTimeout = 500;
            s.Write("*1\r\n$4\r\nPING\r\n"u8);
            var buf = new byte[64];
            var n = s.Read(buf);
            var reply = Encoding.ASCII.GetString(buf, 0, n);
            return reply.StartsWith("+PONG", StringComparison.Ordinal) || reply.StartsWith("-NOAUTH", StringComparison.Ordinal);
        }
        catch (Exception) { return false; }
    }

    private static bool PortOpen(int port)
    {
        try
        {
            using var c = new TcpClient();
            c.Connect(IPAddress.Loopback, port);
            return true;
        }
        catch (SocketException) { return false; }
    }

    [DllImport("libc", SetLastError = true)]
    private static extern int kill(int pid, int sig);

    private const int SIGKILL = 9, SIGCONT = 18, SIGSTOP = 19;

    /// <summary>SIGSTOP, then wait until every thread of the process is stopped (the signal is delivered asynchronously).</summary>
    public void SigStop()
    {
        kill(Pid, SIGSTOP);
        var sw = Stopwatch.StartNew();
        while (sw.Elapsed < TimeSpan.FromSeconds(10))
        {
            var states = new List<string>();
            foreach (var task in Directory.GetDirectories($"/proc/{Pid}/task"))
            {
                try
                {
                    var stat = File.ReadAllText(Path.Combine(task, "stat"));
                    states.Add(stat[(stat.LastIndexOf(')') + 2)..].Split(' ')[0]);
                }
                catch (IOException) { }
            }
            if (states.Count > 0 && states.All(s => s is "T" or "t")) return;
            Thread.Sleep(5);
        }
        throw new InvalidOperationException("the server did not stop after SIGSTOP");
    }

    public void SigCont() => kill(Pid, SIGCONT);

    public void Kill9()
    {
        var p = _proc;
        _proc = null;
        if (p is null) return;
        kill(p.Id, SIGKILL);
        p.WaitForExit(20_000);
    }

    public void Restart()
    {
        Stop();
        Start();
    }

    public void Stop()
    {
        var p = _proc;
        _proc = null;
        if (p is null) return;
        if (!p.HasExited)
        {
            kill(p.Id, SIGCONT);
            try { p.Kill(); } catch (InvalidOperationException) { }
        }
        p.WaitForExit(20_000);
    }

    public void Dispose()
    {
        Stop();
        try { Directory.Delete(Dir, true); } catch (IOException) { } catch (UnauthorizedAccessException) { }
    }
}
