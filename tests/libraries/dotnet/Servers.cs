using Ruvio.Testing;

namespace Ruvio.LibraryProof;

/// <summary>One ruvio and one redis-server for the whole run (each test uses its own keys).</summary>
public sealed class Servers : IDisposable
{
    public ServerProcess Ruvio { get; } = ServerProcess.StartRuvio();
    public ServerProcess Redis { get; } = ServerProcess.StartRedis();
    public ServerProcess Of(string kind) => kind == "ruvio" ? Ruvio : Redis;
    public void Dispose()
    {
        Ruvio.Dispose();
        Redis.Dispose();
    }
}

[CollectionDefinition("servers")]
public sealed class ServersCollection : ICollectionFixture<Servers> { }

internal static class Keys
{
    public static string New(string name) => $"libproof:{Guid.NewGuid():n}:{name}";
}
