import io.ruvio.LockOptions;
import io.ruvio.RuvioClient;
import java.time.Duration;

/**
 * A runnable example (used by fresh-project.sh, which builds it in a fresh Maven project against the installed
 * io.ruvio:ruvio-client): the product post's snippets, then the lock helper. Usage: java Example [port]
 */
public class Example {
    public static void main(String[] args) {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 6379;
        var c = RuvioClient.connect("127.0.0.1", port);

        Long token = c.lease("job:nightly-report", 30_000);
        // token -> you hold it
        // null -> someone else holds it
        if (token != null) {
            Boolean released = c.release("job:nightly-report", token);
            // true -> released (false if the token no longer matches)
            System.out.println("lease " + token + ", released " + released);
        }

        Long slot = c.semaphore("upstream:billing", 8, 15_000);
        // 1700000000123 -> a slot, this is your token
        // null          -> all 8 slots are taken
        if (slot != null) {
            c.release("upstream:billing", slot);
            System.out.println("semaphore slot " + slot + " released");
        }

        // The lock helper: renewed at TTL/3, loss signalled, released at the end of the block.
        try (var held = c.tryLock("job:nightly-report", Duration.ofSeconds(30),
                LockOptions.defaults().waitFor(Duration.ofSeconds(5))
                        .onLost(h -> System.err.println("lost " + h.name() + ": " + h.lossReason())))) {
            if (held == null) {
                System.out.println("someone else runs it");
                return;
            }
            boolean written = c.ifGt("report:42", held.token(), "body written under token " + held.token());
            System.out.println("fenced write with token " + held.token() + ": " + written);
        }
        c.close();
    }
}
