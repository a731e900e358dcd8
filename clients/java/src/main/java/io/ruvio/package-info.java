/**
 * The Ruvio client: {@link io.ruvio.RuvioClient} (sync) and {@link io.ruvio.RuvioAsyncClient} (CompletableFuture)
 * for the fencing-token lock commands and any Redis-protocol command, the lock helper {@link io.ruvio.LockHandle},
 * pipelines, transactions, pub/sub, Sentinel-protocol discovery, and unchecked exceptions
 * ({@link io.ruvio.RuvioException} and its subclasses).
 */
package io.ruvio;
