namespace Ruvio.Tests;

/// <summary>Blocks every thread-pool thread for a moment: it must not run beside other tests (their timers would starve too).</summary>
[CollectionDefinition("starvation", DisableParallelization = true)]
public sealed class StarvationCollection { }

/// <summary>The snippet tests share a process-wide test seam.</summary>
[CollectionDefinition("snippets")]
public sealed class SnippetCollection { }
