// Usage: Ruvio.Examples <quickstart|lock-helper|fencing|semaphore|execute> <host:port>
// Each example is the README's code block of the same name, verbatim (ReadmeTests checks that), wrapped in a method.
using Ruvio;

if (args.Length != 2) { Console.Error.WriteLine("usage: Ruvio.Examples <example> <host:port>"); return 2; }
var address = args[1];
switch (args[0])
{
    case "quickstart": await Quickstart(address); break;
    case "lock-helper": await LockHelper(address); break;
    case "fencing": await Fencing(address); break;
    case "semaphore": await Semaphore(address); break;
    case "execute": await Execute(address); break;
    default: Console.Error.WriteLine($"unknown example {args[0]}"); return 2;
}
Console.WriteLine($"{args[0]}: ok");
return 0;

static async Task Quickstart(string address)
{
    // README: quickstart
    await using var connection = await RuvioConnection.ConnectAsync($"{address},name=reports,asyncTimeout=5000");
    var db = await connection.GetDefaultDatabaseAsync();

    long? token = await db.LeaseAsync("job:nightly-report", TimeSpan.FromSeconds(30));
    if (token is long held)
    {
        Console.WriteLine($"holding job:nightly-report with token {held}");
        await db.ReleaseAsync("job:nightly-report", held);
    }
    // README: end
}

static async Task LockHelper(string address)
{
    // README: lock-helper
    await using var connection = await RuvioConnection.ConnectAsync(address);
    var db = connection.GetDatabase();

    await using IRuvioLock? held = await db.TryAcquireLockAsync(
        "job:nightly-report",
        lease: TimeSpan.FromSeconds(30),
        new RuvioLockOptions { Wait = TimeSpan.FromSeconds(5), MaxHold = TimeSpan.FromMinutes(10) });
    if (held is null) return; // someone else runs it

    // Renewed every 10 s in the background; LockLost is cancelled before the server's deadline if that fails.
    await RunReportAsync(db, held.Token, held.LockLost);
    // README: end
}

static async Task RunReportAsync(RuvioDatabase db, long token, CancellationToken lockLost)
{
    for (var part = 0; part < 3; part++)
    {
        lockLost.ThrowIfCancellationRequested();
        await db.IfGtAsync("report:42", token, $"part {part}", cancellationToken: lockLost);
    }
}

static async Task Fencing(string address)
{
    // README: fencing
    await using var connection = await RuvioConnection.ConnectAsync(address);
    var db = connection.GetDatabase();

    long first = (await db.LeaseAsync("job:fenced", 30_000))!.Value;
    await db.ReleaseAsync("job:fenced", first);
    long second = (await db.LeaseAsync("job:fenced", 30_000))!.Value;

    long written = await db.IfGtAsync("report:fenced", second, "from the current holder");   // 1
    long stale = await db.IfGtAsync("report:fenced", first, "from a paused old holder");      // 0: refused
    Console.WriteLine($"current holder wrote: {written}, stale holder wrote: {stale}");
    await db.ReleaseAsync("job:fenced", second);
    // README: end
    if (written != 1 || stale != 0) throw new Exception("fencing did not behave as documented");
}

static async Task Semaphore(string address)
{
    // README: semaphore
    await using var connection = await RuvioConnection.ConnectAsync(address);
    var db = connection.GetDatabase();

    var options = new RuvioLockOptions { SemaphoreLimit = 8, Wait = TimeSpan.FromSeconds(2) };
    await using var slot = await db.TryAcquireLockAsync("upstream:billing", TimeSpan.FromSeconds(15), options);
    if (slot is not null)
    {
        RuvioLockInfo? info = await db.LockInfoAsync("upstream:billing");
        Console.WriteLine($"{info!.Holders.Count} of {info.Limit} slots taken; mine has token {slot.Token}");
    }
    // README: end
}

static async Task Execute(string address)
{
    // README: execute
    await using var connection = await RuvioConnection.ConnectAsync(address);
    var db = connection.GetDatabase();

    await db.ExecuteAsync("SET", "greeting", "hello");
    RuvioResult reply = await db.ExecuteAsync("GET", "greeting");
    Console.WriteLine(reply.AsString()); // hello

    try
    {
        await db.ExecuteAsync("LEASE", "greeting", 1000);
    }
    catch (RuvioServerException e) when (e.Code == "WRONGTYPE")
    {
        Console.WriteLine($"refused: {e.Message}");
    }
    // README: end
}
