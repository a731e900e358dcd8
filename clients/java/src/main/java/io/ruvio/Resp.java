package io.ruvio;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The RESP2/RESP3 codec: encodes commands as arrays of bulk strings and decodes replies into Java values.
 *
 * <p>Decoded types: simple and bulk strings and verbatim strings become {@link String} (UTF-8; verbatim without its
 * format prefix), integers {@link Long}, nulls {@code null}, arrays {@link List}, maps {@link LinkedHashMap}, sets
 * {@link LinkedHashSet}, doubles {@link Double}, booleans {@link Boolean}, big numbers {@link BigInteger}, pushes
 * {@link Push}, error replies {@link RuvioServerException} (as a value; the caller decides whether to throw).
 * Attributes are read and dropped.
 */
final class Resp {
    private Resp() {
    }

    /** Encodes one command. Arguments may be {@link String}, {@code byte[]}, or anything else (via toString()). */
    static void encode(ByteArrayOutputStream out, Object[] args) {
        writeHeader(out, '*', args.length);
        for (Object a : args) {
            byte[] b = toBytes(a);
            writeHeader(out, '$', b.length);
            out.write(b, 0, b.length);
            out.write('\r');
            out.write('\n');
        }
    }

    static byte[] encode(Object[] args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(64);
        encode(out, args);
        return out.toByteArray();
    }

    static byte[] toBytes(Object a) {
        if (a instanceof byte[] b) {
            return b;
        }
        if (a == null) {
            throw new IllegalArgumentException("a command argument is null");
        }
        return a.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static void writeHeader(ByteArrayOutputStream out, char kind, int n) {
        out.write(kind);
        byte[] d = Integer.toString(n).getBytes(StandardCharsets.US_ASCII);
        out.write(d, 0, d.length);
        out.write('\r');
        out.write('\n');
    }

    /** A streaming reader of replies from an input stream, with its own buffer. Not thread-safe. */
    static final class Reader {
        private final InputStream in;
        private final boolean typed;
        /** Set for the duration of one {@link #read(boolean)} call. */
        private boolean binary;
        private final byte[] buf = new byte[16 * 1024];
        private int pos;
        private int end;

        Reader(InputStream in) {
            this(in, false);
        }

        /**
         * A reader; {@code typed} keeps the distinctions the public API folds away: simple strings as
         * {@link Simple}, bulk strings as {@code byte[]}, verbatim strings as {@link Verbatim}.
         */
        Reader(InputStream in, boolean typed) {
            this.in = in;
            this.typed = typed;
        }

        /** Whether bytes that were read from the stream are still unconsumed in the buffer. */
        boolean hasBuffered() {
            return pos < end;
        }

        /**
         * Reads one complete reply; throws EOFException when the stream ends before the reply does, and
         * IOException("protocol error ...") on malformed input.
         */
        Object read() throws IOException {
            return read(false);
        }

        /**
         * Reads one complete reply; with {@code binary}, bulk and verbatim strings become {@code byte[]} (verbatim
         * without its format prefix) instead of UTF-8 text. Ignored by a {@code typed} reader.
         */
        Object read(boolean binary) throws IOException {
            this.binary = binary && !typed;
            try {
                return readValue();
            } catch (NumberFormatException e) {
                throw new IOException("protocol error: " + e.getMessage(), e);
            } finally {
                this.binary = false;
            }
        }

        /** Blocks until at least one byte of the next reply is buffered (EOFException when the stream ends). */
        void awaitInput() throws IOException {
            if (pos == end && !fill()) {
                throw new EOFException("connection closed by the server");
            }
        }

        private Object readValue() throws IOException {
            int kind = readByte();
            switch (kind) {
                case '+':
                    return typed ? new Simple(readLine()) : readLine();
                case '-':
                    return new RuvioServerException(readLine());
                case ':':
                    return parseLong(readLine());
                case '$': {
                    long n = parseLong(readLine());
                    if (n < -1) {
                        throw new IOException("protocol error: invalid bulk length " + n);
                    }
                    if (n < 0) {
                        return null;
                    }
                    byte[] b = readExact((int) n);
                    return typed || binary ? b : new String(b, StandardCharsets.UTF_8);
                }
                case '!': {
                    long n = parseLong(readLine());
                    return new RuvioServerException(new String(readExact((int) n), StandardCharsets.UTF_8));
                }
                case '=': {
                    long n = parseLong(readLine());
                    byte[] raw = readExact((int) n);
                    if (binary) {
                        return raw.length >= 4 && raw[3] == ':' ? java.util.Arrays.copyOfRange(raw, 4, raw.length)
                                : raw;
                    }
                    String s = new String(raw, StandardCharsets.UTF_8);
                    if (typed) {
                        return s.length() >= 4 && s.charAt(3) == ':' ? new Verbatim(s.substring(0, 3), s.substring(4))
                                : new Verbatim("", s);
                    }
                    return s.length() >= 4 && s.charAt(3) == ':' ? s.substring(4) : s;
                }
                case '*': {
                    long n = parseLong(readLine());
                    if (n < -1) {
                        throw new IOException("protocol error: invalid array length " + n);
                    }
                    return n < 0 ? null : readList((int) n);
                }
                case '>':
                    return new Push(readList((int) parseLong(readLine())));
                case '~': {
                    int n = (int) parseLong(readLine());
                    Set<Object> s = new LinkedHashSet<>();
                    for (int i = 0; i < n; i++) {
                        s.add(readValue());
                    }
                    return s;
                }
                case '%':
                    return readMap((int) parseLong(readLine()));
                case '|':
                    readMap((int) parseLong(readLine()));
                    return readValue();
                case '_':
                    readLine();
                    return null;
                case '#': {
                    String s = readLine();
                    if (!"t".equals(s) && !"f".equals(s)) {
                        throw new IOException("protocol error: invalid boolean " + s);
                    }
                    return "t".equals(s);
                }
                case ',': {
                    String s = readLine();
                    switch (s) {
                        case "inf":
                            return Double.POSITIVE_INFINITY;
                        case "-inf":
                            return Double.NEGATIVE_INFINITY;
                        case "nan":
                            return Double.NaN;
                        default:
                            return Double.parseDouble(s);
                    }
                }
                case '(':
                    return new BigInteger(readLine());
                default:
                    throw new IOException("protocol error: unexpected reply type byte " + kind);
            }
        }

        private List<Object> readList(int n) throws IOException {
            List<Object> l = new ArrayList<>(Math.max(0, Math.min(n, 1024)));
            for (int i = 0; i < n; i++) {
                l.add(readValue());
            }
            return l;
        }

        private Map<Object, Object> readMap(int n) throws IOException {
            Map<Object, Object> m = new LinkedHashMap<>();
            for (int i = 0; i < n; i++) {
                Object k = readValue();
                m.put(k, readValue());
            }
            return m;
        }

        private int readByte() throws IOException {
            if (pos == end && !fill()) {
                throw new EOFException("connection closed by the server");
            }
            return buf[pos++] & 0xff;
        }

        private boolean fill() throws IOException {
            int n = in.read(buf, 0, buf.length);
            if (n <= 0) {
                return false;
            }
            pos = 0;
            end = n;
            return true;
        }

        private String readLine() throws IOException {
            ByteArrayOutputStream line = null;
            while (true) {
                for (int i = pos; i < end; i++) {
                    if (buf[i] == '\n') {
                        boolean cr = i > pos ? buf[i - 1] == '\r'
                                : line != null && line.size() > 0 && line.toByteArray()[line.size() - 1] == '\r';
                        if (!cr) {
                            throw new IOException("protocol error: a line ended without CR LF");
                        }
                        int stop = i > pos ? i - 1 : i;
                        String s;
                        if (line == null) {
                            s = new String(buf, pos, stop - pos, StandardCharsets.UTF_8);
                        } else {
                            line.write(buf, pos, i - pos);
                            byte[] all = line.toByteArray();
                            int len = all.length >= 1 && all[all.length - 1] == '\r' ? all.length - 1 : all.length;
                            s = new String(all, 0, len, StandardCharsets.UTF_8);
                        }
                        pos = i + 1;
                        return s;
                    }
                }
                if (line == null) {
                    line = new ByteArrayOutputStream();
                }
                line.write(buf, pos, end - pos);
                pos = end;
                if (!fill()) {
                    throw new EOFException("connection closed by the server in the middle of a reply");
                }
            }
        }

        private byte[] readExact(int n) throws IOException {
            byte[] out = new byte[n];
            int got = 0;
            while (got < n) {
                if (pos == end && !fill()) {
                    throw new EOFException("connection closed by the server in the middle of a reply");
                }
                int k = Math.min(n - got, end - pos);
                System.arraycopy(buf, pos, out, got, k);
                pos += k;
                got += k;
            }
            // the CRLF after the payload
            if (readByte() != '\r' || readByte() != '\n') {
                throw new IOException("protocol error: a bulk payload is not followed by CR LF");
            }
            return out;
        }

        private static long parseLong(String s) throws IOException {
            try {
                return Long.parseLong(s);
            } catch (NumberFormatException e) {
                throw new IOException("protocol error: not an integer: " + s, e);
            }
        }
    }

    /**
     * Turns the {@code byte[]} in a reply read in binary mode back into UTF-8 {@link String}s (recursively), as a text
     * read would have decoded them.
     */
    static Object toText(Object v) {
        if (v instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        if (v instanceof Push p) {
            return new Push(toTextList(p.items()));
        }
        if (v instanceof List<?> l) {
            return toTextList(l);
        }
        if (v instanceof Set<?> set) {
            Set<Object> out = new LinkedHashSet<>();
            set.forEach(x -> out.add(toText(x)));
            return out;
        }
        if (v instanceof Map<?, ?> m) {
            Map<Object, Object> out = new LinkedHashMap<>();
            m.forEach((k, x) -> out.put(toText(k), toText(x)));
            return out;
        }
        return v;
    }

    private static List<Object> toTextList(List<?> l) {
        List<Object> out = new ArrayList<>(l.size());
        l.forEach(x -> out.add(toText(x)));
        return out;
    }

    /** A simple string, as the typed reader returns it. */
    record Simple(String value) {
    }

    /** A verbatim string with its format, as the typed reader returns it. */
    record Verbatim(String format, String value) {
    }

    /** Writes bytes and flushes. */
    static void writeAll(OutputStream out, byte[] b) throws IOException {
        out.write(b);
        out.flush();
    }
}
