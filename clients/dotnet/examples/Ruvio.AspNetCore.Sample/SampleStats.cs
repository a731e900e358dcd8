using System.Collections.Concurrent;

namespace Ruvio.AspNetCore.Sample;

/// <summary>What this instance did, served at GET /stats (the tests read it).</summary>
public sealed class SampleStats
{
    public long PayStarted, PayCompleted, PayAborted;
    public long FencedWritesAccepted, FencedWritesRejected, FencedWritesFailed;
    private readonly ConcurrentDictionary<string, string> _running = new();
    private readonly ConcurrentDictionary<string, int> _terms = new();

    public void TermStarted(string name, long token)
    {
        _running[name] = token.ToString();
        _terms.AddOrUpdate(name, 1, (_, n) => n + 1);
    }

    public void TermEnded(string name) => _running.TryRemove(name, out _);

    public object Snapshot() => new
    {
        pid = Environment.ProcessId,
        payStarted = Interlocked.Read(ref PayStarted),
        payCompleted = Interlocked.Read(ref PayCompleted),
        payAborted = Interlocked.Read(ref PayAborted),
        fencedWritesAccepted = Interlocked.Read(ref FencedWritesAccepted),
        fencedWritesRejected = Interlocked.Read(ref FencedWritesRejected),
        fencedWritesFailed = Interlocked.Read(ref FencedWritesFailed),
        running = _running.ToDictionary(kv => kv.Key, kv => kv.Value),
        terms = _terms.ToDictionary(kv => kv.Key, kv => kv.Value),
    };
}
