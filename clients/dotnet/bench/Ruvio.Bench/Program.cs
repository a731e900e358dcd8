// Usage: Ruvio.Bench <ruvio host:port> <redis host:port> [seconds per measurement] [callers] [rounds]
// Side by side in one process run, every round measuring each of these one after the other:
//   1. Ruvio.Client LeaseAsync + ReleaseAsync against ruvio   vs  StackExchange.Redis LockTake + LockRelease against redis-server
//   2. the lock helper (TryAcquireLockAsync + ReleaseAsync)   vs  DistributedLock.Redis TryAcquireAsync + Dispose (redis-server)
//      (1 and 2: cycles/s, client CPU per cycle = process CPU time / cycles, bytes allocated per cycle)
//   3. hand-over, 20 callers on one key: the helper waiting in the server's queue (LEASE ... WAIT) vs DistributedLock
//      waiting (it polls). Measured as latency: for every hand-over, the time from the instant the releasing holder's
//      ReleaseAsync/DisposeAsync returned to the instant the next holder's acquire call returned, both taken with
//      Stopwatch.GetTimestamp (one monotonic clock, one process), paired by the order of the holders; and, the
//      conservative figure, from the instant the release call was made (it includes the RELEASE round trip).
// Then the median over the rounds of every figure and of every per-round ratio.
using System.Diagnostics;
using System.Globalization;
using Medallion.Threading.Redis;
using Ruvio;
using StackExchange.Redis;

CultureInfo.DefaultThreadCurrentCulture = CultureInfo.InvariantCulture;
var ruvioAddr = args[0];
var redisAddr = args[1];
var seconds = args.Length > 2 ? double.Parse(args[2], CultureInfo.InvariantCulture) : 5;
var callers = args.Length > 3 ? int.Parse(args[3], CultureInfo.InvariantCulture) : 50;
var rounds = args.Length > 4 ? int.Parse(args[4], CultureInfo.InvariantCulture) : 3;
// RUVIO_BENCH_ONLY=1,2,3 runs only those comparisons (1: raw commands, 2: lock helper, 3: hand-over); default all.
var only = (Environment.GetEnvironmentVariable("RUVIO_BENCH_ONLY") ?? "1,2,3").Split(',', StringSplitOptions.TrimEntries);
const int HandOverCallers = 20;

await using var ruvio = await RuvioConnection.ConnectAsync($"{ruvioAddr},asyncTimeout=30000");
var rdb = ruvio.GetDatabase();
await using var mux = await ConnectionMultiplexer.ConnectAsync($"{redisAddr},syncTimeout=30000,asyncTimeout=30000");
var sdb = mux.GetDatabase();
var run = Guid.NewGuid().ToString("n")[..8];

static string Load() => File.Exists("/proc/loadavg") ? string.Join(' ', File.ReadAllText("/proc/loadavg").Split(' ').Take(3)) : "?";
static double Median(IEnumerable<double> xs)
{
    var s = xs.OrderBy(x => x).ToArray();
    return s.Length == 0 ? double.NaN : s.Length % 2 == 1 ? s[s.Length / 2] : (s[s.Length / 2 - 1] + s[s.Length / 2]) / 2;
}
static double Percentile(double[] sorted, double p) =>
    sorted.Length == 0 ? double.NaN : sorted[Math.Clamp((int)Math.Ceiling(p / 100 * sorted.Length) - 1, 0, sorted.Length - 1)];
static double Us(long ticks) => ticks * 1e6 / Stopwatch.Frequency;

var cycles = new Dictionary<string, List<(double rate, double cpu, double bytes)>>();
var handovers = new Dictionary<string, List<(double p50, double p99, double mean, double p50Sent, double p99Sent, double meanSent, int n, double cpu, double bytes)>>();

async Task<(double rate, double cpu, double bytes)> Measure(string name, int n, Func<int, Task> cycle)
{
    // Warm-up, then the measured run.
    using (var warm = new CancellationTokenSource(TimeSpan.FromSeconds(1)))
        await Task.WhenAll(Enumerable.Range(0, n).Select(async i => { while (!warm.IsCancellationRequested) await cycle(i); }));
    long count = 0;
    var load = Load();
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
    (cycles.TryGetValue(name, out var l) ? l : cycles[name] = []).Add(r);
    Console.WriteLine($"  {name,-62} {r.Item1,9:0} cycles/s {r.Item2,7:0.0} us CPU/cycle {r.Item3,6:0} B/cycle  (load {load})");
    return r;
}

// Hand-over latency. Each of the 20 callers loops: acquire (waiting), note the grant instant, release, note the
// instant the release call returned; then it waits until the next holder has been granted before it contends again,
// so that every hand-over goes to a caller that was already waiting (without that, DistributedLock's releaser would
// mostly take the lock straight back while the others sleep between polls, and its "hand-overs" would be
// re-acquisitions). Holders are mutually exclusive, so the k-th grant to return is the k-th holder: the k-th
// hand-over is grant[k+1] - releaseReturned[k].
async Task MeasureHandOver(string name, Func<Task<object>> acquire, Func<object, Task> release)
{
    const int Cap = 1 << 20;
    var grantAt = new long[Cap];
    var releaseSent = new long[Cap];
    var releaseReturned = new long[Cap];
    var holder = new int[Cap];
    long seq = -1;
    var next = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
    long windowStart = 0, windowEnd = long.MaxValue;
    (long from, long to) windowSeq = default;
    long cpuTicks = 0, allocated = 0;

    async Task Caller(int id, CancellationToken stop, Task stopped)
    {
        while (!stop.IsCancellationRequested)
        {
            var h = await acquire();
            var granted = Stopwatch.GetTimestamp();
            // Only the holder runs this (until its release reaches the server), so the swap is ordered by holders.
            var k = Interlocked.Increment(ref seq);
            var mine = new TaskCompletionSource(TaskCreationOptions.RunContinuationsAsynchronously);
            Interlocked.Exchange(ref next, mine).TrySetResult();
            if (k < Cap) { grantAt[k] = granted; holder[k] = id; }
            var sent = Stopwatch.GetTimestamp();
            await release(h);
            var returned = Stopwatch.GetTimestamp();
            if (k < Cap) { releaseSent[k] = sent; releaseReturned[k] = returned; }
            await Task.WhenAny(mine.Task, stopped);
        }
    }

    async Task Phase(double secs, bool record)
    {
        using var stop = new CancellationTokenSource();
        var stopped = Task.Delay(Timeout.Infinite, stop.Token).ContinueWith(_ => { }, TaskScheduler.Default);
        var cpu0 = Process.GetCurrentProcess().TotalProcessorTime;
        var alloc0 = GC.GetTotalAllocatedBytes(true);
        var startSeq = Interlocked.Read(ref seq);
        if (record) windowStart = Stopwatch.GetTimestamp();
        var tasks = Enumerable.Range(0, HandOverCallers).Select(i => Caller(i, stop.Token, stopped)).ToArray();
        await Task.Delay(TimeSpan.FromSeconds(secs));
        if (record)
        {
            windowEnd = Stopwatch.GetTimestamp();
            cpuTicks = (long)((Process.GetCurrentProcess().TotalProcessorTime - cpu0).TotalSeconds * Stopwatch.Frequency);
            allocated = GC.GetTotalAllocatedBytes(true) - alloc0;
            windowSeq = (startSeq, Interlocked.Read(ref seq));
        }
        stop.Cancel();
        await Task.WhenAll(tasks);
    }

    await Phase(1, record: false); // warm-up
    var load = Load();
    var firstK = Interlocked.Read(ref seq) + 1;
    await Phase(seconds, record: true);
    // Hand-overs whose next grant fell inside the measured window, between callers of this phase.
    var lat = new List<double>();
    var latSent = new List<double>();
    var self = 0;
    for (var k = firstK; k + 1 <= Math.Min(Interlocked.Read(ref seq), Cap - 1); k++)
    {
        if (grantAt[k + 1] < windowStart || grantAt[k + 1] > windowEnd || releaseReturned[k] == 0) continue;
        if (holder[k + 1] == holder[k]) self++;
        lat.Add(Us(grantAt[k + 1] - releaseReturned[k]));
        latSent.Add(Us(grantAt[k + 1] - releaseSent[k]));
    }
    var sorted = lat.OrderBy(x => x).ToArray();
    var sortedSent = latSent.OrderBy(x => x).ToArray();
    var cycleCount = Math.Max(1, windowSeq.to - windowSeq.from);
    var r = (Percentile(sorted, 50), Percentile(sorted, 99), sorted.DefaultIfEmpty(double.NaN).Average(),
        Percentile(sortedSent, 50), Percentile(sortedSent, 99), sortedSent.DefaultIfEmpty(double.NaN).Average(),
        sorted.Length, Us(cpuTicks) / cycleCount, (double)allocated / cycleCount);
    (handovers.TryGetValue(name, out var l) ? l : handovers[name] = []).Add(r);
    Console.WriteLine($"  {name,-40} release returned -> next grant: p50 {r.Item1:0.0} us, p99 {r.Item2:0.0} us, mean {r.Item3:0.0} us; " +
        $"release sent -> next grant: p50 {r.Item4:0.0} us, p99 {r.Item5:0.0} us, mean {r.Item6:0.0} us; {r.Item7} hand-overs ({self} to the releaser itself); " +
        $"{r.Item8:0.0} us CPU, {r.Item9:0} B per hand-over  (load {load})");
}

var handoverOptions = new RuvioLockOptions { Wait = TimeSpan.FromSeconds(30) };
var one = new RedisDistributedLock($"b:{run}:dlone", sdb);
var dlLocks = Enumerable.Range(0, callers).Select(i => new RedisDistributedLock($"b:{run}:d:{i}", sdb)).ToArray();
const string A1 = "Ruvio.Client LEASE+RELEASE (own keys)", B1 = "SE.Redis LockTake+LockRelease on redis";
const string A2 = "Ruvio helper TryAcquireLockAsync+ReleaseAsync", B2 = "DistributedLock.Redis TryAcquire+Dispose on redis";
const string A3 = "Ruvio helper, LEASE ... WAIT (ruvio)", B3 = "DistributedLock.Redis, polling (redis)";
var ratios = new Dictionary<string, List<double>>();
void Ratio(string what, double x) => (ratios.TryGetValue(what, out var l) ? l : ratios[what] = []).Add(x);

Console.WriteLine($"{seconds} s per measurement, {callers} callers (hand-over: {HandOverCallers} on one key), {rounds} rounds; load average at start {Load()}");
for (var round = 1; round <= rounds; round++)
{
    Console.WriteLine($"round {round}:");
    if (only.Contains("1"))
    {
        var a1 = await Measure(A1, callers, async i =>
        {
            var t = await rdb.LeaseAsync($"b:{run}:l:{i}", 30_000);
            await rdb.ReleaseAsync($"b:{run}:l:{i}", t!.Value);
        });
        var b1 = await Measure(B1, callers, async i =>
        {
            var key = $"b:{run}:s:{i}";
            if (!await sdb.LockTakeAsync(key, "me", TimeSpan.FromSeconds(30))) throw new Exception("not taken");
            await sdb.LockReleaseAsync(key, "me");
        });
        Ratio("t1", a1.rate / b1.rate); Ratio("c1", a1.cpu / b1.cpu); Ratio("b1", a1.bytes / b1.bytes);
    }
    if (only.Contains("2"))
    {
        var a2 = await Measure(A2, callers, async i =>
        {
            var l = await rdb.TryAcquireLockAsync($"b:{run}:h:{i}", TimeSpan.FromSeconds(30));
            await l!.ReleaseAsync();
        });
        var b2 = await Measure(B2, callers, async i =>
        {
            var h = await dlLocks[i].TryAcquireAsync();
            await h!.DisposeAsync();
        });
        Ratio("t2", a2.rate / b2.rate); Ratio("c2", a2.cpu / b2.cpu); Ratio("b2", a2.bytes / b2.bytes);
    }
    if (only.Contains("3"))
    {
        await MeasureHandOver(A3,
            async () => (await rdb.TryAcquireLockAsync($"b:{run}:one", TimeSpan.FromSeconds(30), handoverOptions))!,
            h => ((IRuvioLock)h).ReleaseAsync());
        await MeasureHandOver(B3,
            async () => (await one.TryAcquireAsync(TimeSpan.FromSeconds(30)))!,
            h => ((RedisDistributedLockHandle)h).DisposeAsync().AsTask());
        var h3 = handovers[A3][^1];
        var d3 = handovers[B3][^1];
        Ratio("h50", d3.p50 / h3.p50); Ratio("hmean", d3.mean / h3.mean);
        Ratio("h50sent", d3.p50Sent / h3.p50Sent); Ratio("h99sent", d3.p99Sent / h3.p99Sent); Ratio("hmeansent", d3.meanSent / h3.meanSent);
    }
}

Console.WriteLine();
Console.WriteLine($"Medians over {rounds} rounds (load average at end {Load()}):");
Console.WriteLine();
Console.WriteLine("| measurement | cycles/s | client CPU per cycle | allocated per cycle |");
Console.WriteLine("|---|---|---|---|");
foreach (var (name, list) in cycles)
    Console.WriteLine($"| {name}, {callers} callers | {Median(list.Select(x => x.rate)):0} | {Median(list.Select(x => x.cpu)):0.0} us | {Median(list.Select(x => x.bytes)):0} B |");
Console.WriteLine();
Console.WriteLine($"| hand-over, {HandOverCallers} callers on one key | release returned -> next grant: p50 / p99 / mean | release sent -> next grant: p50 / p99 / mean | hand-overs per round | CPU, bytes per hand-over |");
Console.WriteLine("|---|---|---|---|---|");
foreach (var (name, list) in handovers)
    Console.WriteLine($"| {name} | {Median(list.Select(x => x.p50)):0.0} / {Median(list.Select(x => x.p99)):0.0} / {Median(list.Select(x => x.mean)):0.0} us " +
        $"| {Median(list.Select(x => x.p50Sent)):0.0} / {Median(list.Select(x => x.p99Sent)):0.0} / {Median(list.Select(x => x.meanSent)):0.0} us " +
        $"| {string.Join(", ", list.Select(x => x.n))} | {Median(list.Select(x => x.cpu)):0.0} us, {Median(list.Select(x => x.bytes)):0} B |");
Console.WriteLine();
Console.WriteLine("| comparison (median of the per-round ratios) | throughput | CPU/cycle | bytes/cycle |");
Console.WriteLine("|---|---|---|---|");
if (ratios.ContainsKey("t1")) Console.WriteLine($"| Ruvio.Client vs SE.Redis LockTake+LockRelease | {Median(ratios["t1"]):0.00}x | {Median(ratios["c1"]):0.00}x | {Median(ratios["b1"]):0.00}x |");
if (ratios.ContainsKey("t2")) Console.WriteLine($"| helper vs DistributedLock.Redis | {Median(ratios["t2"]):0.00}x | {Median(ratios["c2"]):0.00}x | {Median(ratios["b2"]):0.00}x |");
Console.WriteLine();
if (ratios.ContainsKey("h50")) Console.WriteLine($"hand-over, DistributedLock / helper (how many times faster the helper hands over; median of the per-round ratios): " +
    $"release sent -> next grant: p50 {Median(ratios["h50sent"]):0.0}x, p99 {Median(ratios["h99sent"]):0.0}x, mean {Median(ratios["hmeansent"]):0.0}x; " +
    $"release returned -> next grant: p50 {Median(ratios["h50"]):0.0}x, mean {Median(ratios["hmean"]):0.0}x (a negative ratio: the helper's next grant usually returns before the release call does)");
