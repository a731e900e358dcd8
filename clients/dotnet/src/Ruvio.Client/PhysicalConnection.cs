using System.Buffers;
using System.Diagnostics;
using System.Net;
using System.Net.Security;
using System.Net.Sockets;

namespace Ruvio;

/// <summary>
/// One command in flight: completed by the reply (in order), by its timeout, by cancellation, or by the
/// connection's loss. Exactly one of them wins.
/// </summary>
internal sealed class PendingCommand : TaskCompletionSource<RuvioResult>
{
    public readonly string Name;
    public readonly long DeadlineTicks; // Stopwatch ticks; long.MaxValue: none
    public long Seq;
    public CancellationTokenRegistration Registration;

    public PendingCommand(string name, long deadlineTicks) : base(TaskCreationOptions.RunContinuationsAsynchronously)
    {
        Name = name;
        DeadlineTicks = deadlineTicks;
    }

    public void Complete(RuvioResult value)
    {
        if (value.Type == RuvioResultType.Error)
            Fail(new RuvioServerException(value.AsString()!) { Command = Name });
        else if (TrySetResult(value))
            Registration.Dispose();
    }

    public void Fail(Exception e)
    {
        if (TrySetException(e)) Registration.Dispose();
    }
}

/// <summary>
/// One TCP (optionally TLS) connection: pipelined writes batched by a single flusher, one read loop matching replies
/// to commands in order, a timer that fails commands past their deadline. Handshake (HELLO/AUTH/SELECT/SETNAME/
/// CLIENT DURABILITY) is done by <see cref="OpenAsync"/>.
/// </summary>
internal sealed class PhysicalConnection : IAsyncDisposable
{
    private const int MaxReadBuffer = RespParser.MaxBulkLength + 1024 * 1024;

    private readonly Socket _socket;
    private Stream _stream;
    private readonly object _sync = new();
    private readonly Queue<PendingCommand> _pending = new();
    private ArrayBufferWriter<byte> _out = new(4096);
    private ArrayBufferWriter<byte>? _spare = new(4096);
    private bool _flushing;
    private bool _closed;
    private Exception? _closeReason;
    private long _enqueuedSeq;
    private long _writtenSeq; // every command with Seq <= this has been handed to the socket
    private Timer? _timeoutTimer;
    private readonly TaskCompletionSource _closedTcs = new(TaskCreationOptions.RunContinuationsAsynchronously);

    public EndPoint EndPoint { get; }
    public string Description { get; }
    public int Protocol { get; private set; } = 2;
    /// <summary>Called (once) when the connection is lost; not called by <see cref="DisposeAsync"/>.</summary>
    public Action<PhysicalConnection, Exception>? Failed;
    /// <summary>Receives RESP3 push messages, and in subscriber mode RESP2 message arrays.</summary>
    public Action<RuvioResult>? OnPush;
    /// <summary>In subscriber mode every reply that is not a (p)(un)subscribe confirmation is a message.</summary>
    public bool SubscriberMode;
    public Task Closed => _closedTcs.Task;
    public bool IsClosed => Volatile.Read(ref _closed);

    private PhysicalConnection(Socket socket, Stream stream, EndPoint endPoint)
    {
        _socket = socket;
        _stream = stream;
        EndPoint = endPoint;
        Description = Format(endPoint);
    }

    internal static string Format(EndPoint ep) => ep switch
    {
        DnsEndPoint d => $"{d.Host}:{d.Port}",
        IPEndPoint ip => ip.ToString(),
        _ => ep.ToString() ?? "?",
    };

    /// <summary>Opens a connection and runs the handshake, all within <see cref="RuvioOptions.ConnectTimeout"/>.</summary>
    public static async Task<PhysicalConnection> OpenAsync(EndPoint endPoint, RuvioOptions options, HandshakeKind kind, CancellationToken ct)
    {
        if (EndPointRewriter is { } rewrite) endPoint = rewrite(endPoint);
        using var cts = CancellationTokenSource.CreateLinkedTokenSource(ct);
        cts.CancelAfter(options.ConnectTimeout);
        var socket = new Socket(SocketType.Stream, ProtocolType.Tcp) { NoDelay = true };
        PhysicalConnection? conn = null;
        try
        {
            try
            {
                await socket.ConnectAsync(endPoint, cts.Token).ConfigureAwait(false);
            }
            catch (OperationCanceledException) when (!ct.IsCancellationRequested)
            {
                throw new RuvioConnectionException($"could not connect to {Format(endPoint)} within {options.ConnectTimeout.TotalMilliseconds:0} ms (connectTimeout)");
            }
            catch (SocketException e)
            {
                throw new RuvioConnectionException($"could not connect to {Format(endPoint)}: {e.Message}", false, e);
            }
            socket.SetSocketOption(SocketOptionLevel.Socket, SocketOptionName.KeepAlive, true);
            Stream stream = new NetworkStream(socket, ownsSocket: false);
            if (options.Ssl)
            {
                var ssl = new SslStream(stream, leaveInnerStreamOpen: false);
                var host = options.SslHost ?? (endPoint as DnsEndPoint)?.Host ?? "";
                await ssl.AuthenticateAsClientAsync(new SslClientAuthenticationOptions { TargetHost = host }, cts.Token).ConfigureAwait(false);
                stream = ssl;
            }
            conn = new PhysicalConnection(socket, stream, endPoint);
            conn.Start(options.AsyncTimeout);
            await conn.HandshakeAsync(options, kind, cts.Token).ConfigureAwait(false);
            return conn;
        }
        catch (Exception e)
        {
            if (conn is not null) await conn.DisposeAsync().ConfigureAwait(false);
            else socket.Dispose();
            if (e is OperationCanceledException && !ct.IsCancellationRequested)
                throw new RuvioConnectionException($"the handshake with {Format(endPoint)} did not finish within {options.ConnectTimeout.TotalMilliseconds:0} ms (connectTimeout)");
            throw;
        }
    }

    /// <summary>
    /// Test seam (internal): lets the tests run the product post's snippets, which name 127.0.0.1:6379, verbatim
    /// against a server on another port of this shared machine.
    /// </summary>
    internal static Func<EndPoint, EndPoint>? EndPointRewriter;

    internal enum HandshakeKind { Server, Coordinator }

    private async Task HandshakeAsync(RuvioOptions o, HandshakeKind kind, CancellationToken ct)
    {
        var timeout = o.ConnectTimeout;
        var user = kind == HandshakeKind.Coordinator ? o.SentinelUser : o.User;
        var password = kind == HandshakeKind.Coordinator ? o.SentinelPassword : o.Password;
        var resp3 = kind == HandshakeKind.Server && o.Protocol == RuvioProtocol.Resp3;
        var named = false;
        if (resp3)
        {
            var args = new List<object?> { "3" };
            if (password is not null) args.AddRange(["AUTH", user ?? "default", password]);
            if (!string.IsNullOrEmpty(o.ClientName)) args.AddRange(["SETNAME", o.ClientName]);
            try
            {
                await SendAsync("HELLO", args.ToArray(), timeout, ct).ConfigureAwait(false);
                Protocol = 3;
                named = true;
                password = null; // authenticated by HELLO
            }
            catch (RuvioServerException e) when (e.Code == "NOPROTO" || e.Message.StartsWith("ERR unknown command", StringComparison.Ordinal))
            {
                // A server without RESP3: stay on RESP2 and authenticate the RESP2 way.
            }
        }
        if (password is not null)
        {
            object?[] auth = user is null ? [password] : [user, password];
            await SendAsync("AUTH", auth, timeout, ct).ConfigureAwait(false);
        }
        if (kind == HandshakeKind.Coordinator) return;
        if (!named && !string.IsNullOrEmpty(o.ClientName))
            await SendAsync("CLIENT", ["SETNAME", o.ClientName], timeout, ct).ConfigureAwait(false);
        if (o.DefaultDatabase != 0)
            await SendAsync("SELECT", [o.DefaultDatabase], timeout, ct).ConfigureAwait(false);
        if (o.DurabilityReplicas is int n)
        {
            // A refusal (e.g. no appendonly on this node) fails the connect: never a quiet fall back to asynchronous.
            await SendAsync("CLIENT", ["DURABILITY", "REPLICAS", n], timeout, ct).ConfigureAwait(false);
        }
    }

    private void Start(TimeSpan asyncTimeout)
    {
        // Deadlines are checked by a coarse timer: one per connection, not one per command.
        var period = TimeSpan.FromMilliseconds(Math.Clamp(asyncTimeout.TotalMilliseconds / 20, 10, 100));
        _timeoutTimer = new Timer(static s => ((PhysicalConnection)s!).CheckTimeouts(), this, period, period);
        _ = ReadLoopAsync();
    }

    /// <summary>
    /// Queues a command. <paramref name="timeout"/> counts from now; <see cref="Timeout.InfiniteTimeSpan"/> for none.
    /// </summary>
    public Task<RuvioResult> SendAsync(string command, object?[] args, TimeSpan timeout, CancellationToken ct)
    {
        foreach (var a in args)
            if (a is null) throw new ArgumentNullException(nameof(args), $"an argument of {command} is null");
        var deadline = timeout == Timeout.InfiniteTimeSpan ? long.MaxValue : Stopwatch.GetTimestamp() + (long)(timeout.TotalSeconds * Stopwatch.Frequency);
        var op = new PendingCommand(command, deadline);
        bool flush, busy;
        lock (_sync)
        {
            busy = _pending.Count > 0;
            if (_closed)
                throw new RuvioConnectionException($"the connection to {Description} is closed; {command} was not sent", false, _closeReason);
            RespWriter.WriteCommand(_out, command, args);
            op.Seq = ++_enqueuedSeq;
            _pending.Enqueue(op);
            flush = !_flushing;
            _flushing = true;
        }
        if (ct.CanBeCanceled)
        {
            op.Registration = ct.UnsafeRegister(static (s, token) =>
            {
                var p = (PendingCommand)s!;
                p.TrySetCanceled(token);
            }, op);
        }
        if (flush)
        {
            // While other commands await their replies (callers are pipelining) and this is a pool thread, the write
            // goes through the pool's global queue rather than inline: the replies of one read complete many
            // commands at once, their callers' continuations (queued locally on the reader's worker) enqueue their
            // next commands before the flush runs, and one write (one syscall) carries them all: about a third of
            // the client CPU per lock cycle with 50 callers (clients/dotnet/BENCHMARKS.md). A lone command (an idle
            // connection: nothing to batch with) or one sent from an application's own thread is written inline,
            // as before: no extra thread hop for its latency, and no pool thread needed.
            if (busy && Thread.CurrentThread.IsThreadPoolThread)
                ThreadPool.UnsafeQueueUserWorkItem(static c => _ = c.FlushAsync(), this, preferLocal: false);
            else
                _ = FlushAsync();
        }
        return op.Task;
    }

    private async Task FlushAsync()
    {
        try
        {
            while (true)
            {
                ArrayBufferWriter<byte> buf;
                lock (_sync)
                {
                    if (_out.WrittenCount == 0 || _closed)
                    {
                        _flushing = false;
                        return;
                    }
                    buf = _out;
                    _out = _spare ?? new ArrayBufferWriter<byte>(4096);
                    _spare = null;
                    // From here on these commands count as sent: a failure of the write leaves their fate unknown.
                    _writtenSeq = _enqueuedSeq;
                }
                await _stream.WriteAsync(buf.WrittenMemory).ConfigureAwait(false);
                if (_stream is SslStream) await _stream.FlushAsync().ConfigureAwait(false);
                buf.ResetWrittenCount();
                if (buf.Capacity > 1024 * 1024) buf = new ArrayBufferWriter<byte>(4096); // do not keep a huge buffer
                lock (_sync) _spare = buf;
            }
        }
        catch (Exception e)
        {
            lock (_sync) _flushing = false;
            Fail(new RuvioConnectionException($"writing to {Description} failed: {e.Message}", true, e));
        }
    }

    private async Task ReadLoopAsync()
    {
        var buffer = ArrayPool<byte>.Shared.Rent(64 * 1024);
        int start = 0, end = 0;
        try
        {
            while (true)
            {
                if (end == buffer.Length)
                {
                    if (start > 0)
                    {
                        Buffer.BlockCopy(buffer, start, buffer, 0, end - start);
                        end -= start;
                        start = 0;
                    }
                    else
                    {
                        if (buffer.Length >= MaxReadBuffer) throw new RuvioProtocolException("protocol error: a reply larger than the client accepts");
                        var bigger = ArrayPool<byte>.Shared.Rent((int)Math.Min((long)buffer.Length * 2, MaxReadBuffer));
                        Buffer.BlockCopy(buffer, 0, bigger, 0, end);
                        ArrayPool<byte>.Shared.Return(buffer);
                        buffer = bigger;
                    }
                }
                var n = await _stream.ReadAsync(buffer.AsMemory(end)).ConfigureAwait(false);
                if (n == 0) throw new RuvioConnectionException($"the server {Description} closed the connection", true);
                end += n;
                while (start < end && RespParser.TryParse(buffer.AsSpan(start, end - start), out var value, out var used))
                {
                    start += used;
                    Dispatch(value);
                }
                if (start == end) start = end = 0;
            }
        }
        catch (Exception e)
        {
            var reason = e switch
            {
                RuvioException re => re,
                ObjectDisposedException => new RuvioConnectionException($"the connection to {Description} was closed", true, e),
                _ => new RuvioConnectionException($"reading from {Description} failed: {e.Message}", true, e),
            };
            Fail(reason);
        }
        finally
        {
            ArrayPool<byte>.Shared.Return(buffer);
        }
    }

    private void Dispatch(RuvioResult value)
    {
        if (value.Type == RuvioResultType.Push || (SubscriberMode && IsMessage(value)))
        {
            try { OnPush?.Invoke(value); }
            catch { /* a push handler's failure must not break the read loop */ }
            return;
        }
        PendingCommand? op;
        lock (_sync) _pending.TryDequeue(out op);
        if (op is null)
        {
            Fail(new RuvioProtocolException($"protocol error: {Description} sent a reply nobody asked for: {value}"));
            return;
        }
        op.Complete(value);
    }

    private static bool IsMessage(RuvioResult v) =>
        v.Type == RuvioResultType.Array && v.Items.Count >= 3 && v.Items[0].AsString() is "message" or "pmessage";

    private void CheckTimeouts()
    {
        var now = Stopwatch.GetTimestamp();
        List<(PendingCommand op, bool sent)>? expired = null;
        lock (_sync)
        {
            foreach (var op in _pending)
            {
                if (op.DeadlineTicks <= now && !op.Task.IsCompleted)
                    (expired ??= []).Add((op, op.Seq <= _writtenSeq));
            }
        }
        if (expired is null) return;
        foreach (var (op, sent) in expired)
        {
            var what = sent
                ? $"no reply to {op.Name} from {Description} within the timeout; it was sent and may or may not have run"
                : $"{op.Name} could not be sent to {Description} within the timeout; it did not run";
            op.Fail(new RuvioTimeoutException(what, sent) { Command = op.Name });
        }
    }

    private void Fail(Exception reason)
    {
        PendingCommand[] ops;
        long written;
        lock (_sync)
        {
            if (_closed) return;
            _closed = true;
            _closeReason = reason;
            ops = _pending.ToArray();
            _pending.Clear();
            written = _writtenSeq;
        }
        _timeoutTimer?.Dispose();
        try { _socket.Dispose(); } catch { }
        foreach (var op in ops)
        {
            var sent = op.Seq <= written;
            op.Fail(sent
                ? new RuvioConnectionException($"the connection to {Description} was lost after {op.Name} was sent; it may or may not have run ({reason.Message})", true, reason) { Command = op.Name }
                : new RuvioConnectionException($"the connection to {Description} was lost before {op.Name} was sent; it did not run ({reason.Message})", false, reason) { Command = op.Name });
        }
        _closedTcs.TrySetResult();
        Failed?.Invoke(this, reason);
    }

    /// <summary>Closes the connection; commands in flight fail with <see cref="RuvioConnectionException"/>.</summary>
    public ValueTask DisposeAsync()
    {
        Failed = null;
        Fail(new RuvioConnectionException($"the connection to {Description} was closed by the client", true));
        return ValueTask.CompletedTask;
    }
}
