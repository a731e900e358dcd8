using System.Buffers;
using System.Buffers.Text;
using System.Globalization;
using System.Text;

namespace Ruvio;

/// <summary>
/// The RESP2/RESP3 decoder. Everything read from the network is bounded before it is allocated or recursed into:
/// bulk lengths, line lengths, aggregate counts and nesting depth have limits, and a value is materialised only once
/// all of its bytes are in the buffer (an incomplete value allocates nothing that depends on the announced sizes).
/// </summary>
internal static class RespParser
{
    /// <summary>Largest bulk string accepted (Redis's default <c>proto-max-bulk-len</c>).</summary>
    public const int MaxBulkLength = 512 * 1024 * 1024;
    /// <summary>Longest simple-string / error / number line.</summary>
    public const int MaxLineLength = 64 * 1024;
    /// <summary>Most elements in one aggregate.</summary>
    public const int MaxAggregateCount = 16 * 1024 * 1024;
    /// <summary>Deepest nesting of aggregates.</summary>
    public const int MaxDepth = 64;

    /// <summary>
    /// Decodes one value from the start of <paramref name="buffer"/>. Returns false when more bytes are needed;
    /// throws <see cref="RuvioProtocolException"/> on malformed input.
    /// </summary>
    public static bool TryParse(ReadOnlySpan<byte> buffer, out RuvioResult value, out int consumed)
    {
        var pos = 0;
        // First a cheap scan that checks completeness without allocating, then the real parse.
        if (!Scan(buffer, ref pos, 0))
        {
            value = RuvioResult.Nil;
            consumed = 0;
            return false;
        }
        consumed = pos;
        pos = 0;
        value = Build(buffer, ref pos);
        return true;
    }

    private static bool TryLine(ReadOnlySpan<byte> buf, int start, out ReadOnlySpan<byte> line, out int next)
    {
        var rest = buf[start..];
        var limit = Math.Min(rest.Length, MaxLineLength + 1);
        var idx = rest[..limit].IndexOf((byte)'\r');
        if (idx >= 0 && idx + 1 < rest.Length && rest[idx + 1] != (byte)'\n')
        {
            // A lone CR inside a line is not allowed by RESP.
            throw new RuvioProtocolException("protocol error: CR without LF in a line");
        }
        if (idx < 0)
        {
            if (rest.Length > MaxLineLength) throw new RuvioProtocolException($"protocol error: a line longer than {MaxLineLength} bytes");
            line = default;
            next = 0;
            return false;
        }
        if (idx + 1 >= rest.Length)
        {
            line = default;
            next = 0;
            return false;
        }
        line = rest[..idx];
        next = start + idx + 2;
        return true;
    }

    private static long ParseInteger(ReadOnlySpan<byte> s, string what)
    {
        if (s.IsEmpty || s[0] == (byte)'+' || !Utf8Parser.TryParse(s, out long n, out var used) || used != s.Length)
            throw new RuvioProtocolException($"protocol error: invalid {what} '{Encoding.ASCII.GetString(s)}'");
        return n;
    }

    private static int ParseLength(ReadOnlySpan<byte> s, string what, int max)
    {
        var n = ParseInteger(s, what);
        if (n < -1 || n > max) throw new RuvioProtocolException($"protocol error: {what} {n} out of range (at most {max})");
        return (int)n;
    }

    private static void CheckDouble(ReadOnlySpan<byte> s)
    {
        if (s.SequenceEqual("inf"u8) || s.SequenceEqual("-inf"u8) || s.SequenceEqual("+inf"u8) || s.SequenceEqual("nan"u8)) return;
        foreach (var b in s)
        {
            if (!(b is (byte)'-' or (byte)'+' or (byte)'.' or (byte)'e' or (byte)'E' || (b >= (byte)'0' && b <= (byte)'9')))
                throw new RuvioProtocolException($"protocol error: invalid double '{Encoding.ASCII.GetString(s)}'");
        }
        if (!double.TryParse(Encoding.ASCII.GetString(s), NumberStyles.Float, CultureInfo.InvariantCulture, out _))
            throw new RuvioProtocolException($"protocol error: invalid double '{Encoding.ASCII.GetString(s)}'");
    }

    private static void CheckBigNumber(ReadOnlySpan<byte> s)
    {
        var digits = s.Length > 0 && s[0] == (byte)'-' ? s[1..] : s;
        if (digits.IsEmpty) throw new RuvioProtocolException("protocol error: empty big number");
        foreach (var b in digits)
            if (b < (byte)'0' || b > (byte)'9') throw new RuvioProtocolException($"protocol error: invalid big number '{Encoding.ASCII.GetString(s)}'");
    }

    // Completeness and validity check; allocates nothing.
    private static bool Scan(ReadOnlySpan<byte> buf, ref int pos, int depth)
    {
        if (depth > MaxDepth) throw new RuvioProtocolException($"protocol error: aggregates nested deeper than {MaxDepth}");
        if (pos >= buf.Length) return false;
        var type = buf[pos];
        if (!TryLine(buf, pos + 1, out var line, out var next)) return false;
        switch (type)
        {
            case (byte)'+':
            case (byte)'-':
                pos = next;
                return true;
            case (byte)':':
                ParseInteger(line, "integer");
                pos = next;
                return true;
            case (byte)'_':
                if (!line.IsEmpty) throw new RuvioProtocolException("protocol error: invalid null");
                pos = next;
                return true;
            case (byte)'#':
                if (line.Length != 1 || (line[0] != (byte)'t' && line[0] != (byte)'f'))
                    throw new RuvioProtocolException($"protocol error: invalid boolean '{Encoding.ASCII.GetString(line)}'");
                pos = next;
                return true;
            case (byte)',':
                CheckDouble(line);
                pos = next;
                return true;
            case (byte)'(':
                CheckBigNumber(line);
                pos = next;
                return true;
            case (byte)'$':
            case (byte)'!':
            case (byte)'=':
            {
                var len = ParseLength(line, "bulk length", MaxBulkLength);
                if (len == -1)
                {
                    if (type != (byte)'$') throw new RuvioProtocolException("protocol error: negative length");
                    pos = next;
                    return true;
                }
                if (buf.Length - next < (long)len + 2) return false;
                if (buf[next + len] != (byte)'\r' || buf[next + len + 1] != (byte)'\n')
                    throw new RuvioProtocolException("protocol error: bulk string not terminated by CRLF");
                if (type == (byte)'=' && (len < 4 || buf[next + 3] != (byte)':'))
                    throw new RuvioProtocolException("protocol error: verbatim string without a format");
                pos = next + len + 2;
                return true;
            }
            case (byte)'*':
            case (byte)'~':
            case (byte)'>':
            case (byte)'%':
            case (byte)'|':
            {
                var count = ParseLength(line, "aggregate length", MaxAggregateCount);
                if (count == -1)
                {
                    if (type != (byte)'*') throw new RuvioProtocolException("protocol error: negative length");
                    pos = next;
                    return true;
                }
                long elements = type is (byte)'%' or (byte)'|' ? 2L * count : count;
                pos = next;
                for (long i = 0; i < elements; i++)
                    if (!Scan(buf, ref pos, depth + 1)) return false;
                // An attribute (|) annotates the value that follows it; that value is part of this frame.
                if (type == (byte)'|') return Scan(buf, ref pos, depth + 1);
                return true;
            }
            default:
                throw new RuvioProtocolException($"protocol error: unknown type byte 0x{type:x2}");
        }
    }

    // Runs only over bytes Scan accepted.
    private static RuvioResult Build(ReadOnlySpan<byte> buf, ref int pos)
    {
        var type = buf[pos];
        TryLine(buf, pos + 1, out var line, out var next);
        pos = next;
        switch (type)
        {
            case (byte)'+':
                return line.Length == 2 && line[0] == (byte)'O' && line[1] == (byte)'K' ? Ok : RuvioResult.Text(RuvioResultType.SimpleString, line.ToArray());
            case (byte)'-':
                return RuvioResult.Text(RuvioResultType.Error, line.ToArray());
            case (byte)':':
            {
                var n = ParseInteger(line, "integer");
                return n is >= 0 and < SmallIntegers ? Small[n] : RuvioResult.Integer(n);
            }
            case (byte)'_':
                return RuvioResult.Nil;
            case (byte)'#':
                return line[0] == (byte)'t' ? RuvioResult.True : RuvioResult.False;
            case (byte)',':
                return RuvioResult.Text(RuvioResultType.Double, line.ToArray());
            case (byte)'(':
                return RuvioResult.Text(RuvioResultType.BigNumber, line.ToArray());
            case (byte)'$':
            case (byte)'!':
            case (byte)'=':
            {
                var len = ParseLength(line, "bulk length", MaxBulkLength);
                if (len == -1) return RuvioResult.Nil;
                var body = buf.Slice(next, len);
                pos = next + len + 2;
                return type switch
                {
                    (byte)'$' => RuvioResult.Text(RuvioResultType.BulkString, body.ToArray()),
                    (byte)'!' => RuvioResult.Text(RuvioResultType.Error, body.ToArray()),
                    _ => RuvioResult.Text(RuvioResultType.VerbatimString, body[4..].ToArray(), Encoding.ASCII.GetString(body[..3])),
                };
            }
            default: // aggregates
            {
                var count = ParseLength(line, "aggregate length", MaxAggregateCount);
                if (count == -1) return RuvioResult.Nil;
                // Safe to allocate: Scan proved every element is present, so count is bounded by the buffer's size.
                var items = new RuvioResult[type is (byte)'%' or (byte)'|' ? 2 * count : count];
                for (var i = 0; i < items.Length; i++) items[i] = Build(buf, ref pos);
                return type switch
                {
                    (byte)'*' => RuvioResult.Aggregate(RuvioResultType.Array, items),
                    (byte)'~' => RuvioResult.Aggregate(RuvioResultType.Set, items),
                    (byte)'>' => RuvioResult.Aggregate(RuvioResultType.Push, items),
                    (byte)'%' => RuvioResult.Aggregate(RuvioResultType.Map, items),
                    _ => Build(buf, ref pos), // attribute: dropped, the annotated value is the reply
                };
            }
        }
    }

    private const int SmallIntegers = 16;
    private static readonly RuvioResult[] Small = Enumerable.Range(0, SmallIntegers).Select(i => RuvioResult.Integer(i)).ToArray();
    private static readonly RuvioResult Ok = RuvioResult.Text(RuvioResultType.SimpleString, "OK"u8.ToArray());
}

/// <summary>The RESP command encoder: an array of bulk strings.</summary>
internal static class RespWriter
{
    /// <summary>Appends one command to <paramref name="w"/>.</summary>
    public static void WriteCommand(IBufferWriter<byte> w, string command, ReadOnlySpan<object?> args)
    {
        WriteHeader(w, (byte)'*', args.Length + 1);
        WriteBulk(w, command);
        foreach (var a in args) WriteArg(w, a);
    }

    /// <summary>Appends one command given as a full argument array (name first).</summary>
    public static void WriteCommand(IBufferWriter<byte> w, ReadOnlySpan<object?> args)
    {
        WriteHeader(w, (byte)'*', args.Length);
        foreach (var a in args) WriteArg(w, a);
    }

    private static void WriteArg(IBufferWriter<byte> w, object? a)
    {
        switch (a)
        {
            case string s: WriteBulk(w, s); break;
            case byte[] b: WriteBulk(w, b); break;
            case ReadOnlyMemory<byte> m: WriteBulk(w, m.Span); break;
            case long l: WriteBulkInteger(w, l); break;
            case int i: WriteBulkInteger(w, i); break;
            case ulong u: WriteBulk(w, u.ToString(CultureInfo.InvariantCulture)); break;
            case double d: WriteBulk(w, FormatDouble(d)); break;
            case bool flag: WriteBulkInteger(w, flag ? 1 : 0); break;
            case null: throw new ArgumentNullException(nameof(a), "a command argument is null");
            case IFormattable f: WriteBulk(w, f.ToString(null, CultureInfo.InvariantCulture)); break;
            default: WriteBulk(w, a.ToString() ?? ""); break;
        }
    }

    internal static string FormatDouble(double d) =>
        double.IsPositiveInfinity(d) ? "+inf" : double.IsNegativeInfinity(d) ? "-inf" : d.ToString("R", CultureInfo.InvariantCulture);

    private static void WriteHeader(IBufferWriter<byte> w, byte type, long n)
    {
        var span = w.GetSpan(24);
        span[0] = type;
        Utf8Formatter.TryFormat(n, span[1..], out var len);
        span[1 + len] = (byte)'\r';
        span[2 + len] = (byte)'\n';
        w.Advance(3 + len);
    }

    private static void WriteBulkInteger(IBufferWriter<byte> w, long n)
    {
        Span<byte> digits = stackalloc byte[20];
        Utf8Formatter.TryFormat(n, digits, out var len);
        WriteBulk(w, digits[..len]);
    }

    private static void WriteBulk(IBufferWriter<byte> w, string s)
    {
        var len = Encoding.UTF8.GetByteCount(s);
        WriteHeader(w, (byte)'$', len);
        var span = w.GetSpan(len + 2);
        Encoding.UTF8.GetBytes(s, span);
        span[len] = (byte)'\r';
        span[len + 1] = (byte)'\n';
        w.Advance(len + 2);
    }

    private static void WriteBulk(IBufferWriter<byte> w, ReadOnlySpan<byte> b)
    {
        WriteHeader(w, (byte)'$', b.Length);
        var span = w.GetSpan(b.Length + 2);
        b.CopyTo(span);
        span[b.Length] = (byte)'\r';
        span[b.Length + 1] = (byte)'\n';
        w.Advance(b.Length + 2);
    }
}
