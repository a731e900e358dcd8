//! Wire vectors (README section 2): decoding through the decoder the client reads replies with, and encoding
//! through the client's real write path (bytes captured by a local socket).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use ruvio_client::Client;
use ruvio_protocol::{decode_value, DecodeLimits};
use serde_json::Value as Json;

use crate::matchers::{field, hex_decode, model_eq, show, str_field};
use crate::Outcome;

/// The vector's bytes; when it also has `text`, the two must agree (the corpus cannot contradict itself).
fn vector_bytes(case: &Json) -> Result<Vec<u8>, String> {
    let bytes = hex_decode(str_field(case, "hex")?)?;
    if let Some(text) = case.get("text").and_then(Json::as_str) {
        if text.as_bytes() != bytes.as_slice() {
            return Err("corpus: text and hex disagree".to_string());
        }
    }
    Ok(bytes)
}

/// `wire/decode.json`: the client's reply decoder (`ruvio_protocol::decode_value`, which its connections read
/// every reply with) must produce the value, ask for more, or reject, as the vector says.
pub fn decode(case: &Json) -> Outcome {
    let bytes = vector_bytes(case)?;
    let result = decode_value(&bytes, DecodeLimits::default());
    if case.get("incomplete").and_then(Json::as_bool) == Some(true) {
        return match result {
            Ok(None) => Ok(()),
            Ok(Some((v, _))) => Err(format!("decoded {} from an incomplete value", show(&v))),
            Err(e) => Err(format!("rejected a valid prefix: {e}")),
        };
    }
    if case.get("invalid").and_then(Json::as_bool) == Some(true) {
        return match result {
            Err(_) => Ok(()),
            Ok(None) => Err("asked for more bytes instead of rejecting malformed input".to_string()),
            Ok(Some((v, _))) => Err(format!("accepted malformed input as {}", show(&v))),
        };
    }
    let expect = field(case, "expect")?;
    match result {
        Ok(Some((v, used))) if used == bytes.len() => model_eq(expect, &v),
        Ok(Some((v, used))) => Err(format!("decoded {} from {used} of {} bytes", show(&v), bytes.len())),
        Ok(None) => Err("asked for more bytes; the vector is one complete value".to_string()),
        Err(e) => Err(format!("rejected: {e}")),
    }
}

fn arg_bytes(a: &Json) -> Result<Vec<u8>, String> {
    match a {
        Json::String(s) => Ok(s.as_bytes().to_vec()),
        Json::Object(_) => hex_decode(str_field(a, "hex")?),
        other => Err(format!("corpus: argument {other} is neither a string nor {{\"hex\": ...}}")),
    }
}

/// `wire/encode.json`: the client sends `args` with its generic command API to a local socket, which captures
/// the bytes of one request and answers `+OK`.
pub fn encode(case: &Json) -> Outcome {
    let want = vector_bytes(case)?;
    let args: Vec<Vec<u8>> =
        field(case, "args")?.as_array().ok_or("corpus: args is not an array")?.iter().map(arg_bytes).collect::<Result<_, _>>()?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let sink = thread::spawn(move || -> Result<Vec<u8>, String> {
        let (mut s, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
        s.set_read_timeout(Some(Duration::from_millis(200))).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        // Read until one whole RESP value has arrived, then a little longer to catch anything sent after it.
        let mut complete_at: Option<Instant> = None;
        loop {
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(format!("read: {e}")),
            }
            if complete_at.is_none() && matches!(decode_value(&got, DecodeLimits::default()), Ok(Some(_))) {
                complete_at = Some(Instant::now());
            }
            if complete_at.is_some_and(|t| t.elapsed() > Duration::from_millis(100)) || Instant::now() > deadline {
                break;
            }
        }
        let _ = s.write_all(b"+OK\r\n");
        Ok(got)
    });
    let mut client = Client::builder("127.0.0.1", port)
        .command_timeout(Some(Duration::from_secs(15)))
        .connect()
        .map_err(|e| format!("connect to the capture socket: {e}"))?;
    let reply = client.command(&args);
    let got = sink.join().map_err(|_| "capture thread panicked".to_string())??;
    reply.map_err(|e| format!("the client failed: {e}"))?;
    if got == want {
        Ok(())
    } else {
        Err(format!("sent {:?}, expected {:?}", String::from_utf8_lossy(&got), String::from_utf8_lossy(&want)))
    }
}
