//! The loopback security model (DESIGN §9, draft §13; issue 3 part 8): the local bearer token
//! file, and the pure `Host` / `Origin` / `Authorization` policy functions the transports apply
//! to every request.
//!
//! **Invariant:** the policy functions do no I/O and hold no state; the token never appears in a
//! `Debug` or `Display` rendering.

mod error;
pub mod fs;
mod host;
mod live;
mod origin;
pub mod redact;
pub mod secrets;
mod token;

pub use error::SecurityError;
pub use host::{
    HostRefusal, PublicHosts, check_host, check_host_with_public, host_allowed,
    public_host_allowed, public_host_name_error,
};
pub use live::LiveToken;
pub use origin::{origin_allowed, own_origin};
pub use redact::Redactor;
pub use token::{Token, bearer_token};

/// `bytes` bytes from the operating system's random source as lower-case hex (`2 × bytes`
/// characters): the random part of the `ws_` and `proc_` handles and of a managed OpenCode
/// server's password. `what` names the value in the error.
///
/// # Errors
/// `internal` when the random source fails.
pub fn random_hex(bytes: usize, what: &str) -> Result<String, crate::error::GatewayError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| {
        crate::error::GatewayError::new(
            crate::error::codes::INTERNAL,
            format!("the OS gave no random bytes for {what}: {e}"),
            "Check the system's random source, then report this with the gateway log.",
        )
    })?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}
