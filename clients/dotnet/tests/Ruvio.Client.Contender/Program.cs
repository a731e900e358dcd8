// Usage: Ruvio.Client.Contender <host:port> <key> <iterations> <name>
// Each iteration: LEASE ... WAIT, then (holding it) INCR a shared "inside" counter that must read 1 (nobody else
// inside), IFGT the data key with the token (must answer 1: no higher token wrote before us), DECR, RELEASE.
// Prints one line per iteration: "<token> <ifgt> <inside>"; exits non-zero on a broken rule.
using Ruvio;

var (addr, key, iterations, name) = (args[0], args[1], int.Parse(args[2]), args[3]);
await using var c = await RuvioConnection.ConnectAsync(addr);
var db = await c.GetDefaultDatabaseAsync();
long last = 0;
for (var i = 0; i < iterations; i++)
{
    var token = await db.LeaseAsync(key, 10_000, 10_000);
    if (token is not long t) { Console.Error.WriteLine("no grant within 10 s"); return 2; }
    if (t <= last) { Console.Error.WriteLine($"token {t} not above {last}"); return 3; }
    last = t;
    var inside = (await db.ExecuteAsync("INCR", key + ":inside")).AsInt64();
    var written = await db.IfGtAsync(key + ":data", t, $"{name}:{i}");
    await db.ExecuteAsync("DECR", key + ":inside");
    Console.WriteLine($"{t} {written} {inside}");
    if (await db.ReleaseAsync(key, t) != 1) { Console.Error.WriteLine("release answered 0"); return 4; }
}
return 0;
