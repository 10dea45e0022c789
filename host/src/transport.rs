//! Transports (DESIGN §2): they map routes and frames to [`crate::engine::Gateway`] calls and
//! events to bytes. **Invariant:** no business logic here.
//!
//! - [`http`]: the `/v1` routes over HTTP + SSE, with the loopback security model.
//! - [`server`]: binding, serving and graceful shutdown of the daemon.
//! - [`ws`]: `GET /v1/ws`, the frames of DESIGN §4 over a WebSocket.
//! - [`frames`]: the transport-agnostic frame dispatcher (frames in, the `/v1` router, frames out).
//! - [`native`]: `native-host`, the native-messaging relay between a browser's pipes and `/v1/ws`.

pub mod frames;
pub mod http;
pub mod mcp_stdio;
pub mod native;
pub mod server;
pub mod ws;
