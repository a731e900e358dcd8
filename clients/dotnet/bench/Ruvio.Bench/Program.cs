// Usage: Ruvio.Bench <ruvio host:port> <redis host:port> [seconds per measurement] [callers]
// Lock cycles (acquire + release) side by side in one process run, one measurement after the other:
//   1. Ruvio.Client LeaseAsync + ReleaseAsync against ruvio   vs  StackExchange.Redis LockTake + LockRelease against redis-server
//   2. the lock helper (TryAcquireLockAsync + ReleaseAsync)   vs  DistributedLock.Redis TryAcquireAsync + Dispose (redis-server)
//   3. hand-over, 20 callers on one key: helper waiting with LEASE ... WAIT  vs  DistributedLock waiting (it polls)
// For each: cycles/s, client CPU per cycle (process CPU time / cycles) and bytes allocated per cycle.
using System.Diagnostics;
using Medallion.Threading.Redis;
using Ruvio;
using StackExchange.Redis;

var ruvioAddr = args[0];
var redisAddr = args[1];
var seconds = args.Length > 2 ? double.Parse(args[2]) : 5;
var callers = args.Length > 3 ? int.Parse(args[3]) : 50;

await using var ruvio = await RuvioConnection.ConnectAsync($"{ruvioAddr},asyncTimeout=30000");
var rdb = ruvio.GetDatabase();
await using var mux = await ConnectionMultiplexer.ConnectAsync($"{redisAddr},syncTimeout=30000,asyncTimeout=30000");
var sdb = mux.GetDatabase();
var results = new List<(string name, double rate, double cpuUs, double bytes)>();

async Task<(double, double, double)> Measure(string name, int n, Func<int, Task> cycle)
{
    // Warm-up, then the measured run.
    using (var warm = new CancellationTokenSource(TimeSpan.FromSeconds(1)))
        await Task.WhenAll(Enumerable.Range(0, n).Select(async i => { while (!warm.IsCancellationRequested) await cycle(i); }));
    long count = 0;
    var cpu0 = Process.GetCurrentProcess().TotalProcessorTime;
    var alloc0 = GC.GetTotalAllocatedBytes(true);
    var sw = Stopwatch.StartNew();
    using var stop = new CancellationTokenSource(TimeSpan.FromSeconds(seconds));
    await Task.WhenAll(Enumerable.Range(0, n).Select(async i =>
    {
        while (!stop.IsCancellationRequested)
        {
            await cycle(i);
            Interlocked.Increment(ref count);
        }
    }));
    var elapsed = sw.Elapsed.TotalSeconds;
    var cpu = (Process.GetCurrentProcess().TotalProcessorTime - cpu0).TotalMicroseconds;
    var bytes = GC.GetTotalAllocatedBytes(true) - alloc0;
    var r = (count / elapsed, cpu / count, (double)bytes / count);
    results.Add((name, r.Item1, r.Item2, r.Item3));
    Console.WriteLine($"{name,-60} {r.Item1,10:0} cycles/s {r.Item2,8:0.0} us CPU/cycle {r.Item3,8:0} B/cycle");
    return r;
}

var run = Guid.NewGuid().ToString("n")[..8];
var a1 = await Measure($"Ruvio.Client LEASE+RELEASE ({callers} callers, own keys)", callers, async i =>
{
    var t = await rdb.LeaseAsync($"b:{run}:l:{i}", 30_000);
    await rdb.ReleaseAsync($"b:{run}:l:{i}", t!.Value);
});
var b1 = await Measure($"SE.Redis LockTake+LockRelease on redis ({callers} callers)", callers, async i =>
{
    var key = $"b:{run}:s:{i}";
    if (!await sdb.LockTakeAsync(key, "me", TimeSpan.FromSeconds(30))) throw new Exception("not taken");
    await sdb.LockReleaseAsync(key, "me");
});
var a2 = await Measure($"Ruvio helper TryAcquireLockAsync+ReleaseAsync ({callers} callers)", callers, async i =>
{
    var l = await rdb.TryAcquireLockAsync($"b:{run}:h:{i}", TimeSpan.FromSeconds(30));
    await l!.ReleaseAsync();
});
var dlLocks = Enumerable.Range(0, callers).Select(i => new RedisDistributedLock($"b:{run}:d:{i}", sdb)).ToArray();
var b2 = await Measure($"DistributedLock.Redis TryAcquire+Dispose on redis ({callers} callers)", callers, async i =>
{
    var h = await dlLocks[i].TryAcquireAsync();
    await h!.DisposeAsync();
});
var handoverOptions = new RuvioLockOptions { Wait = TimeSpan.FromSeconds(30) };
var a3 = await Measure("hand-over, 20 callers on one key: Ruvio helper (LEASE WAIT)", 20, async _ =>
{
    var l = await rdb.TryAcquireLockAsync($"b:{run}:one", TimeSpan.FromSeconds(30), handoverOptions);
    await l!.ReleaseAsync();
});
var one = new RedisDistributedLock($"b:{run}:dlone", sdb);
var b3 = await Measure("hand-over, 20 callers on one key: DistributedLock.Redis (polls)", 20, async _ =>
{
    var h = await one.TryAcquireAsync(TimeSpan.FromSeconds(30));
    await h!.DisposeAsync();
});

Console.WriteLine();
Console.WriteLine("| comparison | throughput | CPU/cycle | bytes/cycle |");
Console.WriteLine("|---|---|---|---|");
void Ratio(string what, (double r, double c, double b) x, (double r, double c, double b) y) =>
    Console.WriteLine($"| {what} | {x.r / y.r:0.00}x | {x.c / y.c:0.00}x | {x.b / y.b:0.00}x |");
Ratio("Ruvio.Client vs SE.Redis LockTake+LockRelease (50 callers)", a1, b1);
Ratio("helper vs DistributedLock.Redis (50 callers)", a2, b2);
Ratio("hand-over, 20 callers on one key: helper vs DistributedLock", a3, b3);
