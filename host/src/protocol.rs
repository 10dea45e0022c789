//! Wire types of the Local Agent Gateway protocol (`shared/seeds/protocol-draft.md`, DESIGN §4–§5).
//!
//! **Invariant:** this module does no I/O. It holds serde types only; the engine converts to and
//! from them at the edge.
//!
//! - [`envelope`]: the common response and error objects (draft §4).
//! - [`capability`]: `GET /v1/health` and `GET /v1/capabilities` data (draft §5).
//! - [`request`]: request bodies of mapping (§6), chat (§7), review (§8), cancel (§9) and
//!   direct tool calls (§10), and this gateway's dismissals (issue 17).
//! - [`event`]: [`AgentEvent`] and its payloads (draft §7, §8, §11; DESIGN §5).
//! - [`finding`]: [`ReviewFinding`] (draft §11).
//! - [`frame`]: the frames of the native-messaging and WebSocket transports (DESIGN §4).
//! - [`codec`]: their native-messaging byte framing (length prefix, caps, chunking), sans-IO.
//! - [`json`]: how client JSON is read on every route and transport (duplicate keys refused,
//!   near-miss field names named).
//!
//! All JSON field names are camelCase. Optional fields are omitted when absent, and unknown
//! fields are ignored on input so optional fields can be added within `/v1` (draft §14) — but
//! a key that is a near miss of a field (`requestID`) is refused by [`json::decode`], and a key
//! given twice in one object by [`json::parse_strict`].

pub mod capability;
pub mod codec;
pub mod envelope;
pub mod event;
pub mod finding;
pub mod frame;
pub mod json;
pub mod request;

pub use capability::{
    Capabilities, CommandCapabilities, ConfigHealth, ConfigStatus, Health, Limits, ProviderHealth,
    ProviderStatus, RuleCapabilities, StoreHealth, StoreStatus, ToolCallResult, ToolDescription,
};
pub use codec::{
    Decoded, Decoder, EncodeError, FrameError, Frames, INBOUND_FRAME_CAP, LENGTH_PREFIX_BYTES,
    OUTBOUND_FRAME_CAP, ReassembleError, Reassembler, encode, encode_chunked, encode_raw,
};
pub use envelope::{ApiResponse, ErrorObject, MAX_REQUEST_ID_CHARS, check_request_id};
pub use event::{
    AgentEvent, ContextAdded, ContextItem, DiffContext, EventPayload, FileContext, FileCounts,
    FindingCreated, InterruptReason, ModelContext, PermissionReplied, PermissionRequested,
    RevisionsContext, RuleSetSummary, RuleSetsContext, RunCancelled, RunCompleted, RunCreated,
    RunFailed, RunInterrupted, RunKind, RunState, SkippedFile, Stage, StageChanged, TextDelta,
    ToolCompleted, ToolStarted, Usage, Warning,
};
pub use finding::{
    Confidence, Evidence, FindingSource, FindingStatus, ReviewFinding, Severity, Side,
};
pub use frame::{
    ChunkFrame, ErrorFrame, EventFrame, Frame, FrameId, HelloFrame, IdFrame, RequestFrame,
    ResponseFrame,
};
pub use request::{
    CancelRequest, ChatContext, ChatMessage, ChatRequest, ChatRole, DiffRefs, DismissRequest,
    Dismissal, Effort, RepositoryMappingRequest, ReviewMode, ReviewPolicy, ReviewRequest,
    ReviewScope, ReviewTarget, ScopeSelection, SelectionContext, ToolCallRequest, UndismissRequest,
};
