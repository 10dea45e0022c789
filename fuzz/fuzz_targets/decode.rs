//! Fuzzes `Decoder`: any bytes, read in pieces of any size, with several caps.
//!
//! Input: byte 0 picks the cap, byte 1 the read size, the rest is the stream.
//! Checks: no panic; the same results whatever the read size; the body buffer never exceeds the
//! cap; `decode` always consumes 1..=len bytes or asks for ≥ 1 more; every decoded frame
//! re-encodes to bytes that decode to one frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use review_agent_gateway::protocol::codec::{Decoded, Decoder, INBOUND_FRAME_CAP, encode};

fuzz_target!(|data: &[u8]| {
    let [cap_pick, step_pick, stream @ ..] = data else {
        return;
    };
    let cap = match cap_pick % 4 {
        0 => 0,
        1 => 16,
        2 => 300,
        _ => INBOUND_FRAME_CAP,
    };
    let step = usize::from(*step_pick % 17) + 1;

    let whole: Vec<_> = Decoder::new(cap).frames(stream).collect();

    let mut decoder = Decoder::new(cap);
    let mut pieces = Vec::new();
    for piece in stream.chunks(step) {
        pieces.extend(decoder.frames(piece));
        assert!(decoder.buffer_capacity() <= cap as usize);
    }
    assert_eq!(whole, pieces, "read size {step}");

    let mut decoder = Decoder::new(cap);
    let mut rest = stream;
    while !rest.is_empty() {
        match decoder.decode(rest) {
            Decoded::Complete { consumed, .. } => {
                assert!((1..=rest.len()).contains(&consumed));
                rest = &rest[consumed..];
            }
            Decoded::Incomplete { needed } => {
                // All input taken: either inside a frame, or at a boundary (after an over-cap
                // frame's last skipped byte) waiting for the next 4-byte prefix.
                assert!(needed >= 1);
                assert!(decoder.finish().is_err() || (decoder.is_idle() && needed == 4));
                break;
            }
        }
    }

    for frame in whole.iter().flatten() {
        let bytes = encode(frame).expect("a decoded frame is under 4 GiB");
        let again: Vec<_> = Decoder::default().frames(&bytes).collect();
        assert!(matches!(again.as_slice(), [Ok(_)]), "{frame:?} → {again:?}");
    }
});
