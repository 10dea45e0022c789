//! Transports (DESIGN §2): they map routes and frames to [`crate::engine::Gateway`] calls and
//! events to bytes. **Invariant:** no business logic here.
//!
//! - [`http`]: the `/v1` routes over HTTP + SSE, with the loopback security model.
//! - [`server`]: binding, serving and graceful shutdown of the daemon.

pub mod http;
pub mod server;
