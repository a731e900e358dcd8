using Ruvio;
using Ruvio.AspNetCore.DistributedLock;

namespace Ruvio.AspNetCore.Sample;

/// <summary>
/// An ordinary BackgroundService run by AddRuvioSingleton on exactly one instance. Every "batch" it publishes is a
/// fenced write (<c>IFGT</c>) under its term's token to <c>KeyPrefix + name + ":data"</c>, so a worker that was paused
/// past its lease and resumes cannot overwrite what the next holder wrote: its writes answer 0.
/// </summary>
public sealed class OutboxPublisher(IRuvioSingletonLease lease, IRuvioLocks locks, SampleStats stats, IConfiguration config,
    ILogger<OutboxPublisher> logger) : BackgroundService
{
    protected override async Task ExecuteAsync(CancellationToken stoppingToken)
    {
        var db = await locks.GetDatabaseAsync(stoppingToken);
        var key = $"{lease.Key}:data"; // next to the lock: KeyPrefix + name + ":data"
        var interval = TimeSpan.FromMilliseconds(config.GetValue("Outbox:IntervalMs", 100));
        var throwAfter = config.GetValue("Outbox:ThrowAfterBatches", 0);
        stats.TermStarted(lease.Name, lease.Token);
        var batch = 0;
        try
        {
            while (!stoppingToken.IsCancellationRequested)
            {
                batch++;
                await PublishAsync(db, key, batch);
                if (throwAfter > 0 && batch >= throwAfter) throw new InvalidOperationException($"outbox batch {batch} failed (the sample's Outbox:ThrowAfterBatches)");
                // A batch in flight is not cut short: a process paused here (SIGSTOP, a long GC) resumes and writes on.
                await Task.Delay(interval, CancellationToken.None);
            }
            // On stop, flush what is pending, as a real publisher does: still under this term's token.
            await PublishAsync(db, key, batch + 1);
        }
        finally
        {
            stats.TermEnded(lease.Name);
        }
    }

    private async Task PublishAsync(RuvioDatabase db, string key, int batch)
    {
        try
        {
            var written = await db.IfGtAsync(key, lease.Token, $"{config["Instance"]}:{lease.Token}:{batch}");
            if (written == 1) Interlocked.Increment(ref stats.FencedWritesAccepted);
            else
            {
                Interlocked.Increment(ref stats.FencedWritesRejected);
                logger.LogWarning("Fenced write of {Name} with token {Token} rejected: a newer holder wrote", lease.Name, lease.Token);
            }
        }
        catch (RuvioException e)
        {
            Interlocked.Increment(ref stats.FencedWritesFailed);
            logger.LogWarning(e, "Fenced write of {Name} failed", lease.Name);
        }
    }
}
