package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The RESP codec offline (the conformance corpus's wire vectors cover it in full through ConformanceRunner). */
class RespTest {
    static Object decode(String wire) throws IOException {
        return new Resp.Reader(new ByteArrayInputStream(wire.getBytes(StandardCharsets.UTF_8))).read();
    }

    @Test
    void decodesEveryType() throws IOException {
        assertEquals("OK", decode("+OK\r\n"));
        assertEquals(247950100148224L, decode(":247950100148224\r\n"));
        assertEquals(Long.MIN_VALUE, decode(":-9223372036854775808\r\n"));
        assertEquals("ab\r\ncd", decode("$6\r\nab\r\ncd\r\n"));
        assertNull(decode("$-1\r\n"));
        assertNull(decode("*-1\r\n"));
        assertNull(decode("_\r\n"));
        assertEquals(List.of(1L, "x", List.of()), decode("*3\r\n:1\r\n$1\r\nx\r\n*0\r\n"));
        assertEquals(Map.of("a", 1L), decode("%1\r\n+a\r\n:1\r\n"));
        assertEquals(Set.of("a"), decode("~1\r\n+a\r\n"));
        assertEquals(1.5, decode(",1.5\r\n"));
        assertEquals(Double.NEGATIVE_INFINITY, decode(",-inf\r\n"));
        assertEquals(Boolean.TRUE, decode("#t\r\n"));
        assertEquals(new BigInteger("3492890328409238509324850943850943825024385"),
                decode("(3492890328409238509324850943850943825024385\r\n"));
        assertEquals("Some string", decode("=15\r\ntxt:Some string\r\n"));
        assertEquals(new Push(List.of("message", "ch", "hi")), decode(">3\r\n+message\r\n+ch\r\n+hi\r\n"));
        assertEquals("after", decode("|1\r\n+key\r\n+val\r\n+after\r\n"), "attributes are dropped");
        RuvioServerException e = assertInstanceOf(RuvioServerException.class,
                decode("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"));
        assertEquals("WRONGTYPE", e.code());
        assertEquals("ERR", ((RuvioServerException) decode("-no code here\r\n")).code());
    }

    @Test
    void incompleteAndInvalidInput() {
        assertThrows(EOFException.class, () -> decode("$5\r\nhel"));
        assertThrows(EOFException.class, () -> decode("*2\r\n:1\r\n"));
        assertThrows(EOFException.class, () -> decode("+OK"));
        for (String bad : new String[] {"@x\r\n", ":12a\r\n", "$x\r\nfoo\r\n", "#x\r\n", ",abc\r\n", "+OK\n",
                "$3\r\nfoobar\r\n", "$-2\r\n"}) {
            IOException ex = assertThrows(IOException.class, () -> decode(bad), bad);
            assertTrue(!(ex instanceof EOFException), "a protocol error, not a request for more bytes: " + bad);
        }
    }

    @Test
    void encodesArraysOfBulkStrings() {
        assertArrayEquals("*3\r\n$5\r\nLEASE\r\n$5\r\njob:1\r\n$5\r\n30000\r\n".getBytes(StandardCharsets.UTF_8),
                Resp.encode(new Object[] {"LEASE", "job:1", 30000}));
        assertArrayEquals("*2\r\n$3\r\nGET\r\n$12\r\nзамок:1\r\n".getBytes(StandardCharsets.UTF_8),
                Resp.encode(new Object[] {"GET", "замок:1"}), "lengths count UTF-8 bytes");
        assertArrayEquals(new byte[] {'*', '1', '\r', '\n', '$', '2', '\r', '\n', 0, (byte) 0xff, '\r', '\n'},
                Resp.encode(new Object[] {new byte[] {0, (byte) 0xff}}));
    }

    static Object decodeBinary(byte[] wire) throws IOException {
        return new Resp.Reader(new ByteArrayInputStream(wire)).read(true);
    }

    @Test
    void binaryModeKeepsBulkBytes() throws IOException {
        byte[] payload = {(byte) 0xff, 0, '\r', '\n', (byte) 0xc3};
        byte[] head = "*3\r\n$5\r\n".getBytes(StandardCharsets.US_ASCII);
        byte[] tail = "\r\n=9\r\ntxt:\u00ff\u00ee\u00dd\u00cc\u00bb\r\n+OK\r\n".getBytes(StandardCharsets.ISO_8859_1);
        byte[] wire = new byte[head.length + payload.length + tail.length];
        System.arraycopy(head, 0, wire, 0, head.length);
        System.arraycopy(payload, 0, wire, head.length, payload.length);
        System.arraycopy(tail, 0, wire, head.length + payload.length, tail.length);
        List<?> l = (List<?>) decodeBinary(wire);
        assertArrayEquals(payload, (byte[]) l.get(0));
        assertArrayEquals(new byte[] {(byte) 0xff, (byte) 0xee, (byte) 0xdd, (byte) 0xcc, (byte) 0xbb},
                (byte[]) l.get(1), "verbatim: the bytes without the format prefix");
        assertEquals("OK", l.get(2), "simple strings stay String");
        // The same reader decodes the next reply as text again.
        Resp.Reader r = new Resp.Reader(new ByteArrayInputStream("$1\r\nx\r\n$1\r\ny\r\n".getBytes(
                StandardCharsets.US_ASCII)));
        assertArrayEquals(new byte[] {'x'}, (byte[]) r.read(true));
        assertEquals("y", r.read());
    }

    @Test
    void toTextTurnsBytesBackIntoStrings() throws IOException {
        Object push = decodeBinary(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n".getBytes(
                StandardCharsets.US_ASCII));
        assertEquals(new Push(List.of("message", "ch", "hi")), Resp.toText(push));
        assertEquals(Map.of("k", List.of("v", 1L)), Resp.toText(decodeBinary(
                "%1\r\n$1\r\nk\r\n*2\r\n$1\r\nv\r\n:1\r\n".getBytes(StandardCharsets.US_ASCII))));
    }
}
