using System.Globalization;
using Microsoft.Extensions.Configuration;

namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// Where the package's connection comes from, decided once from the options and configuration (see
/// <see cref="RuvioDistributedLockOptions"/>, remarks), and the connection itself, opened on first use. A failed
/// connect is not cached: the next caller tries again, so an app that started while Ruvio was down recovers.
/// </summary>
internal sealed class RuvioConnectionProvider : IAsyncDisposable
{
    private readonly IServiceProvider _services;
    private readonly RuvioDistributedLockOptions _options;
    private readonly ILoggerFactory _loggerFactory;
    private readonly ILogger _logger;
    private readonly CancellationTokenSource _disposed = new();
    private readonly Lock _gate = new();
    private Task<Connected>? _connecting;

    private sealed record Connected(RuvioConnection Connection, RuvioDatabase Database, bool Owned);

    public RuvioConnectionProvider(IServiceProvider services, IOptions<RuvioDistributedLockOptions> options, ILoggerFactory loggerFactory)
    {
        _services = services;
        _options = options.Value;
        _loggerFactory = loggerFactory;
        _logger = loggerFactory.CreateLogger("Ruvio.AspNetCore.DistributedLock");
    }

    public Task<RuvioDatabase> GetDatabaseAsync(CancellationToken cancellationToken)
    {
        var connecting = _connecting;
        if (connecting is { IsCompletedSuccessfully: true }) return Task.FromResult(connecting.Result.Database);
        lock (_gate)
        {
            ObjectDisposedException.ThrowIf(_disposed.IsCancellationRequested, this);
            if (_connecting is null || _connecting.IsFaulted || _connecting.IsCanceled) _connecting = ConnectAsync();
            connecting = _connecting;
        }
        return WaitAsync(connecting, cancellationToken);

        static async Task<RuvioDatabase> WaitAsync(Task<Connected> connecting, CancellationToken ct) => (await connecting.WaitAsync(ct).ConfigureAwait(false)).Database;
    }

    private async Task<Connected> ConnectAsync()
    {
        var ct = _disposed.Token;
        try
        {
            RuvioConnection connection;
            bool owned;
            if (_options.ConnectionFactory is { } factory)
            {
                connection = await factory(_services, ct).ConfigureAwait(false);
                owned = false;
            }
            else if (_services.GetService<RuvioConnection>() is { } shared && _options.Configuration is null)
            {
                connection = shared;
                owned = false;
            }
            else
            {
                var source = ResolveOptions(_options, _services.GetService<IConfiguration>(), out var description)
                    ?? throw new InvalidOperationException(MissingConnectionMessage);
                source.LoggerFactory ??= _loggerFactory;
                Log.Connecting(_logger, description);
                connection = await RuvioConnection.ConnectAsync(source, ct).ConfigureAwait(false);
                owned = true;
            }
            // An app-owned connection was opened with its own options: durable grants cannot be switched on here.
            if (!owned && _options.DurabilityReplicas is { } replicas && connection.Options.DurabilityReplicas != replicas)
                throw new InvalidOperationException($"RuvioDistributedLockOptions.DurabilityReplicas is {replicas}, but the app's own RuvioConnection was opened with DurabilityReplicas = {connection.Options.DurabilityReplicas?.ToString() ?? "null"}: set it in that connection's options (or connection string, durabilityReplicas=...)");
            var database = await connection.GetDefaultDatabaseAsync().ConfigureAwait(false);
            return new Connected(connection, database, owned);
        }
        catch (Exception e) when (e is not OperationCanceledException || !ct.IsCancellationRequested)
        {
            Log.ConnectFailed(_logger, e);
            throw;
        }
    }

    internal const string MissingConnectionMessage =
        "Ruvio.AspNetCore.DistributedLock has no connection to Ruvio: set RuvioDistributedLockOptions.Configuration " +
        "(a connection string such as \"127.0.0.1:6379\") or ConnectionFactory, register a RuvioConnection in the " +
        "service collection, or add the connection string 'ConnectionStrings:Ruvio' or a 'Ruvio' section " +
        "(Ruvio:Configuration, or Ruvio:EndPoints with the other RuvioOptions properties) to the configuration.";

    /// <summary>
    /// The client options from the first configured source, or null when none is; a malformed source throws
    /// (<see cref="ArgumentException"/>/<see cref="FormatException"/>) naming the configuration key.
    /// </summary>
    internal static RuvioOptions? ResolveOptions(RuvioDistributedLockOptions options, IConfiguration? configuration, out string description)
    {
        RuvioOptions? result = null;
        description = "";
        if (!string.IsNullOrWhiteSpace(options.Configuration))
        {
            result = Parse(options.Configuration, "RuvioDistributedLockOptions.Configuration");
            description = "RuvioDistributedLockOptions.Configuration";
        }
        else if (configuration?.GetConnectionString("Ruvio") is { Length: > 0 } connectionString)
        {
            result = Parse(connectionString, "ConnectionStrings:Ruvio");
            description = "ConnectionStrings:Ruvio";
        }
        else if (configuration?.GetSection("Ruvio") is { } section && section.GetChildren().Any())
        {
            result = FromSection(section);
            description = "the 'Ruvio' configuration section";
        }
        if (result is not null && options.DurabilityReplicas is { } replicas) result.DurabilityReplicas = replicas;
        return result;
    }

    private static RuvioOptions Parse(string connectionString, string where)
    {
        try { return RuvioOptions.Parse(connectionString); }
        catch (Exception e) when (e is ArgumentException or FormatException)
        {
            throw new ArgumentException($"{where} is not a valid Ruvio connection string: {e.Message}", e);
        }
    }

    /// <summary>
    /// Binds the <c>Ruvio</c> section by hand (trimming-safe, and <see cref="RuvioOptions.EndPoints"/> needs parsing):
    /// <c>Configuration</c> (a connection string the other keys then adjust), <c>EndPoints</c> (an array, or one
    /// comma-separated string), and the scalar properties of <see cref="RuvioOptions"/>. An unknown key is an error,
    /// so a typo is not silently ignored. Keys that belong to <see cref="RuvioDistributedLockOptions"/>
    /// (<c>KeyPrefix</c>, ...) are skipped here.
    /// </summary>
    internal static RuvioOptions FromSection(IConfigurationSection section)
    {
        var result = section["Configuration"] is { Length: > 0 } cs ? Parse(cs, section.Path + ":Configuration") : new RuvioOptions();
        foreach (var child in section.GetChildren())
        {
            var key = child.Key;
            var value = child.Value;
            var path = child.Path;
            switch (key.ToLowerInvariant())
            {
                case "configuration": break;
                case "endpoints":
                    result.EndPoints.Clear();
                    var items = value is not null
                        ? value.Split(',', StringSplitOptions.RemoveEmptyEntries | StringSplitOptions.TrimEntries)
                        : child.GetChildren().Select(c => c.Value ?? "").ToArray();
                    foreach (var item in items)
                        result.EndPoints.Add(Guard(path, () => RuvioOptions.ParseEndPoint(item, result.ServiceName is null ? 6379 : 26379)));
                    break;
                case "user": result.User = value; break;
                case "password": result.Password = value; break;
                case "ssl": result.Ssl = Guard(path, () => bool.Parse(value!)); break;
                case "sslhost": result.SslHost = value; break;
                case "clientname": case "name": result.ClientName = value; break;
                case "defaultdatabase": result.DefaultDatabase = Guard(path, () => int.Parse(value!, CultureInfo.InvariantCulture)); break;
                case "connecttimeout": result.ConnectTimeout = Guard(path, () => Duration(value!)); break;
                case "asynctimeout": result.AsyncTimeout = Guard(path, () => Duration(value!)); break;
                case "servicename": result.ServiceName = value; break;
                case "sentineluser": result.SentinelUser = value; break;
                case "sentinelpassword": result.SentinelPassword = value; break;
                case "durabilityreplicas": result.DurabilityReplicas = Guard(path, () => int.Parse(value!, CultureInfo.InvariantCulture)); break;
                case "protocol": result.Protocol = Guard(path, () => Enum.Parse<RuvioProtocol>(value!, ignoreCase: true)); break;
                case "keyprefix": case "defaultlease": case "rejectionstatuscode": case "unavailablestatuscode": case "retryafter": break;
                default:
                    throw new ArgumentException($"configuration key '{path}' is not a Ruvio connection setting (known: Configuration, EndPoints, User, Password, Ssl, SslHost, ClientName, DefaultDatabase, ConnectTimeout, AsyncTimeout, ServiceName, SentinelUser, SentinelPassword, DurabilityReplicas, Protocol)");
            }
        }
        return result;
    }

    /// <summary>A duration in configuration: milliseconds as an integer (as in connection strings), or a TimeSpan ("00:00:05").</summary>
    private static TimeSpan Duration(string value) =>
        long.TryParse(value, NumberStyles.Integer, CultureInfo.InvariantCulture, out var ms) ? TimeSpan.FromMilliseconds(ms) : TimeSpan.Parse(value, CultureInfo.InvariantCulture);

    private static T Guard<T>(string path, Func<T> parse)
    {
        try { return parse(); }
        catch (Exception e) when (e is FormatException or ArgumentException or OverflowException or ArgumentNullException)
        {
            throw new ArgumentException($"configuration key '{path}' has an invalid value: {e.Message}", e);
        }
    }

    public async ValueTask DisposeAsync()
    {
        Task<Connected>? connecting;
        lock (_gate)
        {
            if (_disposed.IsCancellationRequested) return;
            _disposed.Cancel();
            connecting = _connecting;
        }
        if (connecting is null) return;
        try
        {
            var connected = await connecting.ConfigureAwait(false);
            if (connected.Owned) await connected.Connection.DisposeAsync().ConfigureAwait(false);
        }
        catch (Exception) { /* the connect failed: nothing to close */ }
        _disposed.Dispose();
    }
}
