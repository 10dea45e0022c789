//! Fuzzes `encode_chunked` + `Decoder` + `Reassembler`: any text, any cap from 128 to 1151.
//!
//! Input: bytes 0–1 pick the cap, the rest (lossy UTF-8) is the text of an event frame.
//! Checks: every message's JSON is within the cap and its prefix is its length; the messages
//! decode and reassemble to the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use review_agent_gateway::protocol::codec::{Decoder, Reassembler, encode_chunked};
use review_agent_gateway::protocol::{EventFrame, Frame, FrameId};

fuzz_target!(|data: &[u8]| {
    let [a, b, text @ ..] = data else {
        return;
    };
    let cap = 128 + (usize::from(*a) << 8 | usize::from(*b)) % 1024;
    let frame = Frame::Event(EventFrame {
        id: FrameId::Text("req-1".to_owned()),
        event: serde_json::json!({"type": "text.delta", "text": String::from_utf8_lossy(text)}),
    });
    let messages = encode_chunked(&frame, cap).expect("a 128-byte cap carries a chunk");
    let mut decoder = Decoder::default();
    let mut reassembler = Reassembler::default();
    let mut out = Vec::new();
    for message in &messages {
        assert!(message.len() - 4 <= cap, "{} > {cap}", message.len() - 4);
        for decoded in decoder.frames(message) {
            let decoded = decoded.expect("an encoded chunk decodes");
            if let Some(whole) = reassembler.push(decoded).expect("chunks reassemble") {
                out.push(whole);
            }
        }
    }
    assert!(decoder.is_idle() && reassembler.is_idle());
    assert_eq!(out, vec![frame]);
});
