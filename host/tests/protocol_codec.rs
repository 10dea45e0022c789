//! The native-messaging codec (DESIGN §4, `protocol::codec`): framing whatever the read
//! boundaries, the size caps, bad frames that leave the stream usable, and chunking that
//! round-trips through the reassembler with every chunk within the cap.

use byteorder::{ByteOrder, NativeEndian};
use review_agent_gateway::error::{GatewayError, codes};
use review_agent_gateway::protocol::codec::{
    Decoded, Decoder, EncodeError, FrameError, INBOUND_FRAME_CAP, LENGTH_PREFIX_BYTES,
    OUTBOUND_FRAME_CAP, ReassembleError, Reassembler, encode, encode_chunked, encode_raw,
    escaped_len, frame_json,
};
use review_agent_gateway::protocol::{
    ChunkFrame, ErrorFrame, ErrorObject, EventFrame, Frame, FrameId, HelloFrame, IdFrame,
    RequestFrame,
};
use serde_json::json;

// === helpers ===

type Results = Vec<Result<Frame, FrameError>>;

/// Decodes `stream` delivered as reads ending at `cuts` (ascending offsets), then the rest.
fn decode_reads(decoder: &mut Decoder, stream: &[u8], cuts: &[usize]) -> Results {
    let mut out = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain([stream.len()].iter()) {
        out.extend(decoder.frames(&stream[start..cut]));
        start = cut;
    }
    out
}

/// Decodes `stream` in reads of `size` bytes.
fn decode_in_reads_of(stream: &[u8], size: usize) -> Results {
    let mut decoder = Decoder::default();
    let out = stream
        .chunks(size)
        .flat_map(|read| decoder.frames(read).collect::<Vec<_>>())
        .collect();
    assert_eq!(decoder.finish(), Ok(()), "read size {size}");
    out
}

fn ok(frames: &[Frame]) -> Results {
    frames.iter().cloned().map(Ok).collect()
}

fn event(id: &str, text: &str) -> Frame {
    Frame::Event(EventFrame {
        id: FrameId::Text(id.to_owned()),
        event: json!({"type": "text.delta", "runId": "run_1", "text": text}),
    })
}

/// An event frame whose JSON is exactly `len` bytes (padding with ASCII `x`).
fn event_of_json_len(len: usize) -> Frame {
    let base = frame_json(&event("r1", "")).len();
    let frame = event("r1", &"x".repeat(len - base));
    assert_eq!(frame_json(&frame).len(), len);
    frame
}

fn stream_of(frames: &[Frame]) -> Vec<u8> {
    frames
        .iter()
        .flat_map(|f| encode(f).expect("encodes"))
        .collect()
}

/// A few frames of every direction, with non-ASCII text and escapes.
fn sample_frames() -> Vec<Frame> {
    vec![
        Frame::Hello(HelloFrame {
            protocol_versions: Some(vec!["1.0".to_owned()]),
            ..HelloFrame::default()
        }),
        Frame::Request(RequestFrame {
            id: FrameId::Number(7),
            method: "POST".to_owned(),
            path: "/v1/reviews".to_owned(),
            body: Some(json!({"title": "Größe prüfen — 😀", "q": "a\"b\\c\n"})),
        }),
        event("r1", "naïve café ✓"),
        Frame::End(IdFrame {
            id: FrameId::Text("r1".to_owned()),
        }),
        Frame::Cancel(IdFrame {
            id: FrameId::Number(0),
        }),
    ]
}

/// A deterministic PRNG (SplitMix64), so the random tests repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Text mixing ASCII, JSON escapes, control characters and 2-, 3- and 4-byte characters.
    fn text(&mut self, max_chars: usize) -> String {
        const PALETTE: &[char] = &[
            'a', 'Z', ' ', '"', '\\', '/', '\n', '\t', '\r', '\u{0}', '\u{1}', '\u{1F}', '\u{7F}',
            'é', 'ß', '€', '\u{2028}', '😀', '𝄞', '{', '}',
        ];
        let len = self.below(max_chars + 1);
        (0..len)
            .map(|_| PALETTE[self.below(PALETTE.len())])
            .collect()
    }
}

// === framing across read boundaries ===

#[test]
fn every_read_split_gives_the_same_frames() {
    let frames = sample_frames();
    let stream = stream_of(&frames);
    let expected = ok(&frames);

    // One read, and every read size (1 = byte by byte, covering prefixes split across reads).
    for size in 1..=stream.len() {
        assert_eq!(decode_in_reads_of(&stream, size), expected, "size {size}");
    }
    // Every single cut point and every pair of cut points.
    for i in 0..=stream.len() {
        assert_eq!(
            decode_reads(&mut Decoder::default(), &stream, &[i]),
            expected,
            "cut {i}"
        );
        for j in (i..=stream.len()).step_by(3) {
            assert_eq!(
                decode_reads(&mut Decoder::default(), &stream, &[i, j]),
                expected,
                "cuts {i}, {j}"
            );
        }
    }
}

#[test]
fn decode_reports_consumed_and_needed() {
    let first = encode(&sample_frames()[2]).expect("encodes");
    let second = encode(&sample_frames()[3]).expect("encodes");
    let both = [first.clone(), second.clone()].concat();
    let mut decoder = Decoder::default();

    assert_eq!(decoder.decode(&[]), Decoded::Incomplete { needed: 4 });
    assert_eq!(
        decoder.decode(&both[..3]),
        Decoded::Incomplete { needed: 1 }
    );
    let body_len = first.len() - LENGTH_PREFIX_BYTES;
    assert_eq!(
        decoder.decode(&both[3..5]),
        Decoded::Incomplete {
            needed: body_len - 1
        }
    );
    assert!(!decoder.is_idle());
    assert_eq!(
        decoder.finish(),
        Err(FrameError::Truncated {
            missing: body_len - 1
        })
    );
    // The rest of the first frame and all of the second in one read: the first completes,
    // using only its own bytes.
    let rest = &both[5..];
    let Decoded::Complete { frame, consumed } = decoder.decode(rest) else {
        panic!("first frame completes");
    };
    assert_eq!(frame, Ok(sample_frames()[2].clone()));
    assert_eq!(consumed, first.len() - 5);
    assert_eq!(
        decoder.decode(&rest[consumed..]),
        Decoded::Complete {
            frame: Ok(sample_frames()[3].clone()),
            consumed: second.len()
        }
    );
    assert!(decoder.is_idle());
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn length_counts_bytes_not_characters() {
    let frame = event("r1", "ü€😀 — 日本語");
    let json = frame_json(&frame);
    let bytes = encode(&frame).expect("encodes");
    let declared = NativeEndian::read_u32(&bytes[..4]) as usize;
    assert_eq!(declared, json.len());
    assert_eq!(bytes.len(), 4 + json.len());
    assert!(json.chars().count() < declared);
    assert_eq!(
        decode_in_reads_of(&bytes, 1),
        ok(std::slice::from_ref(&frame))
    );
    assert_eq!(decode_in_reads_of(&bytes, bytes.len()), ok(&[frame]));
}

#[test]
fn frames_at_the_size_boundaries_decode_in_any_reads() {
    for len in [65_535, 65_536, 1_048_576, 1_048_577] {
        let frame = event_of_json_len(len);
        let stream = stream_of(&[frame.clone(), sample_frames()[0].clone()]);
        assert_eq!(NativeEndian::read_u32(&stream[..4]) as usize, len);
        let expected = ok(&[frame, sample_frames()[0].clone()]);
        for size in [stream.len(), 65_536, 4096, 3] {
            assert_eq!(
                decode_in_reads_of(&stream, size),
                expected,
                "{len} in {size}"
            );
        }
        // A frame read in 4096-byte pieces never holds more than its own length.
        let mut decoder = Decoder::default();
        for read in stream.chunks(4096) {
            decoder.frames(read).for_each(drop);
            assert!(decoder.buffer_capacity() <= len);
        }
    }
}

#[test]
fn a_decoder_cap_is_inclusive() {
    let frame = event_of_json_len(1000);
    let stream = stream_of(std::slice::from_ref(&frame));
    assert_eq!(
        Decoder::new(1000).frames(&stream).collect::<Vec<_>>(),
        ok(&[frame])
    );
    assert_eq!(
        Decoder::new(999).frames(&stream).collect::<Vec<_>>(),
        vec![Err(FrameError::TooLarge {
            declared: 1000,
            cap: 999
        })]
    );
}

// === bad frames leave the stream usable ===

/// Feeds the `bad` reads, then a good frame byte by byte; expects exactly `expected`, then the
/// good frame, and no body buffer held while the bad bytes go through.
fn check_bad<'a>(name: &str, bad: impl IntoIterator<Item = &'a [u8]>, expected: FrameError) {
    let next = event("after", "still here ✓");
    let next_bytes = encode(&next).expect("encodes");
    let mut decoder = Decoder::default();
    let mut out = Vec::new();
    for read in bad {
        out.extend(decoder.frames(read));
        assert_eq!(decoder.buffer_capacity(), 0, "{name}: nothing buffered");
    }
    for byte in &next_bytes {
        out.extend(decoder.frames(std::slice::from_ref(byte)));
    }
    assert_eq!(out, vec![Err(expected), Ok(next)], "{name}");
    assert!(decoder.is_idle(), "{name}");
}

fn prefixed(declared: u32, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0; 4];
    NativeEndian::write_u32(&mut out, declared);
    out.extend_from_slice(body);
    out
}

/// `total` zero bytes as reads of at most `piece.len()` bytes, all slices of `piece`.
fn zero_reads(piece: &[u8], total: usize) -> impl Iterator<Item = &[u8]> {
    (0..total.div_ceil(piece.len()))
        .map(move |i| &piece[..piece.len().min(total - i * piece.len())])
}

#[test]
fn malformed_frames_give_one_error_and_the_next_frame_decodes() {
    let not_json = br#"{"type":"hello","#;
    check_bad(
        "malformed JSON",
        [prefixed(not_json.len() as u32, not_json).as_slice()],
        FrameError::MalformedJson {
            message: "EOF while parsing a value at line 1 column 16".to_owned(),
        },
    );
    let trailing = br#"{"type":"end","id":1} x"#;
    check_bad(
        "trailing characters",
        [prefixed(trailing.len() as u32, trailing).as_slice()],
        FrameError::MalformedJson {
            message: "trailing characters at line 1 column 23".to_owned(),
        },
    );
    let unknown = br#"{"type":"subscribe","id":1}"#;
    check_bad(
        "unknown type",
        [prefixed(unknown.len() as u32, unknown).as_slice()],
        FrameError::NotAFrame {
            id: Some(FrameId::Number(1)),
            message: "unknown variant `subscribe`, expected one of `hello`, `request`, `response`, `event`, `end`, `cancel`, `error`, `chunk` at line 1 column 19".to_owned(),
        },
    );
    check_bad(
        "JSON that is not an object",
        [prefixed(7, b"[1,2,3]").as_slice()],
        FrameError::NotAFrame {
            id: None,
            message: "invalid type: integer `1`, expected variant identifier at line 1 column 2"
                .to_owned(),
        },
    );
    check_bad(
        "invalid UTF-8",
        [prefixed(6, b"{\"\xff\xfe\"}").as_slice()],
        FrameError::InvalidUtf8 {
            len: 6,
            valid_up_to: 2,
        },
    );
    check_bad(
        "zero length",
        [prefixed(0, b"").as_slice()],
        FrameError::Empty,
    );
    // A zero length split across reads.
    check_bad(
        "zero length, split",
        [&[0u8, 0][..], &[0], &[0]],
        FrameError::Empty,
    );
}

#[test]
fn over_cap_lengths_are_skipped_without_buffering() {
    // 64 MiB + 1 declared, the body arriving in 1 MiB reads: one error, nothing buffered.
    let zeros = vec![0u8; 1 << 20];
    let declared = INBOUND_FRAME_CAP + 1;
    let prefix = prefixed(declared, b"");
    check_bad(
        "64 MiB + 1",
        std::iter::once(prefix.as_slice()).chain(zero_reads(&zeros, declared as usize)),
        FrameError::TooLarge {
            declared,
            cap: INBOUND_FRAME_CAP,
        },
    );

    // Garbage lengths: four ASCII bytes read as a length ("GET " ≈ 542 MB on little-endian),
    // and 0xFFFF_FFFF; their declared bytes are discarded as they arrive.
    for garbage in [*b"GET ", [0xFF; 4]] {
        let declared = NativeEndian::read_u32(&garbage);
        check_bad(
            "garbage length",
            std::iter::once(&garbage[..]).chain(zero_reads(&zeros, declared as usize)),
            FrameError::TooLarge {
                declared,
                cap: INBOUND_FRAME_CAP,
            },
        );
    }

    // The skip state across tiny reads, with a small cap.
    let mut decoder = Decoder::new(30);
    let stream = [
        prefixed(31, &[b'x'; 31]),
        encode(&sample_frames()[3]).expect("encodes"),
    ]
    .concat();
    assert_eq!(
        decode_reads(&mut decoder, &stream, &[2, 4, 5, 9, 15, 16, 35, 36, 37]),
        vec![
            Err(FrameError::TooLarge {
                declared: 31,
                cap: 30
            }),
            Ok(sample_frames()[3].clone())
        ]
    );
}

#[test]
fn a_stream_ending_inside_a_frame_is_truncated() {
    let frame = encode(&sample_frames()[0]).expect("encodes");
    for (name, bytes, missing) in [
        ("inside the prefix", &frame[..1], 3),
        ("inside the body", &frame[..10], frame.len() - 10),
    ] {
        let mut decoder = Decoder::default();
        assert_eq!(decoder.frames(bytes).count(), 0, "{name}");
        assert_eq!(
            decoder.finish(),
            Err(FrameError::Truncated { missing }),
            "{name}"
        );
    }
    let mut decoder = Decoder::new(4);
    decoder.frames(&prefixed(100, b"abc")).for_each(drop);
    assert_eq!(decoder.finish(), Err(FrameError::Truncated { missing: 97 }));

    // An over-cap frame skipped to its last byte leaves the decoder at a boundary: all input
    // taken, the next prefix needed, and the stream may end there (found by the fuzz harness).
    let mut decoder = Decoder::new(2);
    let stream = prefixed(3, b"abc");
    assert_eq!(
        decoder.decode(&stream),
        Decoded::Complete {
            frame: Err(FrameError::TooLarge {
                declared: 3,
                cap: 2
            }),
            consumed: 4
        }
    );
    assert_eq!(
        decoder.decode(&stream[4..]),
        Decoded::Incomplete { needed: 4 }
    );
    assert!(decoder.is_idle());
    assert_eq!(decoder.finish(), Ok(()));
}

#[test]
fn errors_map_to_gateway_codes() {
    let cases: Vec<(GatewayError, &str)> = vec![
        (FrameError::Empty.into(), codes::REQUEST_INVALID),
        (
            FrameError::MalformedJson {
                message: "m".into(),
            }
            .into(),
            codes::REQUEST_INVALID,
        ),
        (
            FrameError::TooLarge {
                declared: 5,
                cap: 4,
            }
            .into(),
            codes::FRAME_TOO_LARGE,
        ),
        (
            FrameError::Truncated { missing: 1 }.into(),
            codes::FRAME_TRUNCATED,
        ),
        (
            EncodeError::TooLong { len: 1 << 33 }.into(),
            codes::FRAME_TOO_LARGE,
        ),
        (
            ReassembleError::OutOfOrder {
                expected_id: None,
                expected_index: 0,
                got_id: None,
                got_index: 3,
            }
            .into(),
            codes::FRAME_CHUNK_INVALID,
        ),
        (
            ReassembleError::TooLarge {
                id: None,
                max_bytes: 1,
            }
            .into(),
            codes::FRAME_TOO_LARGE,
        ),
        (
            ReassembleError::NotAFrame {
                id: None,
                message: "m".into(),
            }
            .into(),
            codes::REQUEST_INVALID,
        ),
    ];
    for (error, code) in cases {
        assert_eq!(error.code, code, "{error}");
        assert!(!error.remediation.is_empty());
        // Transports answer with an error frame; it must itself be a valid frame.
        let answer = Frame::Error(ErrorFrame {
            id: None,
            error: ErrorObject::from(&error),
        });
        let bytes = encode(&answer).expect("encodes");
        assert_eq!(
            Decoder::default().frames(&bytes).collect::<Vec<_>>(),
            ok(&[answer])
        );
    }
}

#[test]
fn long_error_messages_are_shortened() {
    let body = format!(r#"{{"type":"{}"}}"#, "q".repeat(100_000));
    let out: Vec<_> = Decoder::default()
        .frames(&prefixed(body.len() as u32, body.as_bytes()))
        .collect();
    let [Err(FrameError::NotAFrame { message, .. })] = out.as_slice() else {
        panic!("one NotAFrame error: {out:?}");
    };
    assert_eq!(message.chars().count(), 241, "{message}");
}

// === chunking ===

/// Encodes `frame` chunked at `cap`; checks each message (prefix = JSON length ≤ cap, chunks
/// as full as they can be) and that the messages, decoded in `read`-byte reads and reassembled,
/// give `frame` back. Returns the number of messages.
fn check_chunked(frame: &Frame, cap: usize, read: usize) -> usize {
    let messages = encode_chunked(frame, cap).expect("chunks");
    let mut decoder = Decoder::default();
    let mut reassembler = Reassembler::default();
    let json = frame_json(frame);
    let mut offset = 0; // of the next chunk's data in `json`
    let mut out = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let declared = NativeEndian::read_u32(&message[..4]) as usize;
        assert_eq!(declared, message.len() - 4);
        assert!(declared <= cap, "message {i}: {declared} > {cap}");
        for piece in message.chunks(read) {
            for decoded in decoder.frames(piece) {
                let decoded = decoded.expect("decodes");
                if messages.len() > 1 {
                    let Frame::Chunk(chunk) = &decoded else {
                        panic!("message {i} is a chunk");
                    };
                    assert_eq!(chunk.index as usize, i);
                    assert_eq!(chunk.last, i + 1 == messages.len());
                    assert_eq!(
                        json[offset..].get(..chunk.data.len()),
                        Some(chunk.data.as_str())
                    );
                    offset += chunk.data.len();
                    if !chunk.last {
                        // Full: the next character would not have fitted.
                        let next = json[offset..]
                            .chars()
                            .next()
                            .expect("a non-final chunk leaves text");
                        assert!(declared + escaped_len(next) > cap, "chunk {i} not full");
                    }
                }
                if let Some(whole) = reassembler.push(decoded).expect("reassembles") {
                    out.push(whole);
                }
            }
        }
    }
    assert!(decoder.is_idle() && reassembler.is_idle());
    assert_eq!(out, vec![frame.clone()]);
    messages.len()
}

#[test]
fn a_frame_of_exactly_the_cap_is_sent_whole_and_one_byte_more_is_chunked() {
    for cap in [OUTBOUND_FRAME_CAP, 300] {
        let exact = event_of_json_len(cap);
        let messages = encode_chunked(&exact, cap).expect("encodes");
        assert_eq!(messages, vec![encode(&exact).expect("encodes")], "{cap}");
        assert_eq!(check_chunked(&exact, cap, 4096), 1);

        let over = event_of_json_len(cap + 1);
        assert_eq!(check_chunked(&over, cap, 4096), 2, "{cap} + 1");
    }
    // The reply sizes of issue 5 at the real cap.
    for len in [65_535, 65_536, 1_048_576] {
        assert_eq!(
            check_chunked(&event_of_json_len(len), OUTBOUND_FRAME_CAP, 65_536),
            1
        );
    }
    assert_eq!(
        check_chunked(&event_of_json_len(1_048_577), OUTBOUND_FRAME_CAP, 65_536),
        2
    );
}

#[test]
fn big_frames_full_of_escapes_and_multibyte_characters_round_trip() {
    // Every character of `unit` expands in JSON, then again inside a chunk's `data`.
    let unit = "\"\\\n\u{1}\u{1F}é€😀𝄞\t/";
    for (text, reads) in [
        (unit.repeat(120_000), 1 << 16),   // ≈ 3.6 MB of JSON
        ("\\".repeat(1_100_000), 1 << 20), // each backslash takes 4 bytes in a chunk
        ("😀".repeat(300_000), 7),
    ] {
        let frame = event("r-big", &text);
        let json_len = frame_json(&frame).len();
        let count = check_chunked(&frame, OUTBOUND_FRAME_CAP, reads);
        assert!(count > json_len / OUTBOUND_FRAME_CAP, "{count} chunks");
    }
    // A response to a numeric id, an error frame with a null id and a hello keep their ids.
    let response = Frame::Response(review_agent_gateway::protocol::ResponseFrame {
        id: FrameId::Number(42),
        status: 200,
        body: json!({"ok": true, "data": {"lines": [unit.repeat(50)]}}),
    });
    let error = Frame::Error(ErrorFrame {
        id: None,
        error: ErrorObject {
            code: codes::INTERNAL.to_owned(),
            message: unit.repeat(40),
            retryable: false,
            remediation: "r".to_owned(),
        },
    });
    let hello = Frame::Hello(HelloFrame {
        capabilities: Some(json!({"x": unit.repeat(40)})),
        ..HelloFrame::default()
    });
    for frame in [response, error, hello] {
        for cap in [100, 257, 1000] {
            check_chunked(&frame, cap, 5);
        }
    }
}

#[test]
fn a_cap_too_small_for_any_chunk_is_an_error() {
    let frame = event("a-rather-long-request-id", &"x".repeat(500));
    match encode_chunked(&frame, 60) {
        Err(EncodeError::CapTooSmall {
            max_json_bytes: 60,
            index: 0,
            overhead,
        }) => assert!(overhead >= 60, "{overhead}"),
        other => panic!("CapTooSmall expected: {other:?}"),
    }
    // Room for a chunk envelope but not for a 6-byte escape.
    let envelope = frame_json(&Frame::Chunk(ChunkFrame {
        id: Some(FrameId::Text("r".into())),
        index: 0,
        last: false,
        data: String::new(),
    }))
    .len();
    // `{` fits in chunk 0; chunk 1 cannot take the 2 bytes of an escaped `"`.
    let frame = event("r", "x");
    assert!(matches!(
        encode_chunked(&frame, envelope + 1),
        Err(EncodeError::CapTooSmall { .. })
    ));
}

// === reassembly errors ===

fn chunk(id: &str, index: u32, last: bool, data: &str) -> Frame {
    Frame::Chunk(ChunkFrame {
        id: Some(FrameId::Text(id.to_owned())),
        index,
        last,
        data: data.to_owned(),
    })
}

/// The chunks `encode_chunked` makes of `frame` at `cap`, decoded.
fn chunks_of(frame: &Frame, cap: usize) -> Vec<Frame> {
    encode_chunked(frame, cap)
        .expect("chunks")
        .iter()
        .map(|m| serde_json::from_slice(&m[4..]).expect("a frame"))
        .collect()
}

/// What pushes gave: each frame handed back, or the code of each error.
type Pushed = Vec<Result<Frame, String>>;

/// Pushes `frames`; returns the frames handed back and the codes of the errors, in order.
fn push_all(reassembler: &mut Reassembler, frames: Vec<Frame>) -> Pushed {
    frames
        .into_iter()
        .filter_map(|f| match reassembler.push(f) {
            Ok(Some(frame)) => Some(Ok(frame)),
            Ok(None) => None,
            Err(e) => Some(Err(GatewayError::from(e).code.to_owned())),
        })
        .collect()
}

#[test]
fn reassembly_errors_drop_one_frame_and_the_next_reassembles() {
    let big = event("r1", &"ab\"ü".repeat(100));
    let parts = chunks_of(&big, 120);
    assert!(parts.len() > 3);
    let end = Frame::End(IdFrame {
        id: FrameId::Text("r1".into()),
    });
    let chunk_invalid = Err(codes::FRAME_CHUNK_INVALID.to_owned());

    let cases: Vec<(&str, Vec<Frame>, Pushed)> = vec![
        ("in order", parts.clone(), vec![Ok(big.clone())]),
        (
            "a chunk missing",
            [&parts[..1], &parts[2..], &parts[..]].concat(),
            vec![chunk_invalid.clone(), Ok(big.clone())],
        ),
        (
            "a chunk repeated",
            [&parts[..2], &parts[1..], &parts[..]].concat(),
            vec![chunk_invalid.clone(), Ok(big.clone())],
        ),
        (
            "a sequence not starting at 0",
            [&parts[1..], &parts[..]].concat(),
            vec![chunk_invalid.clone(), Ok(big.clone())],
        ),
        (
            "another id in the middle",
            [
                &parts[..2],
                &[chunk("r2", 2, true, "x")][..],
                &parts[3..],
                &parts[..],
            ]
            .concat(),
            vec![chunk_invalid.clone(), Ok(big.clone())],
        ),
        (
            "a new sequence starting in the middle",
            [&parts[..2], &parts[..]].concat(),
            vec![chunk_invalid.clone(), Ok(big.clone())],
        ),
        (
            "text that is not a frame",
            vec![
                chunk("r3", 0, false, "{\"type\":"),
                chunk("r3", 1, true, "\"nope\"}"),
                end.clone(),
            ],
            vec![Err(codes::REQUEST_INVALID.to_owned()), Ok(end.clone())],
        ),
    ];
    for (name, frames, expected) in cases {
        let mut reassembler = Reassembler::default();
        assert_eq!(push_all(&mut reassembler, frames), expected, "{name}");
        assert!(reassembler.is_idle(), "{name}");
    }

    // Another frame between two chunks: an error that hands the frame back.
    let mut reassembler = Reassembler::default();
    assert_eq!(reassembler.push(parts[0].clone()), Ok(None));
    match reassembler.push(end.clone()) {
        Err(ReassembleError::Interrupted {
            id,
            received: 1,
            frame,
        }) => {
            assert_eq!(id, Some(FrameId::Text("r1".into())));
            assert_eq!(*frame, end);
        }
        other => panic!("Interrupted expected: {other:?}"),
    }
    // The rest of the broken sequence is discarded, then the next frames come through.
    assert_eq!(
        push_all(
            &mut reassembler,
            [&parts[1..], &[end.clone()][..], &parts[..]].concat()
        ),
        vec![Ok(end), Ok(big.clone())]
    );

    // Over the reassembler's cap: one error, the rest of the sequence discarded.
    let json_len = frame_json(&big).len();
    let mut reassembler = Reassembler::new(json_len - 1);
    assert_eq!(
        push_all(&mut reassembler, parts.clone()),
        vec![Err(codes::FRAME_TOO_LARGE.to_owned())]
    );
    assert!(reassembler.is_idle());
    let mut reassembler = Reassembler::new(json_len);
    assert_eq!(push_all(&mut reassembler, parts), vec![Ok(big)]);
}

// === property-style random tests ===

#[test]
fn random_streams_decode_the_same_in_random_reads() {
    let mut rng = Rng(0x5EED_0001);
    for round in 0..300 {
        let frames: Vec<Frame> = (0..1 + rng.below(6))
            .map(|i| event(&format!("r{i}"), &rng.text(200)))
            .collect();
        let stream = stream_of(&frames);
        let mut cuts: Vec<usize> = (0..rng.below(12))
            .map(|_| rng.below(stream.len() + 1))
            .collect();
        cuts.sort_unstable();
        let mut decoder = Decoder::default();
        assert_eq!(
            decode_reads(&mut decoder, &stream, &cuts),
            ok(&frames),
            "round {round}, cuts {cuts:?}"
        );
        assert!(decoder.is_idle());
    }
}

#[test]
fn random_bytes_never_wedge_the_decoder() {
    // A frame of random bytes (random length, over the cap or not), then a good frame, in random
    // reads: one error for the garbage, then the good frame; never more buffer than the cap.
    let mut rng = Rng(0x5EED_0002);
    let good = event("ok", "✓");
    for round in 0..500 {
        let cap = 1 + rng.below(64) as u32;
        let declared = rng.below(2 * cap as usize + 1) as u32;
        let body: Vec<u8> = (0..declared).map(|_| rng.next() as u8).collect();
        let stream = [prefixed(declared, &body), encode(&good).expect("encodes")].concat();
        let mut decoder = Decoder::new(cap.max(frame_json(&good).len() as u32));
        let mut cuts: Vec<usize> = (0..rng.below(5))
            .map(|_| rng.below(stream.len() + 1))
            .collect();
        cuts.sort_unstable();
        let out = decode_reads(&mut decoder, &stream, &cuts);
        assert_eq!(out.len(), 2, "round {round}: {out:?}");
        assert_eq!(out[1], Ok(good.clone()), "round {round}");
        assert!(decoder.buffer_capacity() <= decoder.cap() as usize);
    }
}

#[test]
fn random_texts_chunk_within_random_caps_and_round_trip() {
    let mut rng = Rng(0x5EED_0003);
    for _ in 0..400 {
        let text = rng.text(600);
        let frame = event(&format!("id-{}", rng.below(1000)), &text);
        let cap = 100 + rng.below(400);
        let read = 1 + rng.below(300);
        check_chunked(&frame, cap, read);
    }
}

#[test]
fn encode_raw_prefixes_any_body() {
    assert_eq!(encode_raw(b"").expect("encodes"), vec![0, 0, 0, 0]);
    let bytes = encode_raw(b"{}").expect("encodes");
    assert_eq!(NativeEndian::read_u32(&bytes[..4]), 2);
    assert_eq!(&bytes[4..], b"{}");
}
