// Built by test.sh in a fresh project that restores Ruvio.Client from a local folder feed (the package just packed).
// The two snippets are the product post's, with only the port changed (test.sh writes it as @PORT@ -> the server's);
// the checks around them confirm what the post's comments say.
using Ruvio;

await LeaseSnippet();
await using (var admin = await RuvioConnection.ConnectAsync("127.0.0.1", @PORT@))
{
    var db = await admin.GetDefaultDatabaseAsync();
    if (await db.LockInfoAsync("job:nightly-report") is not null) throw new Exception("the lease snippet did not release");
    long other = (await db.LeaseAsync("job:nightly-report", 30_000))!.Value;
    await LeaseSnippet(); // someone else holds it: the snippet gets null and releases nothing
    var info = await db.LockInfoAsync("job:nightly-report");
    if (info is null || info.Holders.Count != 1 || info.Holders[0].Token != other) throw new Exception("the snippet touched another holder's lock");
    await db.ReleaseAsync("job:nightly-report", other);
}
await SemaphoreSnippet();
Console.WriteLine("snippets ok");

static async Task LeaseSnippet()
{
await using var connection = await RuvioConnection.ConnectAsync("127.0.0.1", @PORT@);
var db = await connection.GetDefaultDatabaseAsync();

long? token = await db.LeaseAsync("job:nightly-report", 30_000);
// token -> you hold it
// null -> someone else holds it
if (token is long held)
{
    long released = await db.ReleaseAsync("job:nightly-report", held);
    // 1 -> released (0 if the token no longer matches)
    Console.WriteLine($"lease: token {held}, released {released}");
    if (released != 1) throw new Exception("release did not answer 1");
}
else Console.WriteLine("lease: null (someone else holds it)");
}

static async Task SemaphoreSnippet()
{
await using var connection = await RuvioConnection.ConnectAsync("127.0.0.1", @PORT@);
var db = await connection.GetDefaultDatabaseAsync();

long? token = await db.AcquireSemaphoreAsync("upstream:billing", 8, 15_000);
// 1700000000123 -> a slot, this is your token
// null          -> all 8 slots are taken
if (token is long held)
{
    await db.ReleaseAsync("upstream:billing", held);
}
Console.WriteLine($"semaphore: token {token}");
if (token is null) throw new Exception("no slot");
}
