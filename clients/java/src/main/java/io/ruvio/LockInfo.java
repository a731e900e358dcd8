package io.ruvio;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What {@code LOCKINFO key} describes: the lock's kind, its limit (1 for a lease), its holders and how many clients
 * wait for it.
 *
 * @param kind {@code "lease"} or {@code "semaphore"}
 * @param limit how many holders the lock admits (1 for a lease)
 * @param holders the holders, in the order they were granted
 * @param waiters how many clients are waiting (clients that left are not counted)
 */
public record LockInfo(String kind, long limit, List<Holder> holders, long waiters) {

    /**
     * One holder of a lock.
     *
     * @param token the holder's fencing token
     * @param remainingMs milliseconds until the holder's TTL ends (at the time of the reply)
     */
    public record Holder(long token, long remainingMs) {
    }

    static LockInfo parse(Object reply) {
        if (reply == null) {
            return null;
        }
        Map<Object, Object> m = Connection.asMap(reply);
        List<Holder> holders = new ArrayList<>();
        Object hs = m.get("holders");
        if (hs instanceof List<?> l) {
            for (Object h : l) {
                Map<Object, Object> hm = Connection.asMap(h);
                holders.add(new Holder((Long) hm.get("token"), (Long) hm.get("remaining_ms")));
            }
        }
        return new LockInfo(String.valueOf(m.get("kind")), (Long) m.get("limit"), List.copyOf(holders),
                (Long) m.get("waiters"));
    }
}
