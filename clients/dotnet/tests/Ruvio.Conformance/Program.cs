// The .NET conformance runner: every case of conformance/wire, scenarios and guard (files sorted, cases in file
// order), one JSON line per case (scenario cases once per protocol) to $CONFORMANCE_RESULTS.
// Wire vectors go through the client's decoder (RespParser, which every connection reads replies with) and its
// command encoder (RespWriter, which every connection writes with); scenario steps through RuvioDatabase's typed
// methods or ExecuteAsync; guard cases through TryAcquireLockAsync and IRuvioLock.
using System.Buffers;
using System.Collections.Concurrent;
using System.Diagnostics;
using System.Globalization;
using System.Text;
using System.Text.Json;
using System.Text.Json.Nodes;
using Ruvio;
using Ruvio.Testing;

var dir = Env("CONFORMANCE_DIR");
var addr = Env("RUVIO_ADDR");
var resultsPath = Env("CONFORMANCE_RESULTS");
Env("RUVIO_BIN");
var runId = Convert.ToHexString(Guid.NewGuid().ToByteArray())[..12].ToLowerInvariant();
var results = new ConcurrentQueue<string>();

void Report(string id, string? failure) =>
    results.Enqueue(JsonSerializer.Serialize(new Dictionary<string, string>
    {
        ["case"] = id,
        ["result"] = failure is null ? "pass" : "fail",
        ["detail"] = failure ?? "",
    }));

IEnumerable<(string file, JsonObject doc)> Files(string sub) =>
    Directory.GetFiles(Path.Combine(dir, sub), "*.json").Order(StringComparer.Ordinal)
        .Select(f => (f, JsonNode.Parse(File.ReadAllText(f))!.AsObject()));

// ---- wire ----
foreach (var (_, doc) in Files("wire"))
{
    var format = (string)doc["format"]!;
    foreach (var c in doc["cases"]!.AsArray())
    {
        var id = (string)c!["id"]!;
        try
        {
            Report(id, format == "wire-decode" ? Wire.Decode(c.AsObject()) : Wire.Encode(c.AsObject()));
        }
        catch (Exception e)
        {
            Report(id, $"runner error: {e}");
        }
    }
}

// ---- scenarios (8 at a time) and guard cases (5 at a time) ----
var scenarioRuns = new List<Func<Task>>();
foreach (var (_, doc) in Files("scenarios"))
{
    foreach (var c in doc["cases"]!.AsArray())
    {
        var obj = c!.AsObject();
        var protocols = obj["protocols"]?.AsArray().Select(p => (string)p!).ToList() ?? ["2"];
        foreach (var p in protocols)
        {
            var id = $"{(string)obj["id"]!}@resp{p}";
            var prefix = $"cf:{runId}:dotnet:{id}:";
            scenarioRuns.Add(async () => Report(id, await new Scenario(obj, addr, null, p == "3" ? RuvioProtocol.Resp3 : RuvioProtocol.Resp2, prefix).RunAsync()));
        }
    }
}
var guardRuns = new List<Func<Task>>();
foreach (var (_, doc) in Files("guard"))
{
    foreach (var c in doc["cases"]!.AsArray())
    {
        var obj = c!.AsObject();
        var id = (string)obj["id"]!;
        var prefix = $"cf:{runId}:dotnet:{id}:";
        guardRuns.Add(async () =>
        {
            ServerProcess? own = null;
            try
            {
                if ((string?)obj["server"] == "own") own = ServerProcess.StartRuvio();
                Report(id, await new Scenario(obj, own?.Address ?? addr, own, RuvioProtocol.Resp2, prefix).RunAsync());
            }
            catch (Exception e)
            {
                Report(id, $"runner error: {e.Message}");
            }
            finally
            {
                own?.Dispose();
            }
        });
    }
}

async Task RunAll(List<Func<Task>> runs, int parallel)
{
    using var gate = new SemaphoreSlim(parallel);
    await Task.WhenAll(runs.Select(async r =>
    {
        await gate.WaitAsync();
        try { await r(); }
        finally { gate.Release(); }
    }));
}
await Task.WhenAll(RunAll(scenarioRuns, 8), RunAll(guardRuns, 5));

File.WriteAllLines(resultsPath, results);
var failed = results.Count(r => r.Contains("\"fail\""));
Console.Error.WriteLine($"dotnet conformance runner: {results.Count} cases, {failed} failed");
return 0;

static string Env(string name) => Environment.GetEnvironmentVariable(name) is { Length: > 0 } v ? v : throw new InvalidOperationException($"{name} is not set");

static class Wire
{
    public static string? Decode(JsonObject c)
    {
        var bytes = Convert.FromHexString((string)c["hex"]!);
        RuvioResult value;
        int used;
        try
        {
            if (!RespParser.TryParse(bytes, out value, out used))
                return c["incomplete"] is not null ? null : "the decoder asked for more bytes";
        }
        catch (RuvioProtocolException e)
        {
            return c["invalid"] is not null ? null : $"protocol error: {e.Message}";
        }
        if (c["incomplete"] is not null) return $"decoded {value} from an incomplete prefix";
        if (c["invalid"] is not null) return $"decoded {value} from invalid bytes";
        if (used != bytes.Length) return $"consumed {used} of {bytes.Length} bytes";
        return Model.Equal(value, c["expect"]!.AsObject());
    }

    public static string? Encode(JsonObject c)
    {
        var args = c["args"]!.AsArray().Select(a => a is JsonObject o ? (object?)Convert.FromHexString((string)o["hex"]!) : (string)a!).ToArray();
        var w = new ArrayBufferWriter<byte>();
        RespWriter.WriteCommand(w, args);
        var got = Convert.ToHexString(w.WrittenSpan).ToLowerInvariant();
        return got == (string)c["hex"]! ? null : $"encoded {got}";
    }
}

/// <summary>The value model of conformance/README.md section 1.</summary>
static class Model
{
    public static string? Equal(RuvioResult v, JsonObject e)
    {
        var type = (string)e["type"]!;
        string Bad() => $"got {Describe(v)}, expected {e.ToJsonString()}";
        switch (type)
        {
            case "nil": return v.IsNull ? null : Bad();
            case "simple": return v.Type == RuvioResultType.SimpleString && v.AsString() == (string)e["value"]! ? null : Bad();
            case "error":
                return v.Type == RuvioResultType.Error && v.AsString() == (string)e["text"]! && (e["code"] is null || v.ErrorCode == (string)e["code"]!) ? null : Bad();
            case "integer": return v.Type == RuvioResultType.Integer && v.AsInt64().ToString(CultureInfo.InvariantCulture) == (string)e["value"]! ? null : Bad();
            case "bulk":
                if (v.Type != RuvioResultType.BulkString) return Bad();
                if (e["hex"] is not null) return Convert.ToHexString(v.AsBytes()!).ToLowerInvariant() == (string)e["hex"]! ? null : Bad();
                return v.AsBytes()!.AsSpan().SequenceEqual(Encoding.UTF8.GetBytes((string)e["value"]!)) ? null : Bad();
            case "double":
            {
                if (v.Type != RuvioResultType.Double) return Bad();
                var want = (string)e["value"]!;
                var got = v.AsDouble();
                var w = want switch { "inf" => double.PositiveInfinity, "-inf" => double.NegativeInfinity, "nan" => double.NaN, _ => double.Parse(want, CultureInfo.InvariantCulture) };
                return (double.IsNaN(w) ? double.IsNaN(got) : got == w) ? null : Bad();
            }
            case "boolean": return v.Type == RuvioResultType.Boolean && v.AsBoolean() == (bool)e["value"]! ? null : Bad();
            case "verbatim": return v.Type == RuvioResultType.VerbatimString && v.VerbatimFormat == (string)e["format"]! && v.AsString() == (string)e["value"]! ? null : Bad();
            case "bignumber": return v.Type == RuvioResultType.BigNumber && v.AsString() == (string)e["value"]! ? null : Bad();
            case "array" or "set" or "push":
            {
                var t = type switch { "array" => RuvioResultType.Array, "set" => RuvioResultType.Set, _ => RuvioResultType.Push };
                if (v.Type != t) return Bad();
                var items = e["items"]!.AsArray();
                if (items.Count != v.Items.Count) return Bad();
                for (var i = 0; i < items.Count; i++)
                    if (Equal(v.Items[i], items[i]!.AsObject()) is string f) return $"item {i}: {f}";
                return null;
            }
            case "map":
            {
                if (v.Type != RuvioResultType.Map) return Bad();
                var entries = e["entries"]!.AsArray();
                var got = v.Entries;
                if (entries.Count != got.Count) return Bad();
                for (var i = 0; i < entries.Count; i++)
                {
                    var pair = entries[i]!.AsArray();
                    if (Equal(got[i].Key, pair[0]!.AsObject()) is string f) return $"key {i}: {f}";
                    if (Equal(got[i].Value, pair[1]!.AsObject()) is string g) return $"value {i}: {g}";
                }
                return null;
            }
            default: return $"unknown model type {type}";
        }
    }

    public static string Describe(RuvioResult v) => $"{v.Type} {v}";
}

/// <summary>What a step produced: a reply, a typed lock info, an error text, or a dropped connection.</summary>
sealed record Outcome(RuvioResult? Reply, RuvioLockInfo? Info, bool InfoNil, string? Error, bool Dropped)
{
    public override string ToString() =>
        Dropped ? "dropped connection" : Error is not null ? $"error '{Error}'" : Info is not null ? $"lockinfo {Info}" : InfoNil ? "nil" : Model.Describe(Reply!);
}

sealed class Scenario(JsonObject c, string addr, ServerProcess? own, RuvioProtocol protocol, string prefix)
{
    private readonly Dictionary<string, RuvioConnection> _conns = new();
    private readonly Dictionary<string, string> _saved = new();
    private readonly Dictionary<string, (Task<Outcome> task, long sentAt)> _async = new();
    private readonly Dictionary<string, (IRuvioLock l, long sent, long ttlMs)> _guards = new();
    private readonly ConcurrentDictionary<string, long> _lostAt = new();

    public async Task<string?> RunAsync()
    {
        var steps = c["steps"]!.AsArray();
        try
        {
            for (var i = 0; i < steps.Count; i++)
            {
                string? failure;
                try
                {
                    failure = await StepAsync(steps[i]!.AsObject());
                }
                catch (Exception e)
                {
                    failure = $"{e.GetType().Name}: {e.Message}";
                }
                if (failure is not null) return $"step {i} ({steps[i]!["do"]}): {failure}";
            }
            return null;
        }
        finally
        {
            foreach (var g in _guards.Values) { try { await g.l.ReleaseAsync(); } catch { } }
            own?.SigCont();
            foreach (var conn in _conns.Values) await conn.DisposeAsync();
        }
    }

    private string Sub(string s)
    {
        s = s.Replace("{p}", prefix);
        while (s.IndexOf("{tok:", StringComparison.Ordinal) is var at and >= 0)
        {
            var end = s.IndexOf('}', at);
            var name = s[(at + 5)..end];
            s = s[..at] + _saved[name] + s[(end + 1)..];
        }
        return s;
    }

    private async Task<RuvioConnection> Conn(string name)
    {
        if (_conns.TryGetValue(name, out var conn)) return conn;
        var o = RuvioOptions.Parse(addr);
        o.Protocol = protocol;
        o.AsyncTimeout = TimeSpan.FromSeconds(60);
        conn = await RuvioConnection.ConnectAsync(o);
        _conns[name] = conn;
        return conn;
    }

    private async Task<string?> StepAsync(JsonObject s)
    {
        switch ((string)s["do"]!)
        {
            case "sleep":
            {
                var sw = Stopwatch.StartNew();
                var ms = long.Parse((string)s["ms"]!);
                while (sw.ElapsedMilliseconds < ms) await Task.Delay(TimeSpan.FromMilliseconds(Math.Max(1, ms - sw.ElapsedMilliseconds)));
                return null;
            }
            case "close":
            {
                var name = (string)s["conn"]!;
                if (_conns.Remove(name, out var conn)) await conn.DisposeAsync();
                return null;
            }
            case "command":
            {
                var connName = (string?)s["conn"] ?? "a";
                var args = s["args"]!.AsArray().Select(a => Sub((string)a!)).ToArray();
                var typed = (bool?)s["typed"] ?? false;
                if (s["async"] is JsonNode asyncId)
                {
                    var conn = await Conn(connName);
                    _async[(string)asyncId!] = (Issue(conn, args, typed), Stopwatch.GetTimestamp());
                    return null;
                }
                var expect = s["expect"]!.AsObject();
                var untilMs = s["until_ms"] is JsonNode u ? long.Parse((string)u!) : (long?)null;
                var sw = Stopwatch.StartNew();
                while (true)
                {
                    var outcome = await Issue(await Conn(connName), args, typed);
                    var failure = Match(outcome, expect);
                    if (failure is null)
                    {
                        Save(s, outcome);
                        return null;
                    }
                    if (untilMs is null || sw.ElapsedMilliseconds > untilMs) return failure;
                    await Task.Delay(20);
                }
            }
            case "await":
            {
                var (task, sentAt) = _async[(string)s["id"]!];
                var outcome = await task.WaitAsync(TimeSpan.FromSeconds(30));
                var arrived = Stopwatch.GetElapsedTime(sentAt);
                if (s["min_elapsed_ms"] is JsonNode min && arrived.TotalMilliseconds < long.Parse((string)min!))
                    return $"the reply came after {arrived.TotalMilliseconds:0} ms, before {min} ms";
                var failure = Match(outcome, s["expect"]!.AsObject());
                if (failure is null) Save(s, outcome);
                // A dropped connection: the client reconnects by itself; the case does not use that connection again.
                return failure;
            }
            case "acquire":
            {
                var conn = await Conn("guard:" + (string)s["guard"]!);
                var ttl = long.Parse((string)s["ttl_ms"]!);
                var o = new RuvioLockOptions();
                if (s["max_hold_ms"] is JsonNode mh) o.MaxHold = TimeSpan.FromMilliseconds(long.Parse((string)mh!));
                var name = (string)s["guard"]!;
                var sent = Stopwatch.GetTimestamp();
                var l = await conn.GetDatabase().TryAcquireLockAsync(Sub((string)s["key"]!), TimeSpan.FromMilliseconds(ttl), o);
                if (l is null) return "the lock was not granted";
                l.LockLost.Register(() => _lostAt.TryAdd(name, Stopwatch.GetTimestamp()));
                _guards[name] = (l, sent, ttl);
                _saved[(string)s["save"]!] = l.Token.ToString(CultureInfo.InvariantCulture);
                return null;
            }
            case "expect_held":
            {
                var (l, _, _) = _guards[(string)s["guard"]!];
                return l.IsLost ? $"the guard reported a loss: {l.LostReason}" : null;
            }
            case "expect_lost":
            {
                var name = (string)s["guard"]!;
                var (l, sent, ttl) = _guards[name];
                var within = long.Parse((string)s["within_ms"]!);
                var sw = Stopwatch.StartNew();
                while (!_lostAt.ContainsKey(name) && sw.ElapsedMilliseconds < within) await Task.Delay(5);
                if (!_lostAt.TryGetValue(name, out var at)) return $"no loss signal within {within} ms";
                if (((bool?)s["before_deadline"] ?? false) && at >= sent + ttl * Stopwatch.Frequency / 1000)
                    return $"the loss signal came {Stopwatch.GetElapsedTime(sent, at).TotalMilliseconds:0} ms after the send, not before the {ttl} ms deadline";
                return null;
            }
            case "release":
            {
                var (l, _, _) = _guards[(string)s["guard"]!];
                var released = await l.ReleaseAsync();
                return Match(new Outcome(RuvioResult_Integer(released ? 1 : 0), null, false, null, false), s["expect"]!.AsObject());
            }
            case "sigstop":
                own!.SigStop();
                return null;
            case "sigcont":
                own!.SigCont();
                return null;
            default:
                return $"unknown step {s["do"]}";
        }
    }

    private static RuvioResult RuvioResult_Integer(long n)
    {
        RespParser.TryParse(Encoding.ASCII.GetBytes($":{n}\r\n"), out var v, out _);
        return v;
    }

    private void Save(JsonObject s, Outcome o)
    {
        if (s["save"] is JsonNode name && o.Reply is { Type: RuvioResultType.Integer } r)
            _saved[(string)name!] = r.AsInt64().ToString(CultureInfo.InvariantCulture);
    }

    private static async Task<Outcome> Issue(RuvioConnection conn, string[] a, bool typed)
    {
        var db = conn.GetDatabase();
        try
        {
            if (!typed)
                return new Outcome(await db.ExecuteAsync(a[0], a.Skip(1).Cast<object>().ToArray()), null, false, null, false);
            long L(int i) => long.Parse(a[i], CultureInfo.InvariantCulture);
            var hasWait = a.Length > 3 && a[^2].Equals("WAIT", StringComparison.OrdinalIgnoreCase);
            long? token;
            switch (a[0].ToUpperInvariant())
            {
                case "LEASE":
                    token = hasWait ? await db.LeaseAsync(a[1], L(2), L(4)) : await db.LeaseAsync(a[1], L(2));
                    return Token(token);
                case "SEMAPHORE":
                    token = hasWait ? await db.AcquireSemaphoreAsync(a[1], (int)L(2), L(3), L(5)) : await db.AcquireSemaphoreAsync(a[1], (int)L(2), L(3));
                    return Token(token);
                case "RENEW": return Token(await db.RenewAsync(a[1], L(2), L(3)));
                case "RELEASE": return Token(await db.ReleaseAsync(a[1], L(2)));
                case "IFGT":
                    return Token(a.Length > 4 ? await db.IfGtAsync(a[1], L(2), a[3], TimeSpan.FromMilliseconds(L(5))) : await db.IfGtAsync(a[1], L(2), a[3]));
                case "LOCKINFO":
                {
                    var info = await db.LockInfoAsync(a[1]);
                    return new Outcome(null, info, info is null, null, false);
                }
                default: throw new InvalidOperationException($"no typed method for {a[0]}");
            }
        }
        catch (RuvioServerException e)
        {
            return new Outcome(null, null, false, e.Message, false);
        }
        catch (RuvioConnectionException)
        {
            return new Outcome(null, null, false, null, true);
        }
    }

    private static Outcome Token(long? t) => new(t is long n ? RuvioResult_Integer(n) : RuvioResult.Nil, null, false, null, false);

    private long SavedLong(string name) => long.Parse(_saved[name], CultureInfo.InvariantCulture);

    private string? Match(Outcome o, JsonObject e)
    {
        var m = (string)e["match"]!;
        string Bad() => $"got {o}, expected {e.ToJsonString()}";
        if (m == "dropped") return o.Dropped ? null : Bad();
        if (o.Dropped) return Bad();
        if (m == "error") return o.Error == (string)e["text"]! ? null : Bad();
        if (o.Error is not null) return Bad();
        if (m == "nil") return o.InfoNil || o.Reply is { IsNull: true } ? null : Bad();
        if (m == "any") return null;
        if (m == "lockinfo")
        {
            if (o.Info is not null) return MatchInfo(o.Info, e) is string f ? $"{f}; {Bad()}" : null;
            if (o.Reply is null || o.Reply.IsNull) return Bad();
            return MatchRawInfo(o.Reply, e) is string g ? $"{g}; {Bad()}" : null;
        }
        var r = o.Reply;
        if (r is null) return Bad();
        switch (m)
        {
            case "int": return r.Type == RuvioResultType.Integer && r.AsInt64().ToString(CultureInfo.InvariantCulture) == (string)e["value"]! ? null : Bad();
            case "int_between":
                return r.Type == RuvioResultType.Integer && r.AsInt64() >= long.Parse((string)e["min"]!) && r.AsInt64() <= long.Parse((string)e["max"]!) ? null : Bad();
            case "token": return r.Type == RuvioResultType.Integer && r.AsInt64() > 0 ? null : Bad();
            case "token_gt": return r.Type == RuvioResultType.Integer && r.AsInt64() > SavedLong((string)e["than"]!) ? null : Bad();
            case "token_eq": return r.Type == RuvioResultType.Integer && r.AsInt64() == SavedLong((string)e["name"]!) ? null : Bad();
            case "simple": return r.Type == RuvioResultType.SimpleString && r.AsString() == (string)e["value"]! ? null : Bad();
            case "bulk": return r.Type == RuvioResultType.BulkString && r.AsString() == (string)e["value"]! ? null : Bad();
            case "value": return Model.Equal(r, e["value"]!.AsObject()) is string f ? $"{f}" : null;
            default: return $"unknown matcher {m}";
        }
    }

    private string? MatchInfo(RuvioLockInfo info, JsonObject e)
    {
        if (info.Kind != (string)e["kind"]!) return "kind";
        if (info.Limit != long.Parse((string)e["limit"]!)) return "limit";
        if (info.Waiters != long.Parse((string)e["waiters"]!)) return "waiters";
        var holders = e["holders"]!.AsArray();
        if (holders.Count != info.Holders.Count) return "holder count";
        for (var i = 0; i < holders.Count; i++)
        {
            var h = holders[i]!.AsObject();
            if (info.Holders[i].Token != SavedLong((string)h["token"]!)) return $"holder {i} token";
            var rem = info.Holders[i].RemainingMs;
            if (rem < long.Parse((string)h["remaining_ms_min"]!) || rem > long.Parse((string)h["remaining_ms_max"]!)) return $"holder {i} remaining_ms {rem}";
        }
        return null;
    }

    // The raw reply: a RESP3 map or a RESP2 flat array, exactly kind, limit, holders, waiters in that order.
    private string? MatchRawInfo(RuvioResult r, JsonObject e)
    {
        if (protocol == RuvioProtocol.Resp3 ? r.Type != RuvioResultType.Map : r.Type != RuvioResultType.Array) return $"a {r.Type}, not the protocol's map shape";
        var entries = r.Entries;
        if (string.Join(",", entries.Select(x => x.Key.AsString())) != "kind,limit,holders,waiters") return "fields";
        if (entries[0].Value.Type != RuvioResultType.BulkString || entries[1].Value.Type != RuvioResultType.Integer || entries[3].Value.Type != RuvioResultType.Integer) return "field types";
        foreach (var h in entries[2].Value.Items)
        {
            if (protocol == RuvioProtocol.Resp3 ? h.Type != RuvioResultType.Map : h.Type != RuvioResultType.Array) return "holder shape";
            if (string.Join(",", h.Entries.Select(x => x.Key.AsString())) != "token,remaining_ms") return "holder fields";
        }
        return MatchInfo(RuvioDatabase.ParseLockInfo(r), e);
    }
}
