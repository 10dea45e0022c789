//! Wire types of the Local Agent Gateway protocol (`shared/seeds/protocol-draft.md`, DESIGN §4–§5).
//!
//! **Invariant:** this module does no I/O. It holds serde types only; the engine converts to and
//! from them at the edge.

pub mod finding;

pub use finding::{
    Confidence, Evidence, FindingSource, FindingStatus, ReviewFinding, Severity, Side,
};
