// The sample app of Ruvio.AspNetCore.DistributedLock. Run two of these against one Ruvio:
//
//   dotnet run -- --urls http://127.0.0.1:5001 --ConnectionStrings:Ruvio 127.0.0.1:6379 --Instance a
//   dotnet run -- --urls http://127.0.0.1:5002 --ConnectionStrings:Ruvio 127.0.0.1:6379 --Instance b
//
// then POST /orders/42/pay to both at once: one pays, the other answers 409; the outbox publisher runs on exactly
// one of them (GET /stats says which), and moves to the other when you stop it.
using Ruvio;
using Ruvio.AspNetCore.DistributedLock;
using Ruvio.AspNetCore.Sample;

var builder = WebApplication.CreateBuilder(args);
var config = builder.Configuration;

builder.Services.AddSingleton<SampleStats>();
builder.Services.AddRuvioDistributedLock(options => options.KeyPrefix = config["KeyPrefix"] ?? "myapp:lock:");
// The tests shorten the endpoint locks' lease, to see a loss within a second or two.
if (config.GetValue<int?>("Lock:DefaultLeaseMs") is int leaseMs)
    builder.Services.Configure<RuvioDistributedLockOptions>(o => o.DefaultLease = TimeSpan.FromMilliseconds(leaseMs));

// Keep a background worker running on exactly one instance; another takes over if it stops.
void Outbox(RuvioSingletonOptions o)
{
    o.Lease = TimeSpan.FromMilliseconds(config.GetValue("Outbox:LeaseMs", 15_000));
    o.RestartDelay = TimeSpan.FromMilliseconds(config.GetValue("Outbox:RestartDelayMs", 1_000));
}
builder.Services.AddRuvioSingleton<OutboxPublisher>("outbox-publisher", Outbox);
// The same worker type under a second name: an independent singleton with its own lock and fence.
if (config.GetValue("Outbox:Second", false)) builder.Services.AddRuvioSingleton<OutboxPublisher>("outbox-publisher-2", Outbox);

builder.Services.AddHealthChecks().AddRuvio();

var app = builder.Build();

// Guard an endpoint: one request per order at a time, across every instance.
app.UseRuvioLock();
app.MapPost("/orders/{id}/pay", Orders.PayAsync).WithMetadata(new RuvioLockAttribute("order:{id}"));
// The same lock, but a request waits up to 15 s in the server's FIFO queue instead of getting 409 at once.
app.MapPost("/orders/{id}/pay-queued", Orders.PayAsync).WithMetadata(new RuvioLockAttribute("order:{id}") { WaitMilliseconds = 15_000 });
// The benchmark's pair: the same trivial handler with and without an endpoint lock.
app.MapGet("/bench/plain/{id}", (string id) => Results.Text(id));
app.MapGet("/bench/locked/{id}", (string id) => Results.Text(id)).RequireRuvioLock("bench:{id}");
app.MapGet("/stats", (SampleStats stats) => Results.Json(stats.Snapshot()));
app.MapHealthChecks("/healthz");

app.Run();
