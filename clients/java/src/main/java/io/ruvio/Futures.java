package io.ruvio;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** Waiting on futures and unwrapping their exceptions into this client's unchecked ones. */
final class Futures {
    private Futures() {
    }

    static <T> T await(CompletableFuture<T> f) {
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RuvioException("interrupted while waiting for a reply", e);
        } catch (ExecutionException e) {
            throw unwrap(e.getCause());
        }
    }

    static RuntimeException unwrap(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        if (t instanceof RuvioServerException s) {
            // a fresh exception so the stack trace shows the caller
            RuvioServerException copy = new RuvioServerException(s.serverMessage());
            return copy;
        }
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error err) {
            throw err;
        }
        return new RuvioException(String.valueOf(t), t);
    }

    static Throwable cause(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }
}
