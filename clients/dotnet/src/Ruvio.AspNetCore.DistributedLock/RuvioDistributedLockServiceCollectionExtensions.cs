using System.Diagnostics.CodeAnalysis;
using Microsoft.AspNetCore.Hosting;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Hosting;
using Ruvio;
using Ruvio.AspNetCore.DistributedLock;

namespace Microsoft.Extensions.DependencyInjection;

/// <summary>Registration of Ruvio's distributed locks, singleton workers and endpoint locks.</summary>
public static class RuvioDistributedLockServiceCollectionExtensions
{
    /// <summary>
    /// Adds <see cref="IRuvioLocks"/> and what <c>UseRuvioLock()</c> and <c>AddRuvioSingleton</c> need. The options
    /// are validated when the host starts (a missing connection names every place it may come from).
    /// </summary>
    public static IServiceCollection AddRuvioDistributedLock(this IServiceCollection services, Action<RuvioDistributedLockOptions>? configure = null)
    {
        ArgumentNullException.ThrowIfNull(services);
        AddCore(services);
        if (configure is not null) services.Configure(configure);
        return services;
    }

    /// <summary>
    /// Runs <typeparamref name="TWorker"/>, an ordinary <see cref="BackgroundService"/>, on exactly one instance of
    /// the app at a time: the one holding the lock <paramref name="name"/> (key <c>KeyPrefix + name</c>). The others
    /// wait on the server's queue and take over within a round trip of a graceful stop, and within the lease of a
    /// crash. A lost lock stops the worker (its stopping token fires) and the instance contends again; a worker that
    /// throws or returns is stopped, the lock released, and the instance contends again after a back-off, without
    /// stopping the host. Each term gets a new worker; its constructor may take an <see cref="IRuvioSingletonLease"/>
    /// (the term's fencing token and <c>LockLost</c>). Several singletons of one type under different names work.
    /// </summary>
    /// <exception cref="InvalidOperationException">A singleton named <paramref name="name"/> is already registered.</exception>
    public static IServiceCollection AddRuvioSingleton<[DynamicallyAccessedMembers(DynamicallyAccessedMemberTypes.PublicConstructors)] TWorker>(this IServiceCollection services, string name, Action<RuvioSingletonOptions>? configure = null)
        where TWorker : BackgroundService
    {
        ArgumentNullException.ThrowIfNull(services);
        ArgumentException.ThrowIfNullOrEmpty(name);
        var registry = AddCore(services);
        if (!registry.Names.Add(name))
            throw new InvalidOperationException($"a Ruvio singleton named '{name}' is already registered; give each singleton its own name");

        var options = services.AddOptions<RuvioSingletonOptions>(name);
        if (configure is not null) options.Configure(configure);
        options.Validate(o => o.Lease > TimeSpan.Zero && o.Lease <= TimeSpan.FromDays(30), $"singleton '{name}': Lease must be between 1 ms and 30 days")
            .Validate(o => o.RestartDelay >= TimeSpan.Zero && o.MaxRestartDelay >= o.RestartDelay, $"singleton '{name}': RestartDelay must be >= 0 and MaxRestartDelay >= RestartDelay")
            .Validate(o => o.StopTimeout >= TimeSpan.Zero, $"singleton '{name}': StopTimeout cannot be negative")
            .ValidateOnStart();

        services.AddKeyedSingleton(name, (sp, _) => new RuvioSingletonState(name, sp.GetRequiredService<IRuvioLocks>().GetKey(name)));
        // Transient, so a worker's constructor gets the term being started, and anyone else the current state.
        services.AddKeyedTransient<IRuvioSingletonLease>(name, (sp, _) =>
            RuvioSingletonState.Constructing.Value is { } term && term.Name == name ? term : sp.GetRequiredKeyedService<RuvioSingletonState>(name));
        // Not AddHostedService<T>: it ignores a second registration of the same type.
        services.AddSingleton<IHostedService>(sp => new RuvioSingletonRunner<TWorker>(
            name,
            sp.GetRequiredKeyedService<RuvioSingletonState>(name),
            sp,
            sp.GetRequiredService<IRuvioLocks>(),
            sp.GetRequiredService<IOptionsMonitor<RuvioSingletonOptions>>(),
            sp.GetRequiredService<ILoggerFactory>()));
        return services;
    }

    private static RuvioSingletonRegistry AddCore(IServiceCollection services)
    {
        foreach (var descriptor in services)
        {
            if (descriptor.ServiceType == typeof(RuvioSingletonRegistry) && descriptor.ImplementationInstance is RuvioSingletonRegistry existing)
                return existing;
        }
        var registry = new RuvioSingletonRegistry();
        services.AddSingleton(registry);
        services.AddOptions<RuvioDistributedLockOptions>().ValidateOnStart();
        services.TryAddEnumerable(ServiceDescriptor.Singleton<IValidateOptions<RuvioDistributedLockOptions>, RuvioDistributedLockOptionsValidator>());
        services.TryAddSingleton<RuvioConnectionProvider>();
        services.TryAddSingleton<IRuvioLocks, RuvioLocks>();
        services.TryAddSingleton<RuvioLockMiddlewareMarker>();
        services.TryAddEnumerable(ServiceDescriptor.Transient<IStartupFilter, RuvioLockStartupFilter>());
        // A worker's constructor may ask for its lease without knowing its singleton's name (one type, several names).
        services.TryAddTransient<IRuvioSingletonLease>(_ => RuvioSingletonState.Constructing.Value
            ?? throw new InvalidOperationException("an IRuvioSingletonLease without a key is given only to the constructor of a singleton worker (AddRuvioSingleton); elsewhere resolve it by the singleton's name: [FromKeyedServices(\"name\")]"));
        return registry;
    }
}

/// <summary>Start-up validation of <see cref="RuvioDistributedLockOptions"/>.</summary>
internal sealed class RuvioDistributedLockOptionsValidator(IServiceProvider services) : IValidateOptions<RuvioDistributedLockOptions>
{
    public ValidateOptionsResult Validate(string? name, RuvioDistributedLockOptions options)
    {
        var failures = new List<string>();
        if (options.KeyPrefix is null) failures.Add("KeyPrefix cannot be null (use \"\" for none)");
        if (options.DefaultLease <= TimeSpan.Zero || options.DefaultLease > TimeSpan.FromDays(30))
            failures.Add($"DefaultLease must be between 1 ms and 30 days, not {options.DefaultLease}");
        if (options.RejectionStatusCode is < 400 or > 599) failures.Add($"RejectionStatusCode must be 400..599, not {options.RejectionStatusCode}");
        if (options.UnavailableStatusCode is < 400 or > 599) failures.Add($"UnavailableStatusCode must be 400..599, not {options.UnavailableStatusCode}");
        if (options.RetryAfter < TimeSpan.Zero) failures.Add("RetryAfter cannot be negative");
        if (options.DurabilityReplicas is < 0) failures.Add("DurabilityReplicas cannot be negative");

        if (options.ConnectionFactory is null)
        {
            try
            {
                var resolved = RuvioConnectionProvider.ResolveOptions(options, services.GetService<IConfiguration>(), out _);
                var shared = services.GetService<IServiceProviderIsService>()?.IsService(typeof(RuvioConnection)) == true;
                if (resolved is null && !shared) failures.Add(RuvioConnectionProvider.MissingConnectionMessage);
            }
            catch (Exception e) when (e is ArgumentException or FormatException)
            {
                failures.Add(e.Message);
            }
        }
        return failures.Count == 0 ? ValidateOptionsResult.Success : ValidateOptionsResult.Fail(failures);
    }
}
