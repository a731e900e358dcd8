package io.ruvio;

import java.io.ByteArrayInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.PrintWriter;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The Java runner of the cross-language conformance corpus (conformance/README.md in the repository). Launched by
 * conformance/runners/java.sh with CONFORMANCE_DIR, RUVIO_ADDR, RUVIO_BIN and CONFORMANCE_RESULTS set; writes one JSON
 * line per case. Not a JUnit test: the corpus is not part of this package.
 */
public final class ConformanceRunner {
    private static final String LANG = "java";
    private final String runId;
    private final String addr;
    private final PrintWriter out;
    private int passed;
    private int failed;

    private ConformanceRunner(String addr, PrintWriter out) {
        byte[] r = new byte[6];
        new SecureRandom().nextBytes(r);
        this.runId = HexFormat.of().formatHex(r);
        this.addr = addr;
        this.out = out;
    }

    /**
     * Runs every case of the corpus.
     *
     * @param args unused
     * @throws Exception when the runner itself breaks
     */
    public static void main(String[] args) throws Exception {
        Path dir = Path.of(need("CONFORMANCE_DIR"));
        String addr = need("RUVIO_ADDR");
        need("RUVIO_BIN");
        Path results = Path.of(need("CONFORMANCE_RESULTS"));
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(results, StandardCharsets.UTF_8))) {
            ConformanceRunner r = new ConformanceRunner(addr, out);
            for (String sub : List.of("wire", "scenarios", "guard")) {
                Path d = dir.resolve(sub);
                if (!Files.isDirectory(d)) {
                    continue;
                }
                List<Path> files;
                try (Stream<Path> s = Files.list(d)) {
                    files = s.filter(p -> p.toString().endsWith(".json")).sorted().toList();
                }
                for (Path f : files) {
                    r.runFile(f);
                }
            }
            System.err.println("java conformance runner: " + r.passed + " passed, " + r.failed + " failed");
        }
        System.exit(0);
    }

    private static String need(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set");
        }
        return v;
    }

    @SuppressWarnings("unchecked")
    private void runFile(Path f) throws IOException {
        Map<String, Object> doc = (Map<String, Object>) Json.parse(Files.readString(f, StandardCharsets.UTF_8));
        String format = (String) doc.get("format");
        for (Object o : (List<Object>) doc.get("cases")) {
            Map<String, Object> c = (Map<String, Object>) o;
            String id = (String) c.get("id");
            switch (format) {
                case "wire-decode" -> report(id, () -> decodeCase(c));
                case "wire-encode" -> report(id, () -> encodeCase(c));
                case "scenario" -> {
                    List<Object> protos = (List<Object>) c.getOrDefault("protocols", List.of("2"));
                    for (Object p : protos) {
                        int proto = Integer.parseInt((String) p);
                        String runCase = id + "@resp" + proto;
                        report(runCase, () -> new Run(runCase, proto, addr, null).steps(c));
                    }
                }
                case "guard" -> report(id, () -> guardCase(id, c));
                default -> report(id, () -> {
                    throw new Failure("unknown format " + format);
                });
            }
        }
    }

    interface Body {
        void run() throws Exception;
    }

    /** A case failed: the detail says where and why. */
    static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;

        Failure(String m) {
            super(m);
        }
    }

    private void report(String id, Body body) {
        String result = "pass";
        String detail = "";
        try {
            body.run();
        } catch (Failure e) {
            result = "fail";
            detail = e.getMessage();
        } catch (Throwable e) {
            result = "fail";
            detail = "runner exception: " + e;
        }
        if (result.equals("pass")) {
            passed++;
        } else {
            failed++;
        }
        out.println("{\"case\": " + Json.quote(id) + ", \"result\": " + Json.quote(result) + ", \"detail\": "
                + Json.quote(detail) + "}");
        out.flush();
    }

    // ---------------------------------------------------------------- wire vectors

    private void decodeCase(Map<String, Object> c) throws Failure {
        byte[] bytes = HexFormat.of().parseHex((String) c.get("hex"));
        ByteArrayInputStream in = new ByteArrayInputStream(bytes);
        Resp.Reader r = new Resp.Reader(in, true);
        Object v;
        try {
            v = r.read();
        } catch (EOFException e) {
            if (Boolean.TRUE.equals(c.get("incomplete"))) {
                return;
            }
            throw new Failure("decoder asked for more bytes: " + e.getMessage());
        } catch (IOException e) {
            if (Boolean.TRUE.equals(c.get("invalid"))) {
                return;
            }
            throw new Failure("decoder reported an error: " + e.getMessage());
        }
        if (Boolean.TRUE.equals(c.get("incomplete")) || Boolean.TRUE.equals(c.get("invalid"))) {
            throw new Failure("decoder returned a value " + describe(v) + " for bytes marked "
                    + (c.containsKey("incomplete") ? "incomplete" : "invalid"));
        }
        if (r.hasBuffered() || in.available() > 0) {
            throw new Failure("decoder did not consume every byte");
        }
        String why = compareModel(c.get("expect"), v, true);
        if (why != null) {
            throw new Failure(why + " (got " + describe(v) + ")");
        }
    }

    @SuppressWarnings("unchecked")
    private void encodeCase(Map<String, Object> c) throws Failure {
        List<Object> args = (List<Object>) c.get("args");
        Object[] a = new Object[args.size()];
        for (int i = 0; i < a.length; i++) {
            Object x = args.get(i);
            a[i] = x instanceof Map<?, ?> m ? HexFormat.of().parseHex((String) m.get("hex")) : x;
        }
        String got = HexFormat.of().formatHex(Resp.encode(a));
        if (!got.equals(c.get("hex"))) {
            throw new Failure("encoded " + got + ", expected " + c.get("hex"));
        }
    }

    // ---------------------------------------------------------------- the value model

    /** Compares a reply with a model value; returns why they differ, or null. */
    @SuppressWarnings("unchecked")
    static String compareModel(Object expectObj, Object v, boolean typedDecoder) {
        Map<String, Object> e = (Map<String, Object>) expectObj;
        String type = (String) e.get("type");
        switch (type) {
            case "nil":
                return v == null ? null : "expected nil";
            case "simple":
                if (v instanceof Resp.Simple s) {
                    return s.value().equals(e.get("value")) ? null : "simple string differs";
                }
                if (!typedDecoder && v instanceof String s) {
                    return s.equals(e.get("value")) ? null : "string differs";
                }
                return "expected a simple string";
            case "bulk": {
                byte[] b;
                if (v instanceof byte[] x) {
                    b = x;
                } else if (!typedDecoder && v instanceof String s) {
                    b = s.getBytes(StandardCharsets.UTF_8);
                } else {
                    return "expected a bulk string";
                }
                if (e.containsKey("hex")) {
                    return HexFormat.of().formatHex(b).equals(e.get("hex")) ? null : "bulk bytes differ";
                }
                String text = utf8(b);
                return e.get("value").equals(text) ? null : "bulk string differs";
            }
            case "verbatim":
                if (v instanceof Resp.Verbatim vb) {
                    return vb.format().equals(e.get("format")) && vb.value().equals(e.get("value")) ? null
                            : "verbatim string differs";
                }
                if (!typedDecoder && v instanceof String s) {
                    return s.equals(e.get("value")) ? null : "string differs";
                }
                return "expected a verbatim string";
            case "error":
                if (!(v instanceof RuvioServerException x)) {
                    return "expected an error";
                }
                if (!x.serverMessage().equals(e.get("text"))) {
                    return "error text differs";
                }
                if (e.containsKey("code") && !x.code().equals(e.get("code"))) {
                    return "error code differs: " + x.code();
                }
                return null;
            case "integer":
                return v instanceof Long l && l.toString().equals(e.get("value")) ? null : "expected integer "
                        + e.get("value");
            case "double": {
                if (!(v instanceof Double d)) {
                    return "expected a double";
                }
                String ev = (String) e.get("value");
                double want = switch (ev) {
                    case "inf" -> Double.POSITIVE_INFINITY;
                    case "-inf" -> Double.NEGATIVE_INFINITY;
                    case "nan" -> Double.NaN;
                    default -> Double.parseDouble(ev);
                };
                if (Double.isNaN(want)) {
                    return Double.isNaN(d) ? null : "expected NaN";
                }
                return d == want ? null : "double differs";
            }
            case "boolean":
                return e.get("value").equals(v) ? null : "boolean differs";
            case "bignumber":
                return v instanceof BigInteger bi && bi.toString().equals(e.get("value")) ? null : "bignumber differs";
            case "array":
            case "set":
            case "push": {
                List<Object> items;
                if (type.equals("array") && v instanceof List<?> l) {
                    items = (List<Object>) l;
                } else if (type.equals("set") && v instanceof Set<?> st) {
                    items = new ArrayList<>(st);
                } else if (type.equals("push") && v instanceof Push p) {
                    items = p.items();
                } else {
                    return "expected " + type;
                }
                List<Object> want = (List<Object>) e.get("items");
                if (want.size() != items.size()) {
                    return type + " length " + items.size() + ", expected " + want.size();
                }
                for (int i = 0; i < want.size(); i++) {
                    String why = compareModel(want.get(i), items.get(i), typedDecoder);
                    if (why != null) {
                        return type + " item " + i + ": " + why;
                    }
                }
                return null;
            }
            case "map": {
                if (!(v instanceof Map<?, ?> m)) {
                    return "expected a map";
                }
                List<Object> entries = (List<Object>) e.get("entries");
                if (entries.size() != m.size()) {
                    return "map size " + m.size() + ", expected " + entries.size();
                }
                int i = 0;
                for (Map.Entry<?, ?> en : m.entrySet()) {
                    List<Object> pair = (List<Object>) entries.get(i);
                    String why = compareModel(pair.get(0), en.getKey(), typedDecoder);
                    if (why == null) {
                        why = compareModel(pair.get(1), en.getValue(), typedDecoder);
                    }
                    if (why != null) {
                        return "map entry " + i + ": " + why;
                    }
                    i++;
                }
                return null;
            }
            default:
                return "unknown model type " + type;
        }
    }

    private static String utf8(byte[] b) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException ex) {
            return null;
        }
    }

    static String describe(Object v) {
        if (v == null) {
            return "nil";
        }
        if (v instanceof byte[] b) {
            String s = utf8(b);
            return "bulk " + (s != null ? Json.quote(s) : HexFormat.of().formatHex(b));
        }
        if (v instanceof RuvioServerException e) {
            return "error " + Json.quote(e.serverMessage());
        }
        if (v instanceof String s) {
            return Json.quote(s);
        }
        if (v instanceof LockInfo li) {
            return li.toString();
        }
        return v.getClass().getSimpleName() + " " + v;
    }

    // ---------------------------------------------------------------- scenarios

    /** One run of a scenario (or guard) case: its connections, saved values, async commands. */
    final class Run {
        final String caseRunId;
        final int proto;
        final String server;
        final ServerProcess own;
        final Map<String, RuvioClient> conns = new HashMap<>();
        final Map<String, String> saved = new HashMap<>();
        final Map<String, CompletableFuture<Object>> asyncs = new HashMap<>();
        final Map<String, Long> asyncSent = new HashMap<>();
        final Map<String, String> asyncConn = new HashMap<>();
        final Map<String, LockHandle> guards = new HashMap<>();
        final Map<String, Long> guardSent = new HashMap<>();
        final Map<String, Long> guardTtl = new HashMap<>();
        final Map<String, Long> guardLostAt = new java.util.concurrent.ConcurrentHashMap<>();
        final String prefix;

        Run(String caseRunId, int proto, String server, ServerProcess own) {
            this.caseRunId = caseRunId;
            this.proto = proto;
            this.server = server;
            this.own = own;
            this.prefix = "cf:" + runId + ":" + LANG + ":" + caseRunId + ":";
        }

        RuvioClient conn(String name) {
            return conns.computeIfAbsent(name, n -> {
                int colon = server.lastIndexOf(':');
                return RuvioClient.connect(ClientOptions.builder().host(server.substring(0, colon))
                        .port(Integer.parseInt(server.substring(colon + 1))).protocol(proto)
                        .commandTimeout(Duration.ofSeconds(60)).build());
            });
        }

        String subst(String a) {
            String s = a.replace("{p}", prefix);
            int i;
            while ((i = s.indexOf("{tok:")) >= 0) {
                int j = s.indexOf('}', i);
                String name = s.substring(i + 5, j);
                String val = saved.get(name);
                if (val == null) {
                    throw new IllegalStateException("no saved value " + name);
                }
                s = s.substring(0, i) + val + s.substring(j + 1);
            }
            return s;
        }

        @SuppressWarnings("unchecked")
        void steps(Map<String, Object> c) throws Failure {
            List<Object> steps = (List<Object>) c.get("steps");
            try {
                for (int i = 0; i < steps.size(); i++) {
                    Map<String, Object> st = (Map<String, Object>) steps.get(i);
                    try {
                        step(st);
                    } catch (Failure f) {
                        throw new Failure("step " + i + " (" + st.get("do") + "): " + f.getMessage());
                    } catch (RuntimeException e) {
                        throw new Failure("step " + i + " (" + st.get("do") + "): " + e);
                    }
                }
            } finally {
                guards.values().forEach(g -> {
                    try {
                        g.releaseAsync();
                    } catch (RuntimeException e) {
                        // ignore
                    }
                });
                conns.values().forEach(RuvioClient::close);
            }
        }

        @SuppressWarnings("unchecked")
        void step(Map<String, Object> st) throws Failure {
            String what = (String) st.get("do");
            switch (what) {
                case "command" -> {
                    List<Object> raw = (List<Object>) st.get("args");
                    List<String> args = new ArrayList<>();
                    for (Object a : raw) {
                        args.add(subst((String) a));
                    }
                    RuvioClient cl = conn((String) st.getOrDefault("conn", "a"));
                    boolean typed = Boolean.TRUE.equals(st.get("typed"));
                    if (st.containsKey("async")) {
                        String id = (String) st.get("async");
                        asyncSent.put(id, System.nanoTime());
                        asyncConn.put(id, (String) st.getOrDefault("conn", "a"));
                        asyncs.put(id, typed ? typedAsync(cl, args) : cl.async().command(args.toArray()));
                        return;
                    }
                    Map<String, Object> expect = (Map<String, Object>) st.get("expect");
                    if (st.containsKey("until_ms")) {
                        long deadline = System.nanoTime()
                                + TimeUnit.MILLISECONDS.toNanos(Long.parseLong((String) st.get("until_ms")));
                        while (true) {
                            Object v = issue(cl, args, typed);
                            String why = match(expect, v);
                            if (why == null) {
                                save(st, v);
                                return;
                            }
                            if (System.nanoTime() > deadline) {
                                throw new Failure(why + "; got " + describe(v) + " until the deadline");
                            }
                            sleepMs(20);
                        }
                    }
                    Object v = issue(cl, args, typed);
                    String why = match(expect, v);
                    if (why != null) {
                        throw new Failure(why + "; got " + describe(v));
                    }
                    save(st, v);
                }
                case "await" -> {
                    String id = (String) st.get("id");
                    CompletableFuture<Object> f = asyncs.get(id);
                    Map<String, Object> expect = (Map<String, Object>) st.get("expect");
                    if ("dropped".equals(expect.get("match"))) {
                        try {
                            Object v = f.get(30, TimeUnit.SECONDS);
                            throw new Failure("expected the connection to be dropped; got " + describe(v));
                        } catch (java.util.concurrent.TimeoutException e) {
                            throw new Failure("no reply and no connection loss within 30 s");
                        } catch (java.util.concurrent.ExecutionException e) {
                            Throwable t = Futures.cause(e);
                            if (!(t instanceof RuvioConnectionException)) {
                                throw new Failure("expected the connection to be dropped; got " + t);
                            }
                        } catch (InterruptedException e) {
                            throw new Failure("interrupted");
                        }
                        RuvioClient gone = conns.remove(asyncConn.get(id));
                        if (gone != null) {
                            gone.close();
                        }
                        return;
                    }
                    Object v;
                    try {
                        v = f.get(30, TimeUnit.SECONDS);
                    } catch (java.util.concurrent.TimeoutException e) {
                        throw new Failure("no reply within 30 s");
                    } catch (java.util.concurrent.ExecutionException e) {
                        Throwable t = Futures.cause(e);
                        if (t instanceof RuvioServerException s) {
                            v = s;
                        } else {
                            throw new Failure("async command failed: " + t);
                        }
                    } catch (InterruptedException e) {
                        throw new Failure("interrupted");
                    }
                    long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - asyncSent.get(id));
                    if (st.containsKey("min_elapsed_ms")) {
                        long min = Long.parseLong((String) st.get("min_elapsed_ms"));
                        // the reply was collected at or after its arrival; arrival is what matters
                        if (elapsedMs < min) {
                            throw new Failure("reply after " + elapsedMs + " ms, expected at least " + min);
                        }
                    }
                    String why = match(expect, v);
                    if (why != null) {
                        throw new Failure(why + "; got " + describe(v));
                    }
                    save(st, v);
                }
                case "sleep" -> sleepMs(Long.parseLong((String) st.get("ms")));
                case "close" -> {
                    RuvioClient cl = conns.remove((String) st.get("conn"));
                    if (cl != null) {
                        cl.close();
                    }
                }
                case "acquire" -> {
                    String g = (String) st.get("guard");
                    long ttl = Long.parseLong((String) st.get("ttl_ms"));
                    LockOptions o = LockOptions.defaults();
                    if (st.containsKey("max_hold_ms")) {
                        o.maxHold(Duration.ofMillis(Long.parseLong((String) st.get("max_hold_ms"))));
                    }
                    o.onLost(h -> guardLostAt.putIfAbsent(g, System.nanoTime()));
                    long sent = System.nanoTime();
                    LockHandle h = conn("guard:" + g).tryLock(subst((String) st.get("key")), Duration.ofMillis(ttl), o);
                    if (h == null) {
                        throw new Failure("the guard was not granted");
                    }
                    guards.put(g, h);
                    guardSent.put(g, sent);
                    guardTtl.put(g, ttl);
                    if (st.containsKey("save")) {
                        saved.put((String) st.get("save"), Long.toString(h.token()));
                    }
                }
                case "expect_held" -> {
                    LockHandle h = guards.get((String) st.get("guard"));
                    if (h.lost().isDone() || !h.isHeld()) {
                        throw new Failure("the guard reports loss (" + h.lossReason() + ")");
                    }
                }
                case "expect_lost" -> {
                    String g = (String) st.get("guard");
                    LockHandle h = guards.get(g);
                    long within = Long.parseLong((String) st.get("within_ms"));
                    try {
                        h.lost().get(within, TimeUnit.MILLISECONDS);
                    } catch (java.util.concurrent.TimeoutException e) {
                        throw new Failure("no loss signal within " + within + " ms");
                    } catch (Exception e) {
                        throw new Failure("loss future failed: " + e);
                    }
                    if (Boolean.TRUE.equals(st.get("before_deadline"))) {
                        Long at = guardLostAt.get(g);
                        long deadline = guardSent.get(g) + TimeUnit.MILLISECONDS.toNanos(guardTtl.get(g));
                        if (at == null || at >= deadline) {
                            throw new Failure("loss signalled "
                                    + (at == null ? "without a time" : TimeUnit.NANOSECONDS.toMillis(at - deadline)
                                    + " ms after") + " the deadline");
                        }
                    }
                }
                case "release" -> {
                    LockHandle h = guards.get((String) st.get("guard"));
                    boolean r;
                    try {
                        r = h.release();
                    } catch (RuntimeException e) {
                        throw new Failure("release raised " + e);
                    }
                    String why = match((Map<String, Object>) st.get("expect"), r ? 1L : 0L);
                    if (why != null) {
                        throw new Failure(why + "; got " + r);
                    }
                }
                case "sigstop" -> own.pause();
                case "sigcont" -> own.resume();
                default -> throw new Failure("unknown step " + what);
            }
        }

        void save(Map<String, Object> st, Object v) throws Failure {
            if (st.containsKey("save")) {
                if (!(v instanceof Long l)) {
                    throw new Failure("cannot save a non-integer reply " + describe(v));
                }
                saved.put((String) st.get("save"), l.toString());
            }
        }

        Object issue(RuvioClient cl, List<String> args, boolean typed) {
            try {
                if (typed) {
                    return Futures.await(typedAsync(cl, args));
                }
                return cl.command(args.toArray());
            } catch (RuvioServerException e) {
                return e;
            }
        }

        /** The typed lock methods, their results mapped back to the model (section 6 of the README). */
        CompletableFuture<Object> typedAsync(RuvioClient cl, List<String> a) {
            RuvioAsyncClient x = cl.async();
            String cmd = a.get(0).toUpperCase(java.util.Locale.ROOT);
            CompletableFuture<?> f = switch (cmd) {
                case "LEASE" -> a.size() >= 5
                        ? x.lease(a.get(1), Long.parseLong(a.get(2)), Long.parseLong(a.get(4)))
                        : x.lease(a.get(1), Long.parseLong(a.get(2)));
                case "SEMAPHORE" -> a.size() >= 6
                        ? x.semaphore(a.get(1), Integer.parseInt(a.get(2)), Long.parseLong(a.get(3)),
                        Long.parseLong(a.get(5)))
                        : x.semaphore(a.get(1), Integer.parseInt(a.get(2)), Long.parseLong(a.get(3)));
                case "RENEW" -> x.renew(a.get(1), Long.parseLong(a.get(2)), Long.parseLong(a.get(3)));
                case "RELEASE" -> x.release(a.get(1), Long.parseLong(a.get(2)));
                case "IFGT" -> a.size() >= 6
                        ? x.ifGt(a.get(1), Long.parseLong(a.get(2)), a.get(3), Long.parseLong(a.get(5)))
                        : x.ifGt(a.get(1), Long.parseLong(a.get(2)), a.get(3));
                case "LOCKINFO" -> x.lockInfo(a.get(1));
                default -> throw new IllegalArgumentException("no typed method for " + cmd);
            };
            return f.handle((v, e) -> {
                if (e != null) {
                    Throwable t = Futures.cause(e);
                    if (t instanceof RuvioServerException s) {
                        return s;
                    }
                    throw Futures.unwrap(t);
                }
                if (v instanceof Boolean b) {
                    return b ? 1L : 0L;
                }
                return v;
            });
        }

        /** Matches a reply (raw, or mapped from a typed call) against a matcher; returns why not, or null. */
        @SuppressWarnings("unchecked")
        String match(Map<String, Object> m, Object v) {
            String kind = (String) m.get("match");
            switch (kind) {
                case "int":
                    return v instanceof Long l && l.toString().equals(m.get("value")) ? null
                            : "expected integer " + m.get("value");
                case "int_between": {
                    if (!(v instanceof Long l)) {
                        return "expected an integer";
                    }
                    return l >= Long.parseLong((String) m.get("min")) && l <= Long.parseLong((String) m.get("max"))
                            ? null : "expected an integer in [" + m.get("min") + ", " + m.get("max") + "]";
                }
                case "nil":
                    return v == null ? null : "expected nil";
                case "token":
                    return v instanceof Long l && l > 0 ? null : "expected a token";
                case "token_gt": {
                    String than = saved.get((String) m.get("than"));
                    return v instanceof Long l && l > Long.parseLong(than) ? null : "expected a token > " + than;
                }
                case "token_eq": {
                    String eq = saved.get((String) m.get("name"));
                    return v instanceof Long l && l.toString().equals(eq) ? null : "expected token " + eq;
                }
                case "simple":
                case "bulk":
                    // the public API folds simple and bulk strings into String (the wire vectors check the decoder)
                    return v instanceof String s && s.equals(m.get("value")) ? null
                            : "expected " + kind + " " + Json.quote((String) m.get("value"));
                case "error":
                    return v instanceof RuvioServerException e && e.serverMessage().equals(m.get("text")) ? null
                            : "expected error " + Json.quote((String) m.get("text"));
                case "value":
                    return compareModel(m.get("value"), v, false);
                case "any":
                    return v instanceof RuvioServerException ? "expected a non-error reply" : null;
                case "lockinfo":
                    return matchLockInfo(m, v);
                default:
                    return "unknown matcher " + kind;
            }
        }

        @SuppressWarnings("unchecked")
        String matchLockInfo(Map<String, Object> m, Object v) {
            String kind;
            long limit;
            long waiters;
            List<long[]> holders = new ArrayList<>();
            if (v instanceof LockInfo li) {
                kind = li.kind();
                limit = li.limit();
                waiters = li.waiters();
                for (LockInfo.Holder h : li.holders()) {
                    holders.add(new long[] {h.token(), h.remainingMs()});
                }
            } else if (v instanceof Map<?, ?> || v instanceof List<?>) {
                Map<Object, Object> map = Connection.asMap(v);
                List<Object> keys = new ArrayList<>(map.keySet());
                if (!keys.equals(List.of("kind", "limit", "holders", "waiters"))) {
                    return "LOCKINFO fields are " + keys;
                }
                if (!(map.get("kind") instanceof String k) || !(map.get("limit") instanceof Long lim)
                        || !(map.get("waiters") instanceof Long w) || !(map.get("holders") instanceof List<?> hs)) {
                    return "LOCKINFO field types are wrong: " + map;
                }
                kind = k;
                limit = lim;
                waiters = w;
                for (Object h : hs) {
                    Map<Object, Object> hm = Connection.asMap(h);
                    if (!new ArrayList<>(hm.keySet()).equals(List.of("token", "remaining_ms"))) {
                        return "holder fields are " + hm.keySet();
                    }
                    holders.add(new long[] {(Long) hm.get("token"), (Long) hm.get("remaining_ms")});
                }
            } else {
                return "expected a LOCKINFO reply";
            }
            if (!kind.equals(m.get("kind"))) {
                return "kind " + kind + ", expected " + m.get("kind");
            }
            if (limit != Long.parseLong((String) m.get("limit"))) {
                return "limit " + limit + ", expected " + m.get("limit");
            }
            if (waiters != Long.parseLong((String) m.get("waiters"))) {
                return "waiters " + waiters + ", expected " + m.get("waiters");
            }
            List<Object> want = (List<Object>) m.get("holders");
            if (want.size() != holders.size()) {
                return holders.size() + " holders, expected " + want.size();
            }
            for (int i = 0; i < want.size(); i++) {
                Map<String, Object> w = (Map<String, Object>) want.get(i);
                String tok = saved.get((String) w.get("token"));
                if (tok == null || holders.get(i)[0] != Long.parseLong(tok)) {
                    return "holder " + i + " token " + holders.get(i)[0] + ", expected " + tok;
                }
                long rem = holders.get(i)[1];
                if (w.containsKey("remaining_ms_min") && rem < Long.parseLong((String) w.get("remaining_ms_min"))
                        || w.containsKey("remaining_ms_max")
                        && rem > Long.parseLong((String) w.get("remaining_ms_max"))) {
                    return "holder " + i + " remaining_ms " + rem + " outside [" + w.get("remaining_ms_min") + ", "
                            + w.get("remaining_ms_max") + "]";
                }
            }
            return null;
        }
    }

    private void guardCase(String id, Map<String, Object> c) throws Exception {
        if ("own".equals(c.get("server"))) {
            try (ServerProcess own = ServerProcess.ruvio()) {
                new Run(id, 2, own.addr(), own).steps(c);
            }
        } else {
            new Run(id, 2, addr, null).steps(c);
        }
    }

    private static void sleepMs(long ms) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        long left;
        while ((left = deadline - System.nanoTime()) > 0) {
            try {
                TimeUnit.NANOSECONDS.sleep(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

}
