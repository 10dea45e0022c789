//! The native-messaging byte codec (DESIGN §4): each frame is a 32-bit unsigned length in
//! **native byte order** followed by that many bytes of UTF-8 JSON. The length counts bytes, not
//! characters, and does not include the 4-byte prefix itself.
//!
//! **Invariant:** sans-IO, as gitoxide's `gix-packetline`: nothing here reads or writes a file,
//! pipe or socket. Transports hand bytes to a [`Decoder`] and write the byte vectors that
//! [`encode`] / [`encode_chunked`] return.
//!
//! - [`Decoder`]: bytes (split at any read boundary) → [`Frame`]s. The declared length is checked
//!   against a cap (default [`INBOUND_FRAME_CAP`], 64 MiB: Chrome's browser → host limit)
//!   **before** anything is allocated; an over-cap frame is reported once and its bytes are
//!   discarded as they arrive, without buffering, so the stream stays usable. A body that is not
//!   UTF-8, not JSON or not a known frame is one error result; decoding goes on with the next.
//! - [`encode`]: one frame → one length-prefixed byte vector.
//! - [`encode_chunked`]: one frame → one or more length-prefixed byte vectors whose JSON each
//!   fits the outbound cap ([`OUTBOUND_FRAME_CAP`], 1 MiB: Chrome's host → browser limit), using
//!   `chunk` frames (DESIGN §4) when the frame's JSON is over it.
//! - [`Reassembler`]: the client side: `chunk` frames → the frame they carry.
//!
//! Where the caps come from: Chromium's `native_message_process_host.cc` compares the value of
//! the length prefix (the JSON byte count, prefix excluded) with `kMaximumMessageSize = 1024 *
//! 1024` and closes the port when it is greater; Firefox's `NativeMessaging.sys.mjs` has the same
//! `MAX_READ = 1024 * 1024` on the message length. So a host → browser frame whose JSON is
//! exactly 1,048,576 bytes is accepted (it is sent whole) and one byte more is chunked.

use byteorder::{ByteOrder, NativeEndian};
use serde_json::error::Category;

use super::{ChunkFrame, Frame, FrameId};
use crate::error::{GatewayError, codes};

/// Bytes of the length prefix in front of every frame's JSON.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// Default cap on the declared JSON length of an inbound (browser → host) frame: 64 MiB
/// (67,108,864 bytes), Chrome's browser → host message limit (DESIGN §4).
pub const INBOUND_FRAME_CAP: u32 = 64 * 1024 * 1024;

/// Cap on the JSON length of an outbound (host → browser) frame: 1 MiB (1,048,576 bytes),
/// Chrome's and Firefox's host → browser limit. The 4-byte prefix is not counted (see the module
/// documentation).
pub const OUTBOUND_FRAME_CAP: usize = 1024 * 1024;

/// Longest error message the decoder copies from serde_json: its messages can quote input (an
/// unknown `type` value), which may be megabytes long.
const MAX_ERROR_MESSAGE_CHARS: usize = 240;

/// A decoder's body buffer larger than this is freed after its frame instead of kept for reuse.
const RETAINED_BUFFER_BYTES: usize = 64 * 1024;

// === FrameError ===

/// Why one inbound frame could not be decoded. The [`Decoder`] reports it in place of that frame
/// and goes on with the next one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix is 0: a frame must hold a JSON object.
    #[error("frame length is 0; a frame holds a JSON object")]
    Empty,
    /// The length prefix declares more bytes than the cap; the frame's bytes are skipped.
    #[error("frame declares {declared} bytes, over the {cap}-byte cap; its bytes are skipped")]
    TooLarge {
        /// The declared length, in bytes.
        declared: u32,
        /// The decoder's cap, in bytes.
        cap: u32,
    },
    /// The body is not UTF-8.
    #[error("frame body of {len} bytes is not UTF-8 (invalid from byte {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the body in bytes.
        len: usize,
        /// Offset of the first invalid byte.
        valid_up_to: usize,
    },
    /// The body is not one JSON value (syntax error, or something after the value).
    #[error("frame body is not JSON: {message}")]
    MalformedJson {
        /// serde_json's message with line and column, at most 240 characters.
        message: String,
    },
    /// The body is JSON but not a known frame (no or unknown `type`, missing or mistyped field,
    /// a key twice in one object, an invalid `id`).
    #[error("frame body is not a known frame: {message}")]
    NotAFrame {
        /// The frame's `id` when it could be read ([`super::frame::readable_id`]), for the
        /// `error` frame that answers it.
        id: Option<FrameId>,
        /// serde_json's message with line and column, at most 240 characters.
        message: String,
    },
    /// The stream ended in the middle of a frame (see [`Decoder::finish`]).
    #[error("the stream ended inside a frame: {missing} more bytes were expected")]
    Truncated {
        /// Bytes still missing from the length prefix, the body or the skipped frame.
        missing: usize,
    },
}

impl FrameError {
    /// The `id` of the refused frame when it could be read (only for
    /// [`FrameError::NotAFrame`]; the other errors leave no JSON object to read it from).
    pub fn id(&self) -> Option<&FrameId> {
        match self {
            FrameError::NotAFrame { id, .. } => id.as_ref(),
            _ => None,
        }
    }
}

impl From<FrameError> for GatewayError {
    /// `frame.too_large` for [`FrameError::TooLarge`], `frame.truncated` for
    /// [`FrameError::Truncated`], `request.invalid` for the others (the same code as an unknown
    /// frame type, DESIGN §4).
    fn from(error: FrameError) -> Self {
        let (code, remediation) = match &error {
            FrameError::TooLarge { cap, .. } => (
                codes::FRAME_TOO_LARGE,
                format!(
                    "Send frames of at most {cap} bytes of JSON; split large payloads into smaller requests."
                ),
            ),
            FrameError::Truncated { .. } => (
                codes::FRAME_TRUNCATED,
                "Write each frame whole (4-byte native-endian length, then the JSON) before closing the stream."
                    .to_owned(),
            ),
            _ => (
                codes::REQUEST_INVALID,
                "Send a 4-byte native-endian length, then that many bytes of UTF-8 JSON holding one frame object: `hello`, `request` or `cancel` with their fields (the README's section \"The daemon\", WebSocket, shows them)."
                    .to_owned(),
            ),
        };
        GatewayError::new(code, error.to_string(), remediation)
    }
}

/// Parses one frame body.
fn parse_frame(body: &[u8]) -> Result<Frame, FrameError> {
    let text = std::str::from_utf8(body).map_err(|e| FrameError::InvalidUtf8 {
        len: body.len(),
        valid_up_to: e.valid_up_to(),
    })?;
    parse_frame_text(text).map_err(|(category, message)| match category {
        Category::Data => FrameError::NotAFrame {
            id: super::frame::readable_id(text),
            message,
        },
        Category::Syntax | Category::Eof | Category::Io => FrameError::MalformedJson { message },
    })
}

/// Parses a frame's JSON text; on failure, serde_json's category and a shortened message.
/// A key twice in any object of the frame is refused ([`super::json::parse_strict`]), not
/// collapsed to its last value: one rule with `/v1/ws` and HTTP bodies.
fn parse_frame_text(text: &str) -> Result<Frame, (Category, String)> {
    // Keys checked from the frame's root (`body.messages`, as `/v1/ws` names them), then typed
    // from the text, so every message keeps its line and column.
    super::json::parse_strict(text.as_bytes())
        .map_err(|e| (e.classify(), shorten(e.to_string())))?;
    serde_json::from_str::<Frame>(text).map_err(|e| (e.classify(), shorten(e.to_string())))
}

/// `message` cut to [`MAX_ERROR_MESSAGE_CHARS`] characters, with `…` when cut.
fn shorten(message: String) -> String {
    match message.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        None => message,
        Some((end, _)) => format!("{}…", &message[..end]),
    }
}

// === impl Decoder ===

/// What one [`Decoder::decode`] call produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// One frame, or the error that stands for it, is complete. `consumed` bytes of the input
    /// were used (≥ 1); pass the rest (`&input[consumed..]`) to the next call.
    Complete {
        /// The frame, or why it could not be decoded. After an error the decoder is at the next
        /// frame (or skipping an over-cap frame's bytes), never stuck.
        frame: Result<Frame, FrameError>,
        /// Bytes of the input used, from its start.
        consumed: usize,
    },
    /// **Every** byte of the input was taken (buffered, or discarded while skipping an over-cap
    /// frame) and no frame is complete: call again when at least `needed` (≥ 1) more bytes
    /// have arrived, with only the new bytes. Fewer bytes are accepted too.
    Incomplete {
        /// Bytes missing before the current length prefix, body or skipped frame is complete.
        needed: usize,
    },
}

/// Where the decoder is in the stream.
#[derive(Debug, Clone)]
enum State {
    /// Reading the length prefix; `filled` of its 4 bytes are in `prefix`.
    Prefix {
        prefix: [u8; LENGTH_PREFIX_BYTES],
        filled: usize,
    },
    /// Reading a body of `declared` bytes (1..=cap) into the decoder's buffer.
    Body { declared: usize },
    /// Discarding the `remaining` bytes of an over-cap frame.
    Skip { remaining: usize },
}

impl State {
    const START: State = State::Prefix {
        prefix: [0; LENGTH_PREFIX_BYTES],
        filled: 0,
    };
}

/// Sans-IO decoder of native-messaging frames (DESIGN §4).
///
/// Feed it the bytes read from the stream with [`decode`](Decoder::decode) (one result at a time,
/// gitoxide-style) or [`frames`](Decoder::frames) (all results of one read). The bytes may be
/// split anywhere: a length prefix across reads, several frames in one read, a body byte by
/// byte. A frame whose body is wholly inside one input is parsed in place; otherwise its bytes
/// are copied into a buffer that never exceeds the declared length, itself at most the cap.
///
/// Memory: at most `cap` bytes of body buffer plus a constant, whatever the input.
#[derive(Debug, Clone)]
pub struct Decoder {
    // Invariant: `body.len() < declared` while in `State::Body`, and `body` is empty otherwise.
    state: State,
    body: Vec<u8>,
    cap: u32,
}

impl Default for Decoder {
    /// A decoder with the 64 MiB inbound cap ([`INBOUND_FRAME_CAP`]).
    fn default() -> Self {
        Decoder::new(INBOUND_FRAME_CAP)
    }
}

impl Decoder {
    /// A decoder that refuses frames declaring more than `cap` bytes of JSON (use
    /// [`INBOUND_FRAME_CAP`], or [`Decoder::default`], for the browser → host direction).
    pub fn new(cap: u32) -> Self {
        Decoder {
            state: State::START,
            body: Vec::new(),
            cap,
        }
    }

    /// The cap on a frame's declared length, in bytes.
    pub fn cap(&self) -> u32 {
        self.cap
    }

    /// Bytes of body buffer the decoder holds allocated now (0 while skipping an over-cap frame
    /// or after a frame of more than 64 KiB; at most the declared length of the frame being
    /// read). For metrics and tests of the memory bound.
    pub fn buffer_capacity(&self) -> usize {
        self.body.capacity()
    }

    /// Whether the decoder is at a frame boundary: nothing of a next frame has been taken yet.
    /// A stream that ends here ended cleanly.
    pub fn is_idle(&self) -> bool {
        matches!(self.state, State::Prefix { filled: 0, .. })
    }

    /// Takes bytes from the start of `input` until one frame (or the error standing for it) is
    /// complete, or until `input` is used up.
    ///
    /// Returns [`Decoded::Complete`] with the number of bytes used — call again with the rest —
    /// or [`Decoded::Incomplete`] when all of `input` was taken without completing a frame.
    /// An empty `input` gives `Incomplete`. Never panics.
    pub fn decode(&mut self, input: &[u8]) -> Decoded {
        let mut pos = 0;
        loop {
            match &mut self.state {
                State::Skip { remaining } => {
                    let take = (*remaining).min(input.len() - pos);
                    *remaining -= take;
                    pos += take;
                    if *remaining > 0 {
                        return Decoded::Incomplete { needed: *remaining };
                    }
                    self.state = State::START;
                }
                State::Prefix { prefix, filled } => {
                    let take = (LENGTH_PREFIX_BYTES - *filled).min(input.len() - pos);
                    prefix[*filled..*filled + take].copy_from_slice(&input[pos..pos + take]);
                    *filled += take;
                    pos += take;
                    if *filled < LENGTH_PREFIX_BYTES {
                        return Decoded::Incomplete {
                            needed: LENGTH_PREFIX_BYTES - *filled,
                        };
                    }
                    let declared = NativeEndian::read_u32(prefix);
                    if declared == 0 {
                        self.state = State::START;
                        return Decoded::Complete {
                            frame: Err(FrameError::Empty),
                            consumed: pos,
                        };
                    }
                    if declared > self.cap {
                        self.state = State::Skip {
                            remaining: declared as usize,
                        };
                        return Decoded::Complete {
                            frame: Err(FrameError::TooLarge {
                                declared,
                                cap: self.cap,
                            }),
                            consumed: pos,
                        };
                    }
                    self.state = State::Body {
                        declared: declared as usize,
                    };
                }
                State::Body { declared } => {
                    let declared = *declared;
                    let rest = &input[pos..];
                    if self.body.is_empty() && rest.len() >= declared {
                        // The whole body is in this input: parse it in place.
                        self.state = State::START;
                        return Decoded::Complete {
                            frame: parse_frame(&rest[..declared]),
                            consumed: pos + declared,
                        };
                    }
                    let take = (declared - self.body.len()).min(rest.len());
                    self.buffer(&rest[..take], declared);
                    pos += take;
                    if self.body.len() < declared {
                        return Decoded::Incomplete {
                            needed: declared - self.body.len(),
                        };
                    }
                    let frame = parse_frame(&self.body);
                    if self.body.capacity() > RETAINED_BUFFER_BYTES {
                        self.body = Vec::new();
                    } else {
                        self.body.clear();
                    }
                    self.state = State::START;
                    return Decoded::Complete {
                        frame,
                        consumed: pos,
                    };
                }
            }
        }
    }

    /// Appends `bytes` to the body buffer, growing it geometrically but never past `declared`.
    fn buffer(&mut self, bytes: &[u8], declared: usize) {
        let wanted = self.body.len() + bytes.len();
        if wanted > self.body.capacity() {
            let target = wanted.max(declared.min(self.body.capacity().saturating_mul(2)));
            self.body.reserve_exact(target - self.body.len());
        }
        self.body.extend_from_slice(bytes);
    }

    /// All the results `input` completes, in order, as an iterator; all of `input` is taken.
    /// Bytes of a frame not yet complete stay in the decoder for the next call.
    pub fn frames<'d, 'i>(&'d mut self, input: &'i [u8]) -> Frames<'d, 'i> {
        Frames {
            decoder: self,
            input,
        }
    }

    /// Checks that the stream may end here (call it at end of file).
    ///
    /// # Errors
    ///
    /// [`FrameError::Truncated`] when part of a length prefix or body has been taken, or an
    /// over-cap frame is still being skipped, with the number of bytes missing.
    pub fn finish(&self) -> Result<(), FrameError> {
        let missing = match &self.state {
            State::Prefix { filled: 0, .. } => return Ok(()),
            State::Prefix { filled, .. } => LENGTH_PREFIX_BYTES - filled,
            State::Body { declared } => declared - self.body.len(),
            State::Skip { remaining } => *remaining,
        };
        Err(FrameError::Truncated { missing })
    }
}

/// Iterator over the results one input completes; see [`Decoder::frames`].
#[derive(Debug)]
pub struct Frames<'d, 'i> {
    decoder: &'d mut Decoder,
    input: &'i [u8],
}

impl Iterator for Frames<'_, '_> {
    type Item = Result<Frame, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.input.is_empty() {
            return None;
        }
        match self.decoder.decode(self.input) {
            Decoded::Complete { frame, consumed } => {
                self.input = &self.input[consumed..];
                Some(frame)
            }
            Decoded::Incomplete { .. } => {
                self.input = &[];
                None
            }
        }
    }
}

// === encode ===

/// Why a frame could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The JSON is longer than a 32-bit length can declare.
    #[error("frame JSON of {len} bytes does not fit a 32-bit length prefix")]
    TooLong {
        /// Length of the JSON in bytes.
        len: usize,
    },
    /// The cap leaves no room for a single character of a chunk's `data` (the chunk envelope
    /// with its `id` and `index` alone is near or over the cap).
    #[error(
        "a {max_json_bytes}-byte cap cannot carry chunk {index} of this frame (its envelope alone takes {overhead} bytes)"
    )]
    CapTooSmall {
        /// The cap given to [`encode_chunked`].
        max_json_bytes: usize,
        /// The chunk index that could not be made.
        index: u32,
        /// Bytes of that chunk's JSON with empty `data`.
        overhead: usize,
    },
}

impl From<EncodeError> for GatewayError {
    /// `frame.too_large`: the frame cannot be sent on this transport.
    fn from(error: EncodeError) -> Self {
        GatewayError::new(
            codes::FRAME_TOO_LARGE,
            error.to_string(),
            "Ask for less data in one request (a smaller range or page).",
        )
    }
}

/// A frame's JSON text as serde_json writes it (compact, fields in declaration order).
pub fn frame_json(frame: &Frame) -> String {
    // A Frame holds strings, integers, booleans and serde_json::Values (whose maps have string
    // keys), none of which can fail to serialize.
    serde_json::to_string(frame).expect("a Frame always serializes to JSON")
}

/// One frame as a native-messaging message: its JSON's byte length as a native-endian `u32`,
/// then the JSON. No size cap is applied: use [`encode_chunked`] towards the browser.
///
/// # Errors
///
/// [`EncodeError::TooLong`] when the JSON is 4 GiB or more.
pub fn encode(frame: &Frame) -> Result<Vec<u8>, EncodeError> {
    encode_raw(frame_json(frame).as_bytes())
}

/// `body` (any bytes, normally UTF-8 JSON) behind a native-endian `u32` length prefix.
///
/// # Errors
///
/// [`EncodeError::TooLong`] when `body` is 4 GiB or more.
pub fn encode_raw(body: &[u8]) -> Result<Vec<u8>, EncodeError> {
    let len = u32::try_from(body.len()).map_err(|_| EncodeError::TooLong { len: body.len() })?;
    let mut out = vec![0; LENGTH_PREFIX_BYTES];
    NativeEndian::write_u32(&mut out, len);
    out.reserve_exact(body.len());
    out.extend_from_slice(body);
    Ok(out)
}

/// One frame as one or more native-messaging messages, each with at most `max_json_bytes` of JSON
/// (use [`OUTBOUND_FRAME_CAP`] towards the browser; the 4-byte prefix is not counted).
///
/// A frame whose JSON is at most `max_json_bytes` is one message, exactly as [`encode`] makes
/// it. A longer one is sent as `chunk` frames (DESIGN §4) with the frame's `id` (`null` for
/// `hello`), `index` from 0 and `final` on the last: the frame's JSON text is cut on character
/// boundaries so that each chunk's JSON — with the escaping of `data` (`"` and `\` take 2 bytes,
/// control characters 2 or 6) — is at most `max_json_bytes`, each chunk as full as it can be.
/// Concatenating the `data` of the chunks gives the frame's JSON text back ([`Reassembler`]).
///
/// # Errors
///
/// [`EncodeError::CapTooSmall`] when a chunk cannot carry the next character: the cap must exceed
/// the chunk envelope (about 60 bytes plus the id's JSON and the index's digits) by 4 bytes (a
/// 4-byte character, or an escaped `"`/`\` of the frame's JSON written again inside `data`);
/// [`EncodeError::TooLong`] when the JSON is 4 GiB or more.
pub fn encode_chunked(frame: &Frame, max_json_bytes: usize) -> Result<Vec<Vec<u8>>, EncodeError> {
    let json = frame_json(frame);
    if json.len() <= max_json_bytes {
        return Ok(vec![encode_raw(json.as_bytes())?]);
    }
    let id = chunk_id(frame);
    let chunk = |index: u32, last: bool, data: &str| {
        Frame::Chunk(ChunkFrame {
            id: id.clone(),
            index,
            last,
            data: data.to_owned(),
        })
    };
    let overhead = |index: u32, last: bool| frame_json(&chunk(index, last, "")).len();

    let mut messages = Vec::new();
    let mut rest = json.as_str();
    let mut rest_escaped: usize = rest.chars().map(escaped_len).sum();
    let mut index: u32 = 0;
    loop {
        let final_overhead = overhead(index, true);
        if final_overhead + rest_escaped <= max_json_bytes {
            messages.push(encode_chunk(&chunk(index, true, rest), max_json_bytes)?);
            return Ok(messages);
        }
        let overhead = overhead(index, false);
        let too_small = EncodeError::CapTooSmall {
            max_json_bytes,
            index,
            overhead,
        };
        let Some(budget) = max_json_bytes.checked_sub(overhead) else {
            return Err(too_small);
        };
        let mut used = 0;
        let mut end = 0;
        for (at, c) in rest.char_indices() {
            let len = escaped_len(c);
            if used + len > budget {
                break;
            }
            used += len;
            end = at + c.len_utf8();
        }
        if end == 0 {
            return Err(too_small);
        }
        messages.push(encode_chunk(
            &chunk(index, false, &rest[..end]),
            max_json_bytes,
        )?);
        rest = &rest[end..];
        rest_escaped -= used;
        index = index
            .checked_add(1)
            .ok_or(EncodeError::TooLong { len: json.len() })?;
    }
}

/// One chunk frame as a message; its JSON is within the cap by construction.
fn encode_chunk(chunk: &Frame, max_json_bytes: usize) -> Result<Vec<u8>, EncodeError> {
    let json = frame_json(chunk);
    debug_assert!(
        json.len() <= max_json_bytes,
        "chunk JSON of {} bytes over the {max_json_bytes}-byte cap",
        json.len()
    );
    encode_raw(json.as_bytes())
}

/// The `id` the chunks of `frame` carry: the frame's request id, `null` for `hello`.
fn chunk_id(frame: &Frame) -> Option<FrameId> {
    match frame {
        Frame::Hello(_) => None,
        Frame::Request(f) => Some(f.id.clone()),
        Frame::Response(f) => Some(f.id.clone()),
        Frame::Event(f) => Some(f.id.clone()),
        Frame::End(f) | Frame::Cancel(f) => Some(f.id.clone()),
        Frame::Error(f) => f.id.clone(),
        Frame::Chunk(f) => f.id.clone(),
    }
}

/// Bytes `c` takes inside a JSON string as serde_json writes it: `"` and `\` are escaped with a
/// backslash, U+0008, U+0009, U+000A, U+000C and U+000D as `\b \t \n \f \r`, the other control
/// characters below U+0020 as `\u00XX`; everything else (DEL and non-ASCII included) is written
/// as its UTF-8 bytes.
pub fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{08}' | '\t' | '\n' | '\u{0C}' | '\r' => 2,
        '\u{00}'..='\u{1F}' => 6,
        c => c.len_utf8(),
    }
}

// === impl Reassembler ===

/// Why a sequence of `chunk` frames could not be turned back into a frame. The chunked frame is
/// dropped; the [`Reassembler`] goes on with the next frame.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReassembleError {
    /// A chunk that does not continue the sequence in progress (wrong `index` or another `id`),
    /// or a sequence that does not start at index 0.
    #[error(
        "chunk {got_index} of id {} arrived where chunk {expected_index} of id {} was expected",
        show_id(.got_id),
        show_id(.expected_id)
    )]
    OutOfOrder {
        /// The id of the sequence in progress (`None` for `null`, or when none was).
        expected_id: Option<FrameId>,
        /// The index expected (0 when no sequence was in progress).
        expected_index: u32,
        /// The chunk's id.
        got_id: Option<FrameId>,
        /// The chunk's index.
        got_index: u32,
    },
    /// A frame other than a chunk arrived between the chunks of one frame. It is handed back in
    /// `frame` so it can still be handled.
    #[error(
        "a `{}` frame arrived after {received} chunk(s) of id {} and before its final chunk",
        .frame.type_name(),
        show_id(.id)
    )]
    Interrupted {
        /// The id of the interrupted sequence.
        id: Option<FrameId>,
        /// Chunks of it received.
        received: u32,
        /// The frame that interrupted it.
        frame: Box<Frame>,
    },
    /// The chunks add up to more than the reassembler's cap; the rest of the sequence is skipped.
    #[error("chunks of id {} add up to more than {max_bytes} bytes", show_id(.id))]
    TooLarge {
        /// The sequence's id.
        id: Option<FrameId>,
        /// The cap, in bytes.
        max_bytes: usize,
    },
    /// The reassembled text is not a frame.
    #[error("chunks of id {} do not reassemble into a frame: {message}", show_id(.id))]
    NotAFrame {
        /// The sequence's id.
        id: Option<FrameId>,
        /// serde_json's message, at most 240 characters.
        message: String,
    },
}

/// `null` or the id, for messages.
fn show_id(id: &Option<FrameId>) -> String {
    id.as_ref()
        .map_or_else(|| "null".to_owned(), |id| format!("{id:?}"))
}

impl From<ReassembleError> for GatewayError {
    /// `frame.chunk_invalid` for a broken sequence, `frame.too_large` for an over-cap one,
    /// `request.invalid` for text that is not a frame.
    fn from(error: ReassembleError) -> Self {
        let code = match &error {
            ReassembleError::OutOfOrder { .. } | ReassembleError::Interrupted { .. } => {
                codes::FRAME_CHUNK_INVALID
            }
            ReassembleError::TooLarge { .. } => codes::FRAME_TOO_LARGE,
            ReassembleError::NotAFrame { .. } => codes::REQUEST_INVALID,
        };
        GatewayError::new(
            code,
            error.to_string(),
            "Send the chunks of one frame in order (index 0, 1, …, the last with final: true), with no other frame between them, and their data concatenated must be one frame.",
        )
    }
}

/// A chunked frame being reassembled.
#[derive(Debug, Clone)]
struct Partial {
    id: Option<FrameId>,
    next_index: u32,
    text: String,
}

/// Client side of chunking (DESIGN §4): takes frames in the order they arrived and hands back
/// whole frames, reassembling `chunk` sequences.
///
/// Rules: a sequence starts at index 0, goes on with index 1, 2, … of the same `id` and ends with
/// the chunk marked `final`; no other frame may come between its chunks. When a sequence breaks,
/// its frame is dropped (one error) and the chunks that arrive later for its `id` with an index
/// above 0, up to a final one, are discarded silently. A chunk with index 0 always starts a new
/// sequence.
#[derive(Debug, Clone)]
pub struct Reassembler {
    // Invariant: `partial.text.len() <= max_bytes`.
    partial: Option<Partial>,
    /// After an error: the id whose chunks with index > 0 are discarded, until a final one.
    discarding: Option<Option<FrameId>>,
    max_bytes: usize,
}

impl Default for Reassembler {
    /// A reassembler whose frames may be up to 64 MiB ([`INBOUND_FRAME_CAP`]) of JSON.
    fn default() -> Self {
        Reassembler::new(INBOUND_FRAME_CAP as usize)
    }
}

impl Reassembler {
    /// A reassembler that refuses chunk sequences adding up to more than `max_bytes` of JSON.
    pub fn new(max_bytes: usize) -> Self {
        Reassembler {
            partial: None,
            discarding: None,
            max_bytes,
        }
    }

    /// Whether no chunk sequence is in progress.
    pub fn is_idle(&self) -> bool {
        self.partial.is_none()
    }

    /// Takes the next frame received. Returns `Ok(Some(frame))` for a frame that is not a chunk
    /// and for the frame a final chunk completes, `Ok(None)` for a chunk that does not complete
    /// one (or is discarded after an error).
    ///
    /// # Errors
    ///
    /// [`ReassembleError`] when the frame breaks the sequence in progress, the sequence grows over
    /// the cap, or a completed sequence is not a frame; see [`Reassembler`] for what happens next.
    pub fn push(&mut self, frame: Frame) -> Result<Option<Frame>, ReassembleError> {
        let chunk = match frame {
            Frame::Chunk(chunk) => chunk,
            other => {
                return match self.partial.take() {
                    Some(partial) => Err(ReassembleError::Interrupted {
                        id: {
                            self.discarding = Some(partial.id.clone());
                            partial.id
                        },
                        received: partial.next_index,
                        frame: Box::new(other),
                    }),
                    None => Ok(Some(other)),
                };
            }
        };
        let ChunkFrame {
            id,
            index,
            last,
            data,
        } = chunk;

        let mut partial = match self.partial.take() {
            Some(partial) if partial.next_index == index && partial.id == id => partial,
            Some(partial) => {
                // A broken sequence; an index-0 chunk starts a new one.
                if index == 0 && !last && data.len() <= self.max_bytes {
                    self.discarding = None;
                    self.partial = Some(Partial {
                        id: id.clone(),
                        next_index: 1,
                        text: data,
                    });
                } else if !(last && id == partial.id) {
                    self.discarding = Some(partial.id.clone());
                }
                return Err(ReassembleError::OutOfOrder {
                    expected_id: partial.id,
                    expected_index: partial.next_index,
                    got_id: id,
                    got_index: index,
                });
            }
            None if index == 0 => {
                self.discarding = None;
                Partial {
                    id,
                    next_index: 0,
                    text: String::new(),
                }
            }
            None if self.discarding.as_ref() == Some(&id) => {
                if last {
                    self.discarding = None;
                }
                return Ok(None);
            }
            None => {
                self.discarding = (!last).then(|| id.clone());
                return Err(ReassembleError::OutOfOrder {
                    expected_id: None,
                    expected_index: 0,
                    got_id: id,
                    got_index: index,
                });
            }
        };

        if data.len() > self.max_bytes - partial.text.len() {
            self.discarding = (!last).then(|| partial.id.clone());
            return Err(ReassembleError::TooLarge {
                id: partial.id,
                max_bytes: self.max_bytes,
            });
        }
        partial.text.push_str(&data);
        if !last {
            let Some(next_index) = partial.next_index.checked_add(1) else {
                self.discarding = Some(partial.id.clone());
                return Err(ReassembleError::TooLarge {
                    id: partial.id,
                    max_bytes: self.max_bytes,
                });
            };
            partial.next_index = next_index;
            self.partial = Some(partial);
            return Ok(None);
        }
        parse_frame_text(&partial.text)
            .map(Some)
            .map_err(|(_, message)| ReassembleError::NotAFrame {
                id: partial.id,
                message,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The escape table agrees with serde_json for every ASCII character and a few others.
    #[test]
    fn escaped_len_matches_serde_json() {
        let others = ['\u{7F}', '\u{80}', 'é', '€', '\u{2028}', '\u{FFFD}', '😀'];
        for c in (0u8..=0x7F).map(char::from).chain(others) {
            let quoted = serde_json::to_string(&c.to_string()).expect("serializes");
            assert_eq!(escaped_len(c), quoted.len() - 2, "{c:?} → {quoted}");
        }
    }
}
