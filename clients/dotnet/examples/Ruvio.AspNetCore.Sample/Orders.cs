using Ruvio;
using Ruvio.AspNetCore.DistributedLock;

namespace Ruvio.AspNetCore.Sample;

/// <summary>The guarded order endpoint.</summary>
public static class Orders
{
    /// <summary>
    /// Pays order <paramref name="id"/>: runs only while this request holds the lock <c>order:{id}</c>. It keeps a
    /// record in Ruvio that the tests check across instances: <c>sample:active:{id}</c> counts the handlers of the
    /// order running now (more than 1 would be an overlap, counted in <c>sample:overlaps:{id}</c>), and the payment
    /// is a fenced write (<c>IFGT</c>) under the request's token.
    /// </summary>
    public static async Task<IResult> PayAsync(string id, HttpContext context, IRuvioLocks locks, SampleStats stats, IConfiguration config)
    {
        var held = context.GetRuvioLock()!;
        var db = await locks.GetDatabaseAsync(context.RequestAborted);
        var active = (await db.ExecuteAsync("INCR", [$"sample:active:{id}"], context.RequestAborted)).AsInt64();
        if (active != 1) await db.ExecuteAsync("INCR", [$"sample:overlaps:{id}"], context.RequestAborted);
        Interlocked.Increment(ref stats.PayStarted);
        try
        {
            // The work: its length comes from the query (?ms=...), as the tests need long and short requests.
            var ms = int.TryParse(context.Request.Query["ms"], out var q) ? q : config.GetValue("Orders:WorkMs", 200);
            await Task.Delay(ms, context.RequestAborted);
        }
        catch (OperationCanceledException) when (context.RequestAborted.IsCancellationRequested)
        {
            // RequestAborted fires when the client leaves or the lock is lost (UseRuvioLock links them).
            Interlocked.Increment(ref stats.PayAborted);
            _ = db.ExecuteAsync("DECR", [$"sample:active:{id}"], CancellationToken.None); // lands when Ruvio answers again
            throw;
        }
        await db.ExecuteAsync("DECR", [$"sample:active:{id}"], CancellationToken.None);
        var written = await db.IfGtAsync($"sample:order:{id}", held.Token, $"paid by {config["Instance"]}");
        Interlocked.Increment(ref stats.PayCompleted);
        return Results.Json(new { order = id, instance = config["Instance"], token = held.Token.ToString(), fencedWrite = written });
    }
}
