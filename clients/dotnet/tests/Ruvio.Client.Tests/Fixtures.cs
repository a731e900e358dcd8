using System.Diagnostics;
using Ruvio.Testing;

namespace Ruvio.Tests;

/// <summary>One ruvio server shared by the tests of a class (tests that stop or kill a server start their own).</summary>
public sealed class RuvioFixture : IDisposable
{
    public ServerProcess Server { get; } = ServerProcess.StartRuvio();
    public void Dispose() => Server.Dispose();
}

internal static class Helpers
{
    public static string Key(string name) => $"dotnet-test:{Guid.NewGuid():n}:{name}";

    public static async Task<RuvioConnection> Connect(ServerProcess s, Action<RuvioOptions>? configure = null)
    {
        var o = RuvioOptions.Parse(s.Address);
        configure?.Invoke(o);
        return await RuvioConnection.ConnectAsync(o);
    }

    public static async Task WaitUntil(Func<Task<bool>> cond, TimeSpan timeout, string what)
    {
        var sw = Stopwatch.StartNew();
        while (sw.Elapsed < timeout)
        {
            try
            {
                if (await cond()) return;
            }
            catch (RuvioException) { }
            await Task.Delay(50);
        }
        throw new TimeoutException($"timed out waiting for {what}");
    }
}
