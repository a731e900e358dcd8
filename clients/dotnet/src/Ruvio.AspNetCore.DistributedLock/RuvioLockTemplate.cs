using System.Globalization;
using System.Text;
using Microsoft.AspNetCore.Routing;

namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// A parsed lock name template: literal text and <c>{parameter}</c> parts (<c>{{</c> and <c>}}</c> stand for a
/// literal brace). Parsed once per endpoint at start-up, so a request only concatenates.
/// </summary>
internal sealed class RuvioLockTemplate
{
    private readonly (string Text, bool IsParameter)[] _parts;

    private RuvioLockTemplate(string template, (string, bool)[] parts)
    {
        Template = template;
        _parts = parts;
    }

    public string Template { get; }

    public IEnumerable<string> Parameters => _parts.Where(p => p.IsParameter).Select(p => p.Text);

    /// <summary>Parses <paramref name="template"/>; a malformed one throws <see cref="FormatException"/> saying where.</summary>
    public static RuvioLockTemplate Parse(string template)
    {
        var parts = new List<(string, bool)>();
        var literal = new StringBuilder();
        for (var i = 0; i < template.Length; i++)
        {
            var c = template[i];
            if (c == '{' && i + 1 < template.Length && template[i + 1] == '{') { literal.Append('{'); i++; continue; }
            if (c == '}' && i + 1 < template.Length && template[i + 1] == '}') { literal.Append('}'); i++; continue; }
            if (c == '}') throw new FormatException($"lock template \"{template}\": '}}' at {i} closes nothing (write '}}}}' for a literal brace)");
            if (c != '{') { literal.Append(c); continue; }
            var end = template.IndexOf('}', i + 1);
            if (end < 0) throw new FormatException($"lock template \"{template}\": '{{' at {i} is never closed");
            var name = template.Substring(i + 1, end - i - 1);
            if (name.Length == 0 || name.AsSpan().IndexOfAny("{/?*=: ") >= 0)
                throw new FormatException($"lock template \"{template}\": \"{{{name}}}\" is not a route parameter name");
            if (literal.Length > 0) { parts.Add((literal.ToString(), false)); literal.Clear(); }
            parts.Add((name, true));
            i = end;
        }
        if (literal.Length > 0) parts.Add((literal.ToString(), false));
        return new RuvioLockTemplate(template, parts.ToArray());
    }

    /// <summary>The lock name for a request: each parameter replaced by its route value (invariant culture; missing: empty).</summary>
    public string Format(RouteValueDictionary values)
    {
        if (_parts.Length == 1 && !_parts[0].IsParameter) return _parts[0].Text;
        var sb = new StringBuilder();
        foreach (var (text, isParameter) in _parts)
        {
            if (!isParameter) { sb.Append(text); continue; }
            if (values.TryGetValue(text, out var value) && value is not null)
                sb.Append(Convert.ToString(value, CultureInfo.InvariantCulture));
        }
        return sb.ToString();
    }
}
