using System.Globalization;
using System.Text;

namespace Ruvio;

/// <summary>The RESP2/RESP3 type of a <see cref="RuvioResult"/>.</summary>
public enum RuvioResultType
{
    /// <summary>Nil: RESP2 <c>$-1</c> or <c>*-1</c>, RESP3 <c>_</c>.</summary>
    Nil,
    /// <summary>A simple string (<c>+OK</c>).</summary>
    SimpleString,
    /// <summary>An error reply (<c>-ERR ...</c> or a RESP3 blob error <c>!</c>), as an element of an aggregate.</summary>
    Error,
    /// <summary>A 64-bit integer (<c>:42</c>).</summary>
    Integer,
    /// <summary>A bulk (binary-safe) string (<c>$3 foo</c>).</summary>
    BulkString,
    /// <summary>An array (<c>*n</c>).</summary>
    Array,
    /// <summary>A RESP3 map (<c>%n</c>).</summary>
    Map,
    /// <summary>A RESP3 set (<c>~n</c>).</summary>
    Set,
    /// <summary>A RESP3 double (<c>,1.5</c>, <c>,inf</c>, <c>,nan</c>).</summary>
    Double,
    /// <summary>A RESP3 boolean (<c>#t</c>).</summary>
    Boolean,
    /// <summary>A RESP3 verbatim string (<c>=15 txt:Some string</c>).</summary>
    VerbatimString,
    /// <summary>A RESP3 big number (<c>(3492890328409238509324850943850943825024385</c>).</summary>
    BigNumber,
    /// <summary>A RESP3 push message (<c>&gt;n</c>).</summary>
    Push,
}

/// <summary>
/// A decoded reply of any RESP2/RESP3 type, as returned by <see cref="RuvioDatabase.ExecuteAsync(string, object[])"/>.
/// Immutable. Nil is a value of type <see cref="RuvioResultType.Nil"/> (never a null reference).
/// </summary>
public sealed class RuvioResult
{
    private static readonly RuvioResult[] NoItems = [];
    private readonly long _integer;
    private readonly byte[]? _bytes;       // bulk, simple, error, verbatim (text part), double/bignumber text
    private readonly RuvioResult[]? _items; // array, set, push; map: key, value, key, value ...
    private readonly string? _format;      // verbatim format

    /// <summary>The nil value.</summary>
    public static RuvioResult Nil { get; } = new(RuvioResultType.Nil, 0, null, null, null);
    internal static RuvioResult True { get; } = new(RuvioResultType.Boolean, 1, null, null, null);
    internal static RuvioResult False { get; } = new(RuvioResultType.Boolean, 0, null, null, null);

    private RuvioResult(RuvioResultType type, long integer, byte[]? bytes, RuvioResult[]? items, string? format)
    {
        Type = type;
        _integer = integer;
        _bytes = bytes;
        _items = items;
        _format = format;
    }

    internal static RuvioResult Integer(long value) => new(RuvioResultType.Integer, value, null, null, null);
    internal static RuvioResult Text(RuvioResultType type, byte[] bytes, string? format = null) => new(type, 0, bytes, null, format);
    internal static RuvioResult Aggregate(RuvioResultType type, RuvioResult[] items) => new(type, 0, null, items, null);

    /// <summary>The RESP type.</summary>
    public RuvioResultType Type { get; }

    /// <summary>True for nil.</summary>
    public bool IsNull => Type == RuvioResultType.Nil;

    /// <summary>True for an error reply (possible only as an element of an aggregate, e.g. in an EXEC reply).</summary>
    public bool IsError => Type == RuvioResultType.Error;

    /// <summary>For an error: its first word (<c>ERR</c>, <c>WRONGTYPE</c>, ...); otherwise null.</summary>
    public string? ErrorCode => IsError ? RuvioServerException.CodeOf(AsString()!) : null;

    /// <summary>For a verbatim string: its three-letter format (<c>txt</c>, <c>mkd</c>); otherwise null.</summary>
    public string? VerbatimFormat => _format;

    /// <summary>The integer value. Bulk and simple strings holding a decimal integer are converted.</summary>
    /// <exception cref="InvalidCastException">The value is not an integer.</exception>
    public long AsInt64()
    {
        switch (Type)
        {
            case RuvioResultType.Integer:
            case RuvioResultType.Boolean:
                return _integer;
            case RuvioResultType.BulkString:
            case RuvioResultType.SimpleString:
            case RuvioResultType.BigNumber:
                if (long.TryParse(_bytes, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out var n)) return n;
                break;
        }
        throw new InvalidCastException($"a {Type} reply is not an integer");
    }

    /// <summary>The integer value, or null for nil.</summary>
    public long? AsNullableInt64() => IsNull ? null : AsInt64();

    /// <summary>The text of a string-like value (bulk, simple, verbatim, error, double, big number), UTF-8 decoded; null for nil.</summary>
    public string? AsString() => Type switch
    {
        RuvioResultType.Nil => null,
        RuvioResultType.Integer => _integer.ToString(CultureInfo.InvariantCulture),
        RuvioResultType.Boolean => _integer != 0 ? "true" : "false",
        _ when _bytes is not null => Encoding.UTF8.GetString(_bytes),
        _ => throw new InvalidCastException($"a {Type} reply is not a string"),
    };

    /// <summary>The raw bytes of a string-like value; null for nil.</summary>
    public byte[]? AsBytes() => IsNull ? null : _bytes ?? throw new InvalidCastException($"a {Type} reply is not a string");

    /// <summary>The value of a double (also of an integer or a numeric string).</summary>
    public double AsDouble()
    {
        if (Type == RuvioResultType.Integer) return _integer;
        if (_bytes is not null)
        {
            var s = Encoding.ASCII.GetString(_bytes);
            switch (s)
            {
                case "inf" or "+inf": return double.PositiveInfinity;
                case "-inf": return double.NegativeInfinity;
                case "nan": return double.NaN;
            }
            if (double.TryParse(s, NumberStyles.Float, CultureInfo.InvariantCulture, out var d)) return d;
        }
        throw new InvalidCastException($"a {Type} reply is not a number");
    }

    /// <summary>The value of a boolean (also of the integers 0 and 1).</summary>
    public bool AsBoolean() => Type switch
    {
        RuvioResultType.Boolean => _integer != 0,
        RuvioResultType.Integer when _integer is 0 or 1 => _integer != 0,
        _ => throw new InvalidCastException($"a {Type} reply is not a boolean"),
    };

    /// <summary>
    /// The elements of an array, set or push message; for a map, keys and values alternating (as RESP2 sends maps).
    /// Empty for nil.
    /// </summary>
    public IReadOnlyList<RuvioResult> Items => _items ?? (IsNull ? NoItems : throw new InvalidCastException($"a {Type} reply is not an aggregate"));

    /// <summary>The entries of a map in wire order. An array with an even number of elements (a RESP2 map) is read as one too.</summary>
    public IReadOnlyList<KeyValuePair<RuvioResult, RuvioResult>> Entries
    {
        get
        {
            if (Type is not (RuvioResultType.Map or RuvioResultType.Array) || _items is null || _items.Length % 2 != 0)
                throw new InvalidCastException($"a {Type} reply is not a map");
            var list = new KeyValuePair<RuvioResult, RuvioResult>[_items.Length / 2];
            for (var i = 0; i < list.Length; i++) list[i] = new(_items[2 * i], _items[2 * i + 1]);
            return list;
        }
    }

    /// <summary>A readable rendering (for logs and debugging).</summary>
    public override string ToString() => Type switch
    {
        RuvioResultType.Nil => "(nil)",
        RuvioResultType.Integer => $"(integer) {_integer}",
        RuvioResultType.Error => $"(error) {AsString()}",
        RuvioResultType.Boolean => _integer != 0 ? "(true)" : "(false)",
        RuvioResultType.Map => "{" + string.Join(", ", Entries.Select(e => $"{e.Key}: {e.Value}")) + "}",
        RuvioResultType.Array or RuvioResultType.Set or RuvioResultType.Push => "[" + string.Join(", ", Items) + "]",
        RuvioResultType.VerbatimString => $"{_format}:{AsString()}",
        _ => AsString() ?? "",
    };
}
