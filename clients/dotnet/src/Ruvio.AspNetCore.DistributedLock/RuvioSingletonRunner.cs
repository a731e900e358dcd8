using System.Diagnostics;
using System.Diagnostics.CodeAnalysis;
using Microsoft.Extensions.Hosting;

namespace Ruvio.AspNetCore.DistributedLock;

/// <summary>
/// Runs <typeparamref name="TWorker"/> while this instance holds the singleton's lock, one term after another: wait
/// for the lock on the server's queue (<c>LEASE key ttl WAIT ...</c>: no polling, so a released lock is taken within
/// a round trip), create a fresh worker for the term (in its own DI scope, given the term's
/// <see cref="IRuvioSingletonLease"/>), run it, and end the term when the lock is lost (the worker's stopping token
/// fires; contend again at once), when the worker throws or returns (stop it, release, contend again after a
/// back-off), or when the host stops (stop it, release, so a standby takes over at once). Nothing a worker does
/// stops the host: a registered <c>BackgroundService</c> that throws stops the whole host by default, which is
/// why the worker is not registered as a hosted service itself.
/// </summary>
internal sealed class RuvioSingletonRunner<[DynamicallyAccessedMembers(DynamicallyAccessedMemberTypes.PublicConstructors)] TWorker> : BackgroundService
    where TWorker : BackgroundService
{
    private enum Outcome { Lost, Failed, Completed, Stopped }

    private readonly string _name;
    private readonly RuvioSingletonState _state;
    private readonly IServiceProvider _services;
    private readonly IRuvioLocks _locks;
    private readonly IOptionsMonitor<RuvioSingletonOptions> _options;
    private readonly ILogger _logger;
    private CancellationToken _shutdown = CancellationToken.None;

    public RuvioSingletonRunner(string name, RuvioSingletonState state, IServiceProvider services, IRuvioLocks locks,
        IOptionsMonitor<RuvioSingletonOptions> options, ILoggerFactory loggerFactory)
    {
        _name = name;
        _state = state;
        _services = services;
        _locks = locks;
        _options = options;
        _logger = loggerFactory.CreateLogger("Ruvio.AspNetCore.DistributedLock.Singleton");
    }

    public override Task StopAsync(CancellationToken cancellationToken)
    {
        // The host's shutdown timeout bounds how long the current worker may take to stop.
        _shutdown = cancellationToken;
        return base.StopAsync(cancellationToken);
    }

    protected override async Task ExecuteAsync(CancellationToken stoppingToken)
    {
        var options = _options.Get(_name);
        var delay = options.RestartDelay;
        while (!stoppingToken.IsCancellationRequested)
        {
            IRuvioLock held;
            try
            {
                Log.SingletonWaiting(_logger, _name, _state.Key);
                held = await _locks.AcquireAsync(_name, options.Lease, timeout: null, stoppingToken).ConfigureAwait(false);
            }
            catch (OperationCanceledException) when (stoppingToken.IsCancellationRequested)
            {
                return;
            }
            catch (Exception e)
            {
                Log.SingletonContendFailed(_logger, _name, _state.Key, (long)delay.TotalMilliseconds, e);
                if (!await DelayAsync(delay, stoppingToken).ConfigureAwait(false)) return;
                delay = Next(delay, options);
                continue;
            }

            var started = Stopwatch.GetTimestamp();
            var (outcome, error) = await RunTermAsync(held, options, stoppingToken).ConfigureAwait(false);
            if (outcome == Outcome.Stopped) return;
            if (outcome == Outcome.Lost)
            {
                delay = options.RestartDelay;
                continue;
            }
            // A term that ran longer than the longest back-off was healthy: start the back-off again from the bottom.
            if (Stopwatch.GetElapsedTime(started) > options.MaxRestartDelay) delay = options.RestartDelay;
            if (outcome == Outcome.Failed) Log.SingletonWorkerFailed(_logger, _name, held.Token, (long)delay.TotalMilliseconds, error!);
            else Log.SingletonWorkerCompleted(_logger, _name, held.Token, (long)delay.TotalMilliseconds);
            if (!await DelayAsync(delay, stoppingToken).ConfigureAwait(false)) return;
            delay = Next(delay, options);
        }
    }

    private async Task<(Outcome, Exception?)> RunTermAsync(IRuvioLock held, RuvioSingletonOptions options, CancellationToken stoppingToken)
    {
        var term = new RuvioSingletonTerm(_name, _state.Key, held);
        _state.Current = term;
        var scope = _services.CreateAsyncScope();
        TWorker? worker = null;
        Exception? error = null;
        var outcome = Outcome.Failed;
        using var termEnded = CancellationTokenSource.CreateLinkedTokenSource(stoppingToken, held.LockLost);
        try
        {
            RuvioSingletonState.Constructing.Value = term;
            try { worker = ActivatorUtilities.CreateInstance<TWorker>(scope.ServiceProvider); }
            finally { RuvioSingletonState.Constructing.Value = null; }

            Log.SingletonStarted(_logger, _name, _state.Key, held.Token, typeof(TWorker).Name);
            // The worker's stopping token is linked to this one: it fires the moment the lock is lost.
            await worker.StartAsync(termEnded.Token).ConfigureAwait(false);
            var execute = worker.ExecuteTask ?? Task.CompletedTask;
            await execute.WaitAsync(termEnded.Token).ConfigureAwait(ConfigureAwaitOptions.SuppressThrowing);

            if (stoppingToken.IsCancellationRequested) outcome = Outcome.Stopped;
            else if (held.LockLost.IsCancellationRequested) outcome = Outcome.Lost;
            else if (execute.IsFaulted) (outcome, error) = (Outcome.Failed, execute.Exception!.InnerExceptions.Count == 1 ? execute.Exception.InnerException : execute.Exception);
            else if (execute.IsCanceled) (outcome, error) = (Outcome.Failed, new OperationCanceledException($"the worker of singleton '{_name}' was cancelled without being stopped"));
            else outcome = Outcome.Completed;
            if (outcome == Outcome.Lost) Log.SingletonLockLost(_logger, _name, _state.Key, held.Token);

            if (!execute.IsCompleted)
            {
                using var timeout = new CancellationTokenSource(options.StopTimeout);
                var stopToken = outcome == Outcome.Stopped ? _shutdown : timeout.Token;
                await worker.StopAsync(stopToken).ConfigureAwait(ConfigureAwaitOptions.SuppressThrowing);
                if (!execute.IsCompleted)
                    Log.SingletonStopTimedOut(_logger, _name, (long)(outcome == Outcome.Stopped ? -1 : options.StopTimeout.TotalMilliseconds));
            }
            else
            {
                _ = execute.Exception; // observed (logged by the caller)
            }
        }
        catch (Exception e)
        {
            // Creating or starting the worker failed (a missing service, a synchronous throw).
            (outcome, error) = (stoppingToken.IsCancellationRequested ? Outcome.Stopped : Outcome.Failed, e);
        }
        finally
        {
            term.End();
            if (_state.Current == term) _state.Current = null;
            try
            {
                if (worker is IAsyncDisposable asyncDisposable) await asyncDisposable.DisposeAsync().ConfigureAwait(false);
                else worker?.Dispose();
                await scope.DisposeAsync().ConfigureAwait(false);
            }
            catch (Exception e) { error ??= e; }
            var lost = held.LockLost.IsCancellationRequested;
            try
            {
                await held.DisposeAsync().ConfigureAwait(false);
                if (!lost) Log.SingletonReleased(_logger, _name, _state.Key, held.Token);
            }
            catch (Exception e)
            {
                Log.LockReleaseFailed(_logger, _state.Key, held.Token, e);
            }
        }
        return (outcome, error);
    }

    private static async Task<bool> DelayAsync(TimeSpan delay, CancellationToken stoppingToken)
    {
        try
        {
            await Task.Delay(delay, stoppingToken).ConfigureAwait(false);
            return true;
        }
        catch (OperationCanceledException)
        {
            return false;
        }
    }

    private static TimeSpan Next(TimeSpan delay, RuvioSingletonOptions options) =>
        TimeSpan.FromTicks(Math.Min(delay.Ticks * 2, options.MaxRestartDelay.Ticks));
}
