using System.Diagnostics;
using System.Text.RegularExpressions;
using Ruvio.Testing;

namespace Ruvio.Tests;

/// <summary>
/// Every C# block of clients/dotnet/README.md is compiled and run: each one is either one of the post's snippets
/// (run verbatim by SnippetTests) or a region of examples/Ruvio.Examples/Program.cs, which this test runs against
/// a real server.
/// </summary>
public sealed partial class ReadmeTests : IClassFixture<RuvioFixture>
{
    private readonly RuvioFixture _f;
    public ReadmeTests(RuvioFixture f) => _f = f;

    private static string Root => Path.GetFullPath(Path.Combine(AppContext.BaseDirectory, "..", "..", "..", "..", ".."));
    private static string Config => Path.GetFileName(Path.GetDirectoryName(AppContext.BaseDirectory.TrimEnd('/'))!);

    [GeneratedRegex("```csharp\n(.*?)```", RegexOptions.Singleline)]
    private static partial Regex CSharpBlock();

    [GeneratedRegex(@"// README: (?<name>[a-z-]+)\n(?<body>.*?)\n *// README: end", RegexOptions.Singleline)]
    private static partial Regex Region();

    private static string Dedent(string text)
    {
        var lines = text.Split('\n');
        var indent = lines.Where(l => l.Trim().Length > 0).Min(l => l.Length - l.TrimStart().Length);
        return string.Join('\n', lines.Select(l => l.Length >= indent ? l[indent..] : l.TrimStart())).TrimEnd() + "\n";
    }

    [Fact]
    public async Task Every_readme_example_is_compiled_and_runs()
    {
        var readme = File.ReadAllText(Path.Combine(Root, "README.md"));
        var examples = File.ReadAllText(Path.Combine(Root, "examples", "Ruvio.Examples", "Program.cs"));
        var snippets = File.ReadAllText(Path.Combine(Root, "tests", "Ruvio.Client.Tests", "SnippetTests.cs"));
        var regions = Region().Matches(examples).ToDictionary(m => m.Groups["name"].Value, m => Dedent(m.Groups["body"].Value));
        var snippetText = string.Join('\n', snippets.Split('\n').Select(l => l.Trim()));
        var used = new List<string>();
        foreach (Match block in CSharpBlock().Matches(readme))
        {
            var code = block.Groups[1].Value;
            var region = regions.FirstOrDefault(r => r.Value == code).Key;
            if (region is not null)
            {
                used.Add(region);
                continue;
            }
            // A post snippet: every line appears, in order, in SnippetTests (which runs them).
            var flat = string.Join('\n', code.Split('\n').Select(l => l.Trim()));
            Assert.True(snippetText.Contains(flat.Trim()), $"README block is neither an example region nor a post snippet:\n{code}");
        }
        Assert.Equal(regions.Keys.Order(), used.Order());

        var dll = Path.Combine(Root, "examples", "Ruvio.Examples", "bin", Config, "net10.0", "Ruvio.Examples.dll");
        Assert.True(File.Exists(dll), $"the examples are not built at {dll}");
        foreach (var name in used)
        {
            var psi = new ProcessStartInfo("dotnet") { RedirectStandardOutput = true, RedirectStandardError = true };
            foreach (var a in new[] { dll, name, _f.Server.Address }) psi.ArgumentList.Add(a);
            using var p = Process.Start(psi)!;
            var stdout = p.StandardOutput.ReadToEndAsync();
            var stderr = p.StandardError.ReadToEndAsync();
            await p.WaitForExitAsync().WaitAsync(TimeSpan.FromSeconds(60));
            Assert.True(p.ExitCode == 0, $"example {name} exited {p.ExitCode}: {await stdout}{await stderr}");
            Assert.Contains($"{name}: ok", await stdout);
        }
    }
}
